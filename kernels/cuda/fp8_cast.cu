// ops::fp8_quantize, ops::fp8_dequantize and ops::fp8_round_trip on the GPU, each element through
// core/fp8_scaling_math.h, bitwise what the CPU reference kernels/cpu/fp8_cast.cpp computes.
//
// Quantizing is two launches: a one-thread kernel that zeroes amax, then a grid-stride pass that
// writes the codes and reduces fp8_amax_key over its elements (a warp shuffle, then the block's
// warps), each block folding its maximum into amax with an integer atomicMax. Integer max is exact
// and order-free, so the result is the CPU's whatever the schedule, NaN included. The scale is read
// from device memory and nothing returns to the host: both launches are capturable in a CUDA graph.
// Assumes codes (u8) and values (f32, f16 or bf16) store their elements in the same order (same
// shape and memory format, which ops::fp8_quantize checks) and nothing else about alignment. The
// quantizing and the round trip of 16-byte aligned f16 or bf16 tensors (codes 8-byte aligned),
// O4's every operand, move eight values a thread and convert on the hardware's FP8 instructions;
// the tests hold both forms to the CPU bitwise.
#include <cstdint>
#include <string>

#include "core/backend.h"
#include "core/fp8_scaling_math.h"
#include "cuda/cuda_util.cuh"
#include "cuda/fp8_round_trip.cuh"
#include "cuda/kernel_launch.cuh"

namespace ge {
namespace gpu {
namespace {

// Elements a thread loads before it converts any, so that several loads are in flight at once.
constexpr int kInFlight = 4;

__global__ void zero_amax_kernel(uint32_t* amax) {
  await_previous_kernel();
  *amax = 0u;
}

// Calls per_value(i, x[i] as f32) for every element of x in a grid-stride loop, each thread
// loading kInFlight elements before it converts any.
template <class PerValue>
__device__ __forceinline__ void for_each_value(const void* x, ElemType x_type, int64_t n, PerValue&& per_value) {
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
      per_value(i, bits_to_float(x_type, bits[j]));
    }
  }
}

__global__ void quantize_kernel(const void* x, ElemType x_type, int64_t n, const float* scale, Fp8Format format,
                                uint8_t* q, uint32_t* amax) {
  await_previous_kernel();
  const float s = *scale;
  uint32_t key = 0;
  for_each_value(x, x_type, n, [&](int64_t i, float v) {
    q[i] = fp8_quantize_element(v, s, format);
    key = max(key, fp8_amax_key(v));
  });
  fold_amax_key(key, amax);
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

// ops::fp8_round_trip: as quantize_kernel, writing each element's round trip in y's dtype (and
// its code where codes is not null), and folding the blocks' maxima into amax as it holds them (no
// zeroing launch: the op accumulates).
__global__ void round_trip_kernel(const void* x, ElemType x_type, int64_t n, const float* scale, const float* scale_inv,
                                  Fp8Format format, void* y, ElemType y_type, uint32_t* amax, uint8_t* codes) {
  await_previous_kernel();
  const float s = *scale, s_inv = *scale_inv;
  uint32_t key = 0;
  for_each_value(x, x_type, n, [&](int64_t i, float v) {
    const uint8_t code = fp8_quantize_element(v, s, format);
    if (codes) codes[i] = code;
    store_float_dyn(y, y_type, i, fp8_round_trip_of_code(v, code, s_inv, format));
    key = max(key, fp8_amax_key(v));
  });
  if (amax) fold_amax_key(key, amax);  // amax is the same for the whole grid
}

// Calls per_pack(i, pack i) for every whole pack of eight values of x (a 16-byte access) in a
// grid-stride loop, each thread loading kInFlight packs before it converts any, then per_tail(i)
// for each of the n % 8 values past the last whole pack, on block 0's first threads, one each.
template <class T, class PerPack, class PerTail>
__device__ __forceinline__ void for_each_pack(const T* x, int64_t n, PerPack&& per_pack, PerTail&& per_tail) {
  using Packed = Pack<T, 8>;
  const int64_t packs = n / 8, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const auto* in = reinterpret_cast<const Packed*>(x);
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; first < packs;
       first += kInFlight * stride) {
    Packed v[kInFlight];
#pragma unroll
    for (int j = 0; j < kInFlight; ++j)
      if (first + j * stride < packs) v[j] = in[first + j * stride];
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) {
      if (first + j * stride >= packs) break;
      per_pack(first + j * stride, v[j]);
    }
  }
  const int64_t tail = packs * 8 + threadIdx.x;
  if (blockIdx.x == 0 && tail < n) per_tail(tail);
}

