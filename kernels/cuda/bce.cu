// BCEWithLogits (mean reduction, constant target) on the GPU.
// Forward: one block reduces all N logits. DCGAN has one logit per image (N = batch), so a
// single block is plenty, and a fixed per-thread stride plus a fixed shared-memory tree makes
// the sum bitwise reproducible from run to run. It accumulates in double: N can be large, the
// cost is nothing at this size, and the loss is then as exact as its fp32 result can be.
// Backward: element-wise, with the loss scale read on the device (no host round trip, so the
// step can be captured in a CUDA graph).
#include "core/backend.h"
#include "cuda/cuda_util.cuh"
#include "cuda/kernel_launch.cuh"

namespace ge {
namespace gpu {
namespace {

constexpr int kBceThreads = 1024;

// max(x,0) - x*t + log1p(exp(-|x|)): never overflows, whatever the sign of x.
__device__ __forceinline__ float bce_term(float x, float t) { return fmaxf(x, 0.f) - x * t + log1pf(expf(-fabsf(x))); }

// 1 / (1 + exp(-x)) without overflow for either sign of x (tiny probabilities stay non-zero).
__device__ __forceinline__ float sigmoid(float x) {
  if (x >= 0.f) return 1.f / (1.f + expf(-x));
  const float e = expf(x);
  return e / (1.f + e);
}

template <class T>
__global__ void __launch_bounds__(kBceThreads)
    bce_forward_kernel(const T* logits, int64_t n, float target, float* loss, float* mean_sigmoid) {
  await_previous_kernel();
  __shared__ double loss_part[kBceThreads];
  __shared__ double prob_part[kBceThreads];
  double loss_sum = 0.0, prob_sum = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += kBceThreads) {
    float x = load_float(logits + i);
    loss_sum += bce_term(x, target);
    prob_sum += sigmoid(x);
  }
  loss_part[threadIdx.x] = loss_sum;
  prob_part[threadIdx.x] = prob_sum;
  __syncthreads();
  for (int half = kBceThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      loss_part[threadIdx.x] += loss_part[threadIdx.x + half];
      prob_part[threadIdx.x] += prob_part[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    loss[0] = static_cast<float>(loss_part[0] / static_cast<double>(n));
    if (mean_sigmoid) mean_sigmoid[0] = static_cast<float>(prob_part[0] / static_cast<double>(n));
  }
}

// dlogits = (sigmoid(x) - t) * scale / N, the gradient of the mean loss times the loss scale.
template <class T>
__global__ void bce_backward_kernel(const T* logits, int64_t n, float target, const float* scale, T* dlogits) {
  await_previous_kernel();
  const float factor = scale[0] / static_cast<float>(n);
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    store_float(dlogits + i, (sigmoid(load_float(logits + i)) - target) * factor);
}

void check_scalar_f32(const Tensor& t, const char* what) {
  GE_CHECK(t.device().is_cuda() && t.dtype() == DType::F32 && t.numel() == 1, what,
           " must be an f32 tensor of one element on the GPU, is ", t.str());
}

}  // namespace

void bce_with_logits_forward(const Tensor& logits, float target, Tensor& loss, Tensor& mean_sigmoid) {
  check_gpu_float(logits, "bce logits");
  check_scalar_f32(loss, "bce loss");
  if (mean_sigmoid.defined()) check_scalar_f32(mean_sigmoid, "bce mean_sigmoid");
  const int64_t n = logits.numel();
  GE_CHECK(n > 0, "bce_with_logits_forward: no logits");
  float* mean_sigmoid_ptr = mean_sigmoid.defined() ? mean_sigmoid.data_as<float>() : nullptr;
  GE_DISPATCH_FLOAT(logits.dtype(), T, {
    launch_kernel(bce_forward_kernel<T>, 1, kBceThreads, 0, stream_of(logits), logits.data_as<T>(), n, target,
                  loss.data_as<float>(), mean_sigmoid_ptr);
    CUDA_CHECK_LAUNCH();
  });
}

void bce_with_logits_backward(const Tensor& logits, float target, const Tensor& scale, Tensor& dlogits) {
  check_gpu_float(logits, "bce logits");
  check_scalar_f32(scale, "bce scale");
  GE_CHECK(dlogits.dtype() == logits.dtype() && same_element_order(dlogits, logits),
           "bce dlogits must match logits: ", dlogits.str(), " vs ", logits.str());
  const int64_t n = logits.numel();
  GE_CHECK(n > 0, "bce_with_logits_backward: no logits");
  GE_DISPATCH_FLOAT(logits.dtype(), T, {
    launch_kernel(bce_backward_kernel<T>, grid_for(n), kThreads, 0, stream_of(logits), logits.data_as<T>(), n, target,
                  scale.data_as<float>(), dlogits.data_as<T>());
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace gpu
}  // namespace ge
