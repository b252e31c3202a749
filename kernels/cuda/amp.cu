// Loss-scale bookkeeping on the GPU, with all state on the device so that a training step
// never waits for the host (and can be captured in a CUDA graph):
//  - unscale_grads: one multi-tensor launch turns scaled grads of any dtype into fp32 grads
//    (overwriting or accumulating) and raises found_inf on any non-finite input;
//  - scale_inplace: multiply a tensor by a host constant;
//  - loss_scaler_update: Apex's dynamic scale rule, run by a single thread.
#include <vector>

#include "core/backend.h"
#include "cuda/cuda_util.cuh"
#include "cuda/kernel_launch.cuh"
#include "cuda/multi_tensor.cuh"
#include "cuda/unscale_math.cuh"

namespace ge {
namespace gpu {
namespace {

constexpr int kUnscaleTensors = 48;
using UnscaleTable = TensorTable<2, kUnscaleTensors>;  // buffer 0: src (any dtype), 1: dst (f32)

// dst = src / scale (+ dst). The inverse scale is read on the device; scales are powers of two,
// so multiplying by the inverse is exact.
__global__ void unscale_kernel(UnscaleTable table, const float* scale, float* found_inf, bool accumulate) {
  await_previous_kernel();
  int tensor;
  int64_t begin, end;
  locate_chunk(table, blockIdx.x, tensor, begin, end);
  const void* src = table.ptr[0][tensor];
  float* dst = static_cast<float*>(table.ptr[1][tensor]);
  const ElemType src_type = table.type[0][tensor];
  ElementUnscale unscale{1.f / scale[0], accumulate};
  const int64_t stride = blockDim.x;
  for (int64_t first = begin + threadIdx.x; first < end; first += kElemsInFlight * stride) {
    uint32_t bits[kElemsInFlight];
    float prev[kElemsInFlight];
#pragma unroll
    for (int j = 0; j < kElemsInFlight; ++j) {
      const int64_t i = first + j * stride;
      if (i >= end) break;
      bits[j] = load_bits_dyn(src, src_type, i);
      if (accumulate) prev[j] = dst[i];
    }
#pragma unroll
    for (int j = 0; j < kElemsInFlight; ++j) {
      const int64_t i = first + j * stride;
      if (i >= end) break;
      dst[i] = unscale(bits_to_float(src_type, bits[j]), accumulate ? prev[j] : 0.f);
    }
  }
  // Every writer stores the same 1.0, so the race between blocks is benign.
  if (__syncthreads_or(unscale.saw_non_finite) && threadIdx.x == 0) found_inf[0] = 1.f;
}

template <class T>
__global__ void scale_kernel(T* data, int64_t n, float factor) {
  await_previous_kernel();
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    store_float(data + i, load_float(data + i) * factor);
}

// state = {scale, clean_steps}. Apex's update_scale: overflow halves the scale (not below the
// floor) and restarts the count; growth_interval clean steps in a row double it (not above the
// ceiling).
__global__ void loss_scaler_update_kernel(float* state, const float* found_inf, int growth_interval, float max_scale,
                                          float min_scale) {
  await_previous_kernel();
  float scale = state[0];
  float clean_steps = state[1];
  if (found_inf[0] != 0.f) {
    scale = fmaxf(min_scale, scale * 0.5f);
    clean_steps = 0.f;
  } else {
    clean_steps += 1.f;
    if (clean_steps >= static_cast<float>(growth_interval)) {
      scale = fminf(max_scale, scale * 2.f);
      clean_steps = 0.f;
    }
  }
  state[0] = scale;
  state[1] = clean_steps;
}

void check_f32_on_gpu(const Tensor& t, int64_t numel, const char* what) {
  GE_CHECK(t.defined() && t.device().is_cuda() && t.dtype() == DType::F32 && t.numel() == numel, what,
           " must be an f32 tensor of ", numel, " element(s) on the GPU, is ",
           t.defined() ? t.str() : std::string("undefined"));
}

}  // namespace

void unscale_grads(const std::vector<Tensor>& src, const std::vector<Tensor>& dst, const Tensor& scale,
                   Tensor& found_inf, bool accumulate) {
  GE_CHECK(src.size() == dst.size(), "unscale_grads: ", src.size(), " sources but ", dst.size(), " destinations");
  check_f32_on_gpu(scale, 1, "unscale_grads scale");
  check_f32_on_gpu(found_inf, 1, "unscale_grads found_inf");
  std::vector<std::vector<const Tensor*>> buffers(2);
  for (size_t i = 0; i < src.size(); ++i) {
    check_gpu_float(src[i], "unscale_grads src");
    check_f32_on_gpu(dst[i], src[i].numel(), "unscale_grads dst");
    GE_CHECK(same_element_order(src[i], dst[i]),
             "unscale_grads: src and dst must store elements in the same order: ", src[i].str(), " vs ", dst[i].str());
    buffers[0].push_back(&src[i]);
    buffers[1].push_back(&dst[i]);
  }
  if (src.empty()) return;
  cudaStream_t stream = stream_of(scale);
  const float* scale_ptr = scale.data_as<float>();
  float* found_inf_ptr = found_inf.data_as<float>();
  for_each_table<2, kUnscaleTensors>(buffers, [&](const UnscaleTable& table, int blocks) {
    launch_kernel(unscale_kernel, blocks, kThreads, 0, stream, table, scale_ptr, found_inf_ptr, accumulate);
    CUDA_CHECK_LAUNCH();
  });
}

void scale_inplace(const Tensor& t, float factor) {
  check_gpu_float(t, "scale_inplace tensor");
  const int64_t n = t.numel();
  if (n == 0) return;
  GE_DISPATCH_FLOAT(t.dtype(), T, {
    launch_kernel(scale_kernel<T>, grid_for(n), kThreads, 0, stream_of(t), t.data_as<T>(), n, factor);
    CUDA_CHECK_LAUNCH();
  });
}

void loss_scaler_update(Tensor& state, const Tensor& found_inf, const ops::ScalerConfig& cfg) {
  check_f32_on_gpu(state, 2, "loss_scaler_update state");
  check_f32_on_gpu(found_inf, 1, "loss_scaler_update found_inf");
  if (!cfg.dynamic) return;  // a static scale never changes
  GE_CHECK(cfg.growth_interval > 0, "loss scaler growth_interval must be positive, is ", cfg.growth_interval);
  launch_kernel(loss_scaler_update_kernel, 1, 1, 0, stream_of(state), state.data_as<float>(),
                found_inf.data_as<float>(), cfg.growth_interval, cfg.max_scale, cfg.min_scale);
  CUDA_CHECK_LAUNCH();
}

}  // namespace gpu
}  // namespace ge