// round_trip_kernel by for_each_pack: x and y share a 16-bit type and are 16-byte aligned; a tail
// value goes as a pack of one. A pack's eight codes are one 8-byte store where codes is 8-byte
// aligned.
template <class T, Fp8Format F>
__global__ void round_trip_vector_kernel(const T* x, int64_t n, const float* scale, const float* scale_inv, T* y,
                                         uint32_t* amax, uint8_t* codes) {
  await_previous_kernel();
  const float s = *scale, s_inv = *scale_inv;
  uint32_t key = 0;
  auto* out = reinterpret_cast<Pack<T, 8>*>(y);
  for_each_pack(
      x, n,
      [&](int64_t i, Pack<T, 8>& v) {
        fp8_round_trip_pack<F>(v, s, s_inv, key, codes ? codes + 8 * i : nullptr);
        out[i] = v;
      },
      [&](int64_t i) {
        Pack<T, 1> one{{x[i]}};
        fp8_round_trip_pack<F>(one, s, s_inv, key, codes ? codes + i : nullptr);
        y[i] = one.v[0];
      });
  if (amax) fold_amax_key(key, amax);
}

// quantize_kernel by for_each_pack, a pack's eight codes an 8-byte store: x a 16-bit type 16-byte
// aligned, q 8-byte aligned.
template <class T, Fp8Format F>
__global__ void quantize_vector_kernel(const T* x, int64_t n, const float* scale, uint8_t* q, uint32_t* amax) {
  await_previous_kernel();
  const float s = *scale;
  uint32_t key = 0;
  auto* out = reinterpret_cast<uint2*>(q);
  for_each_pack(
      x, n, [&](int64_t i, const Pack<T, 8>& v) { out[i] = fp8_quantize_pack<F>(v, s, key); },
      [&](int64_t i) {
        const float v = load_float(&x[i]);
        q[i] = fp8_quantize_element(v, s, F);
        key = max(key, fp8_amax_key(v));
      });
  fold_amax_key(key, amax);
}

// The vector quantize where x is a 16-bit type 16-byte aligned and q 8-byte aligned, else false.
template <class T>
void launch_quantize_vector(const Tensor& x, const float* scale, Fp8Format format, Tensor& q, uint32_t* amax) {
  const int64_t n = x.numel();
  const auto* xp = static_cast<const T*>(x.data());
  auto* qp = q.data_as<uint8_t>();
  const unsigned grid = grid_for(ceil_div(ceil_div(n, 8), kInFlight));
  if (format == Fp8Format::E4M3)
    launch_kernel(quantize_vector_kernel<T, Fp8Format::E4M3>, grid, kThreads, 0, stream_of(x), xp, n, scale, qp, amax);
  else
    launch_kernel(quantize_vector_kernel<T, Fp8Format::E5M2>, grid, kThreads, 0, stream_of(x), xp, n, scale, qp, amax);
}

bool quantize_vector(const Tensor& x, const float* scale, Fp8Format format, Tensor& q, uint32_t* amax) {
  if (reinterpret_cast<uintptr_t>(x.data()) % 16 != 0 || reinterpret_cast<uintptr_t>(q.data()) % 8 != 0) return false;
  if (x.dtype() == DType::F16)
    launch_quantize_vector<__half>(x, scale, format, q, amax);
  else if (x.dtype() == DType::BF16)
    launch_quantize_vector<__nv_bfloat16>(x, scale, format, q, amax);
  else
    return false;
  return true;
}

