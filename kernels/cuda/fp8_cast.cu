// ops::fp8_quantize, ops::fp8_dequantize, ops::fp8_round_trip and ops::fp8_round_trip_all (up to
// eight round trips in one launch, each block on one of them) on the GPU, each element through
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
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/fp8_scaling_math.h"
#include "cuda/aligned.h"
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
// stride loop over `blocks` blocks, this one the block-th, each thread loading kInFlight packs
// before it converts any, then per_tail(i) for each of the n % 8 values past the last whole pack, on
// block 0's first threads, one each.
template <class T, class PerPack, class PerTail>
__device__ __forceinline__ void for_each_pack(const T* x, int64_t n, unsigned block, unsigned blocks,
                                              PerPack&& per_pack, PerTail&& per_tail) {
  using Packed = Pack<T, 8>;
  const int64_t packs = n / 8, stride = static_cast<int64_t>(blocks) * blockDim.x;
  const auto* in = reinterpret_cast<const Packed*>(x);
  for (int64_t first = static_cast<int64_t>(block) * blockDim.x + threadIdx.x; first < packs;
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
  if (block == 0 && tail < n) per_tail(tail);
}

// The round trip of x's n values into y (and codes) by this block, the block-th of `blocks`,
// returning the amax key of the values it read: x and y share a 16-bit type and are 16-byte
// aligned; a tail value goes as a pack of one. A pack's eight codes are one 8-byte store where
// codes is 8-byte aligned.
template <class T, Fp8Format F>
__device__ __forceinline__ uint32_t round_trip_packs(const T* x, int64_t n, float s, float s_inv, T* y, uint8_t* codes,
                                                     unsigned block, unsigned blocks) {
  uint32_t key = 0;
  auto* out = reinterpret_cast<Pack<T, 8>*>(y);
  for_each_pack(
      x, n, block, blocks,
      [&](int64_t i, Pack<T, 8>& v) {
        fp8_round_trip_pack<F>(v, s, s_inv, key, codes ? codes + 8 * i : nullptr);
        out[i] = v;
      },
      [&](int64_t i) {
        Pack<T, 1> one{{x[i]}};
        fp8_round_trip_pack<F>(one, s, s_inv, key, codes ? codes + i : nullptr);
        y[i] = one.v[0];
      });
  return key;
}

// round_trip_kernel by round_trip_packs.
template <class T, Fp8Format F>
__global__ void round_trip_vector_kernel(const T* x, int64_t n, const float* scale, const float* scale_inv, T* y,
                                         uint32_t* amax, uint8_t* codes) {
  await_previous_kernel();
  const uint32_t key = round_trip_packs<T, F>(x, n, *scale, *scale_inv, y, codes, blockIdx.x, gridDim.x);
  if (amax) fold_amax_key(key, amax);
}

// Up to kMaxTrips round trips of round_trip_vector_kernel's operands, trip t taking blocks
// first_block[t] .. first_block[t + 1] - 1 of one grid (first_block[count] its size).
constexpr int kMaxTrips = 8;
template <class T>
struct RoundTripTrips {
  const T* x[kMaxTrips];
  T* y[kMaxTrips];
  uint8_t* codes[kMaxTrips];
  const float* scale[kMaxTrips];
  const float* scale_inv[kMaxTrips];
  uint32_t* amax[kMaxTrips];
  int64_t n[kMaxTrips];
  unsigned first_block[kMaxTrips + 1];
  int count;
};

template <class T, Fp8Format F>
__global__ void round_trip_trips_kernel(const RoundTripTrips<T> trips) {
  await_previous_kernel();
  int t = 0;
  while (t + 1 < trips.count && blockIdx.x >= trips.first_block[t + 1]) ++t;
  const unsigned block = blockIdx.x - trips.first_block[t], blocks = trips.first_block[t + 1] - trips.first_block[t];
  const uint32_t key = round_trip_packs<T, F>(trips.x[t], trips.n[t], *trips.scale[t], *trips.scale_inv[t], trips.y[t],
                                              trips.codes[t], block, blocks);
  if (trips.amax[t]) fold_amax_key(key, trips.amax[t]);
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
      x, n, blockIdx.x, gridDim.x, [&](int64_t i, const Pack<T, 8>& v) { out[i] = fp8_quantize_pack<F>(v, s, key); },
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
  if (!aligned16(x.data()) || !aligned_to(q.data(), 8)) return false;
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
  if (!aligned16(x.data()) || !aligned16(y.data()) || x.dtype() != y.dtype()) return nullptr;
  if (x.dtype() == DType::F16) return launch_round_trip_vector<__half>;
  if (x.dtype() == DType::BF16) return launch_round_trip_vector<__nv_bfloat16>;
  return nullptr;
}

// fp8_round_trip_all's trips in launches of round_trip_trips_kernel, kMaxTrips a launch, each trip
// with as many blocks as fp8_round_trip gives it alone; every trip's x and y T, format F.
template <class T, Fp8Format F>
void launch_round_trip_trips(const std::vector<const ops::Fp8RoundTripOf*>& trips) {
  for (size_t first = 0; first < trips.size(); first += kMaxTrips) {
    RoundTripTrips<T> args{};
    args.count = static_cast<int>(std::min<size_t>(kMaxTrips, trips.size() - first));
    unsigned blocks = 0;
    for (int t = 0; t < args.count; ++t) {
      const ops::Fp8RoundTripOf& trip = *trips[first + t];
      args.x[t] = static_cast<const T*>(trip.x.data());
      args.y[t] = static_cast<T*>(trip.y.data());
      args.codes[t] = trip.codes.defined() ? trip.codes.data_as<uint8_t>() : nullptr;
      args.scale[t] = trip.scale.data_as<const float>();
      args.scale_inv[t] = trip.scale_inv.data_as<const float>();
      args.amax[t] = trip.amax.defined() ? static_cast<uint32_t*>(trip.amax.data()) : nullptr;
      args.n[t] = trip.x.numel();
      args.first_block[t] = blocks;
      blocks += grid_for(ceil_div(ceil_div(args.n[t], 8), kInFlight));
    }
    args.first_block[args.count] = blocks;
    launch_kernel(round_trip_trips_kernel<T, F>, blocks, kThreads, 0, stream_of(trips[first]->x), args);
    CUDA_CHECK_LAUNCH();
  }
}

// Whether a trip can go into round_trip_trips_kernel with those of `first`'s dtype and format.
bool joins_round_trip_trips(const ops::Fp8RoundTripOf& trip, const ops::Fp8RoundTripOf& first) {
  const auto aligned = [](const Tensor& t, size_t bytes) { return !t.defined() || aligned_to(t.data(), bytes); };
  const bool half = trip.x.dtype() == DType::F16 || trip.x.dtype() == DType::BF16;
  return half && trip.x.dtype() == first.x.dtype() && trip.y.dtype() == trip.x.dtype() && trip.format == first.format &&
         aligned(trip.x, 16) && aligned(trip.y, 16) && aligned(trip.codes, 8);
}

void check_gpu(const Tensor& t, const char* what) {
  GE_CHECK(t.defined() && t.device().is_cuda(), what, " must be on a CUDA device, is ",
           t.defined() ? t.str() : std::string("undefined"));
}

void check_round_trip_operands(const char* op, const Tensor& x, const Tensor& y, const Tensor& scale,
                               const Tensor& scale_inv, const Tensor* amax, const Tensor* codes) {
  const std::string name(op);
  check_gpu_float(x, (name + " x").c_str());
  check_gpu_float(y, (name + " y").c_str());
  check_gpu(scale, (name + " scale").c_str());
  check_gpu(scale_inv, (name + " scale_inv").c_str());
  if (amax) check_gpu(*amax, (name + " amax").c_str());
  if (codes) check_gpu(*codes, (name + " codes").c_str());
  GE_CHECK(same_element_order(x, y), op, ": y ", y.str(), " must store its elements in the order of ", x.str());
  GE_CHECK(!codes || same_element_order(x, *codes), op, ": codes ", codes ? codes->str() : std::string(),
           " must store their elements in the order of ", x.str());
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
  check_round_trip_operands("fp8_round_trip", x, y, scale, scale_inv, amax, codes);
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

void fp8_round_trip_all(const std::vector<ops::Fp8RoundTripOf>& trips) {
  std::vector<const ops::Fp8RoundTripOf*> together, alone;
  for (const ops::Fp8RoundTripOf& trip : trips) {
    check_round_trip_operands("fp8_round_trip_all", trip.x, trip.y, trip.scale, trip.scale_inv,
                              trip.amax.defined() ? &trip.amax : nullptr, trip.codes.defined() ? &trip.codes : nullptr);
    if (trip.x.numel() > 0) (joins_round_trip_trips(trip, trips[0]) ? together : alone).push_back(&trip);
  }
  for (const ops::Fp8RoundTripOf* one : alone) {
    const ops::Fp8RoundTripOf& trip = *one;
    Tensor y = trip.y, codes = trip.codes;
    fp8_round_trip(trip.x, trip.scale, trip.scale_inv, trip.format, y, trip.amax.defined() ? &trip.amax : nullptr,
                   codes.defined() ? &codes : nullptr);
  }
  if (together.empty()) return;
  const bool f16 = together[0]->x.dtype() == DType::F16, e4m3 = together[0]->format == Fp8Format::E4M3;
  if (f16 && e4m3) launch_round_trip_trips<__half, Fp8Format::E4M3>(together);
  if (f16 && !e4m3) launch_round_trip_trips<__half, Fp8Format::E5M2>(together);
  if (!f16 && e4m3) launch_round_trip_trips<__nv_bfloat16, Fp8Format::E4M3>(together);
  if (!f16 && !e4m3) launch_round_trip_trips<__nv_bfloat16, Fp8Format::E5M2>(together);
}

}  // namespace gpu
}  // namespace ge
