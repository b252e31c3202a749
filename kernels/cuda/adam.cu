// Multi-tensor Adam on the GPU, PyTorch's formula (no weight decay, no amsgrad) in fp32:
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// Everything the decision needs lives on the device: the step count t (so bias corrections
// follow the real number of applied steps) and the skip flag raised by the loss scaler. That
// keeps the host out of the loop and the whole optimizer step capturable in a CUDA graph.
//
// Every block computes t = step[0] + 1 itself; the stored count is only advanced afterwards by
// a one-thread kernel on the same stream, so no block can see a half-updated step.
#include <vector>

#include "cuda_util.cuh"
#include "ganengine/adam_math.h"
#include "ganengine/backend.h"
#include "kernel_launch.cuh"
#include "multi_tensor.cuh"

namespace ge {
namespace gpu {
namespace {

enum AdamBuffer { kParam = 0, kGrad, kExpAvg, kExpAvgSq, kHalfCopy, kAdamBuffers };
constexpr int kAdamTensors = 32;
using AdamTable = TensorTable<kAdamBuffers, kAdamTensors>;

// Any nonzero flag means one of the optimizer's losses overflowed this step.
__device__ __forceinline__ bool any_flag(const float* skip, int count) {
  for (int i = 0; i < count; ++i)
    if (skip[i] != 0.f) return true;
  return false;
}

__global__ void adam_kernel(AdamTable table, const float* step, const float* skip, int skip_count, double lr,
                            double beta1, double beta2, double eps) {
  await_previous_kernel();
  if (any_flag(skip, skip_count)) return;  // the step overflowed: leave every buffer as it is
  int tensor;
  int64_t begin, end;
  locate_chunk(table, blockIdx.x, tensor, begin, end);

  // Scalars as PyTorch forms them from its Python-float hyper-parameters (adam_math.h).
  const AdamElementScalars s = adam_scalars(lr, beta1, beta2, eps, static_cast<double>(step[0]) + 1.0);

  // Parameters and moments share one dtype: f32 (masters, or fp32 models), or half at O3,
  // where the update is computed in fp32 and each buffer rounded once on store.
  void* param = table.ptr[kParam][tensor];
  const float* grad = static_cast<const float*>(table.ptr[kGrad][tensor]);
  void* exp_avg = table.ptr[kExpAvg][tensor];
  void* exp_avg_sq = table.ptr[kExpAvgSq][tensor];
  const ElemType state_type = table.type[kParam][tensor];
  void* half_copy = table.ptr[kHalfCopy][tensor];
  const ElemType half_type = table.type[kHalfCopy][tensor];

  const int64_t stride = blockDim.x;
  for (int64_t first = begin + threadIdx.x; first < end; first += kElemsInFlight * stride) {
    uint32_t p[kElemsInFlight], m[kElemsInFlight], v[kElemsInFlight];
    float g[kElemsInFlight];
#pragma unroll
    for (int j = 0; j < kElemsInFlight; ++j) {
      const int64_t i = first + j * stride;
      if (i >= end) break;
      p[j] = load_bits_dyn(param, state_type, i);
      m[j] = load_bits_dyn(exp_avg, state_type, i);
      v[j] = load_bits_dyn(exp_avg_sq, state_type, i);
      g[j] = grad[i];
    }
#pragma unroll
    for (int j = 0; j < kElemsInFlight; ++j) {
      const int64_t i = first + j * stride;
      if (i >= end) break;
      float pf = bits_to_float(state_type, p[j]), mf = bits_to_float(state_type, m[j]),
            vf = bits_to_float(state_type, v[j]);
      adam_element(s, g[j], pf, mf, vf);
      store_float_dyn(exp_avg, state_type, i, mf);
      store_float_dyn(exp_avg_sq, state_type, i, vf);
      store_float_dyn(param, state_type, i, pf);
      if (half_copy) store_float_dyn(half_copy, half_type, i, pf);
    }
  }
}

// Runs after every adam_kernel of the step, in stream order.
__global__ void advance_step_kernel(float* step, const float* skip, int skip_count) {
  await_previous_kernel();
  if (!any_flag(skip, skip_count)) step[0] += 1.f;
}

void check_like(const Tensor& t, const Tensor& param, DType dtype, const char* what) {
  GE_CHECK(t.defined() && t.device() == param.device() && t.dtype() == dtype && same_element_order(t, param),
           "adam_step: ", what, " must be ", dtype_name(dtype), " with ", param.numel(),
           " elements laid out as the parameter on ", param.device().str(), ", is ",
           t.defined() ? t.str() : std::string("undefined"));
}

}  // namespace

void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
               const std::vector<Tensor>& exp_avg, const std::vector<Tensor>& exp_avg_sq, Tensor& step,
               const Tensor& skip, const ops::AdamConfig& cfg, const std::vector<Tensor>& half_copies) {
  const size_t n = params.size();
  // List lengths are checked once, in ops::adam_step.
  GE_CHECK(step.device().is_cuda() && step.dtype() == DType::F32 && step.numel() == 1,
           "adam_step: step must be an f32 (1) GPU tensor, is ", step.str());
  GE_CHECK(skip.device().is_cuda() && skip.dtype() == DType::F32 && skip.numel() >= 1 && skip.numel() <= 8,
           "adam_step: skip must be an f32 (1..8) GPU tensor, is ", skip.str());
  const int skip_count = static_cast<int>(skip.numel());

  std::vector<std::vector<const Tensor*>> buffers(kAdamBuffers);
  std::vector<size_t> relaid_copies;  // half copies in another memory format than their master
  for (size_t i = 0; i < n; ++i) {
    GE_CHECK(params[i].device() == step.device() && params[i].dtype() == params[0].dtype() &&
                 (params[i].dtype() == DType::F32 || params[i].dtype() == DType::F16 ||
                  params[i].dtype() == DType::BF16),
             "adam_step: parameters must share one of f32/f16/bf16 on ", step.device().str(), ", got ",
             params[i].str());
    check_like(grads[i], params[i], DType::F32, "grad");
    check_like(exp_avg[i], params[i], params[i].dtype(), "exp_avg");
    check_like(exp_avg_sq[i], params[i], params[i].dtype(), "exp_avg_sq");
    const Tensor* half = nullptr;
    if (!half_copies.empty() && half_copies[i].defined()) {
      const Tensor& copy = half_copies[i];
      GE_CHECK(copy.device() == step.device() && copy.shape() == params[i].shape() &&
                   (copy.dtype() == DType::F16 || copy.dtype() == DType::BF16),
               "adam_step: half copy must be f16/bf16 shaped like its parameter ", params[i].str(),
               ", is ", copy.str());
      if (same_element_order(copy, params[i]))
        half = &copy;
      else
        relaid_copies.push_back(i);
    }
    buffers[kParam].push_back(&params[i]);
    buffers[kGrad].push_back(&grads[i]);
    buffers[kExpAvg].push_back(&exp_avg[i]);
    buffers[kExpAvgSq].push_back(&exp_avg_sq[i]);
    buffers[kHalfCopy].push_back(half);
  }

  cudaStream_t stream = stream_of(step);
  const float* step_ptr = step.data_as<float>();
  const float* skip_ptr = skip.data_as<float>();
  if (n > 0) {
    for_each_table<kAdamBuffers, kAdamTensors>(buffers, [&](const AdamTable& table, int blocks) {
      launch_kernel(adam_kernel, blocks, kThreads, 0, stream, table, step_ptr, skip_ptr, skip_count, cfg.lr, cfg.beta1,
                    cfg.beta2, cfg.eps);
      CUDA_CHECK_LAUNCH();
    });
  }
  launch_kernel(advance_step_kernel, 1, 1, 0, stream, step.data_as<float>(), skip_ptr, skip_count);
  CUDA_CHECK_LAUNCH();
  // A copy laid out differently is refreshed by a layout-converting cast. Doing it even on a
  // skipped step is harmless: the copy is then the unchanged master rounded again, as before.
  for (size_t i : relaid_copies) {
    Tensor copy = half_copies[i];
    cast(params[i], copy);
  }
}

}  // namespace gpu
}  // namespace ge