// The vector kernel where x and y are one 16-bit type and 16-byte aligned, else nullptr.
using RoundTripVectorLaunch = void (*)(const Tensor&, const float*, const float*, Fp8Format, Tensor&, uint32_t*,
                                       uint8_t*);
template <class T>
void launch_round_trip_vector(const Tensor& x, const float* scale, const float* scale_inv, Fp8Format format, Tensor& y,
                              uint32_t* amax, uint8_t* codes) {
  const int64_t n = x.numel();
  const auto* xp = static_cast<const T*>(x.data());
  auto* yp = static_cast<T*>(y.data());
  const unsigned grid = grid_for(ceil_div(ceil_div(n, 8), kInFlight));
  if (format == Fp8Format::E4M3)
    launch_kernel(round_trip_vector_kernel<T, Fp8Format::E4M3>, grid, kThreads, 0, stream_of(x), xp, n, scale,
                  scale_inv, yp, amax, codes);
  else
    launch_kernel(round_trip_vector_kernel<T, Fp8Format::E5M2>, grid, kThreads, 0, stream_of(x), xp, n, scale,
                  scale_inv, yp, amax, codes);
}

RoundTripVectorLaunch vector_round_trip_for(const Tensor& x, const Tensor& y) {
  const bool aligned =
      reinterpret_cast<uintptr_t>(x.data()) % 16 == 0 && reinterpret_cast<uintptr_t>(y.data()) % 16 == 0;
  if (!aligned || x.dtype() != y.dtype()) return nullptr;
  if (x.dtype() == DType::F16) return launch_round_trip_vector<__half>;
  if (x.dtype() == DType::BF16) return launch_round_trip_vector<__nv_bfloat16>;
  return nullptr;
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
  if (quantize_vector(x, scale.data_as<const float>(), format, q, amax_key)) {
    CUDA_CHECK_LAUNCH();
    return;
  }
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

void fp8_round_trip(const Tensor& x, const Tensor& scale, const Tensor& scale_inv, Fp8Format format, Tensor& y,
                    const Tensor* amax, Tensor* codes) {
  check_gpu_float(x, "fp8_round_trip x");
  check_gpu_float(y, "fp8_round_trip y");
  check_gpu(scale, "fp8_round_trip scale");
  check_gpu(scale_inv, "fp8_round_trip scale_inv");
  if (amax) check_gpu(*amax, "fp8_round_trip amax");
  if (codes) check_gpu(*codes, "fp8_round_trip codes");
  GE_CHECK(same_element_order(x, y), "fp8_round_trip: y ", y.str(), " must store its elements in the order of ",
           x.str());
  GE_CHECK(!codes || same_element_order(x, *codes), "fp8_round_trip: codes ", codes ? codes->str() : std::string(),
           " must store their elements in the order of ", x.str());
  const int64_t n = x.numel();
  if (n == 0) return;
  auto* amax_key = amax ? static_cast<uint32_t*>(amax->data()) : nullptr;
  uint8_t* q = codes ? codes->data_as<uint8_t>() : nullptr;
  if (RoundTripVectorLaunch vector = vector_round_trip_for(x, y)) {
    vector(x, scale.data_as<const float>(), scale_inv.data_as<const float>(), format, y, amax_key, q);
    CUDA_CHECK_LAUNCH();
    return;
  }
  launch_kernel(round_trip_kernel, grid_for(ceil_div(n, kInFlight)), kThreads, 0, stream_of(x),
                static_cast<const void*>(x.data()), elem_type(x.dtype()), n, scale.data_as<const float>(),
                scale_inv.data_as<const float>(), format, y.data(), elem_type(y.dtype()), amax_key, q);
  CUDA_CHECK_LAUNCH();
}

}  // namespace gpu
}  // namespace ge
