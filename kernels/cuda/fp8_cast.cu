// ops::fp8_quantize and ops::fp8_dequantize on the GPU, each element through
// core/fp8_scaling_math.h, bitwise what the CPU reference kernels/cpu/fp8_cast.cpp computes.
//
// Quantizing is two launches: a one-thread kernel that zeroes amax, then a grid-stride pass that
// writes the codes and reduces fp8_amax_key over its elements (a warp shuffle, then the block's
// warps), each block folding its maximum into amax with an integer atomicMax. Integer max is exact
// and order-free, so the result is the CPU's whatever the schedule, NaN included. The scale is read
// from device memory and nothing returns to the host: both launches are capturable in a CUDA graph.
// Assumes codes (u8) and values (f32, f16 or bf16) store their elements in the same order (same
// shape and memory format, which ops::fp8_quantize checks) and nothing else about alignment.
#include <cstdint>
#include <string>

#include "core/backend.h"
#include "core/fp8_scaling_math.h"
#include "cuda/cuda_util.cuh"
#include "cuda/kernel_launch.cuh"

namespace ge {
namespace gpu {
namespace {

// Elements a thread loads before it converts any, so that several loads are in flight at once.
constexpr int kInFlight = 4;
constexpr int kWarps = kThreads / 32;

__global__ void zero_amax_kernel(uint32_t* amax) {
  await_previous_kernel();
  *amax = 0u;
}

__global__ void quantize_kernel(const void* x, ElemType x_type, int64_t n, const float* scale, Fp8Format format,
                                uint8_t* q, uint32_t* amax) {
  await_previous_kernel();
  const float s = *scale;
  uint32_t key = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; first < n;
       first += kInFlight * stride) {
    uint32_t bits[kInFlight];
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) {
      const int64_t i = first + j * stride;
      if (i < n) bits[j] = load_bits_dyn(x, x_type, i);
    }
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) {
      const int64_t i = first + j * stride;
      if (i >= n) break;
      const float v = bits_to_float(x_type, bits[j]);
      q[i] = fp8_quantize_element(v, s, format);
      key = max(key, fp8_amax_key(v));
    }
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) key = max(key, __shfl_xor_sync(0xffffffffu, key, offset));
  __shared__ uint32_t warp_max[kWarps];
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = key;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t block_max = 0;
    for (int w = 0; w < kWarps; ++w) block_max = max(block_max, warp_max[w]);
    if (block_max != 0u) atomicMax(amax, block_max);
  }
}

__global__ void dequantize_kernel(const uint8_t* q, int64_t n, const float* scale_inv, Fp8Format format, void* y,
                                  ElemType y_type) {
  await_previous_kernel();
  const float s = *scale_inv;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; first < n;
       first += kInFlight * stride) {
    uint8_t codes[kInFlight];
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) {
      const int64_t i = first + j * stride;
      if (i < n) codes[j] = q[i];
    }
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) {
      const int64_t i = first + j * stride;
      if (i >= n) break;
      store_float_dyn(y, y_type, i, fp8_dequantize_element(codes[j], s, format));
    }
  }
}

void check_gpu(const Tensor& t, const char* what) {
  GE_CHECK(t.defined() && t.device().is_cuda(), what, " must be on a CUDA device, is ",
           t.defined() ? t.str() : std::string("undefined"));
}

}  // namespace

void fp8_quantize(const Tensor& x, const Tensor& scale, Fp8Format format, Tensor& q, Tensor& amax) {
  check_gpu_float(x, "fp8_quantize x");
  check_gpu(scale, "fp8_quantize scale");
  check_gpu(q, "fp8_quantize q");
  check_gpu(amax, "fp8_quantize amax");
  GE_CHECK(q.dtype() == DType::U8 && same_element_order(x, q), "fp8_quantize: codes ", q.str(),
           " must be u8 in the element order of ", x.str());
  cudaStream_t stream = stream_of(x);
  auto* amax_key = static_cast<uint32_t*>(amax.data());
  launch_kernel(zero_amax_kernel, 1, 1, 0, stream, amax_key);
  CUDA_CHECK_LAUNCH();
  const int64_t n = x.numel();
  if (n == 0) return;
  launch_kernel(quantize_kernel, grid_for(ceil_div(n, kInFlight)), kThreads, 0, stream,
                static_cast<const void*>(x.data()), elem_type(x.dtype()), n, scale.data_as<const float>(), format,
                q.data_as<uint8_t>(), amax_key);
  CUDA_CHECK_LAUNCH();
}

void fp8_dequantize(const Tensor& q, const Tensor& scale_inv, Fp8Format format, Tensor& y) {
  check_gpu(q, "fp8_dequantize q");
  check_gpu(scale_inv, "fp8_dequantize scale_inv");
  check_gpu_float(y, "fp8_dequantize y");
  GE_CHECK(q.dtype() == DType::U8 && same_element_order(y, q), "fp8_dequantize: codes ", q.str(),
           " must be u8 in the element order of ", y.str());
  const int64_t n = q.numel();
  if (n == 0) return;
  launch_kernel(dequantize_kernel, grid_for(ceil_div(n, kInFlight)), kThreads, 0, stream_of(q),
                q.data_as<const uint8_t>(), n, scale_inv.data_as<const float>(), format, y.data(),
                elem_type(y.dtype()));
  CUDA_CHECK_LAUNCH();
}

}  // namespace gpu
}  // namespace ge
