// Small helpers shared by the hand-written CUDA kernels: float <-> storage type conversions,
// a switch from DType to a C++ type, launch-size arithmetic and argument checks.
// Kernels compute in float and round once on store (ops.h's precision contract), so every
// element access goes through load_float / store_float.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "ganengine/tensor.h"
#include "runtime/cuda_check.h"
#include "runtime/cuda_context.h"

namespace ge {
namespace gpu {

// ---- element conversions (round to nearest even on store, like half_bits.h on the CPU)
__device__ __forceinline__ float load_float(const float* p) { return *p; }
__device__ __forceinline__ float load_float(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ float load_float(const __nv_bfloat16* p) { return __bfloat162float(*p); }

__device__ __forceinline__ void store_float(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_float(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void store_float(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
// Two neighbouring elements (p 4-byte aligned for the 16-bit types) with one conversion that
// rounds both: bitwise store_float of each.
__device__ __forceinline__ void store_float2(float* p, float a, float b) { p[0] = a, p[1] = b; }
__device__ __forceinline__ void store_float2(__half* p, float a, float b) {
  *reinterpret_cast<__half2*>(p) = __floats2half2_rn(a, b);
}
__device__ __forceinline__ void store_float2(__nv_bfloat16* p, float a, float b) {
  *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(a, b);
}

// A word of two neighbouring 16-bit values (T: __half or __nv_bfloat16): its vector type, the
// word read as that type, and its two values as floats.
template <class T>
using Pair = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;
template <class T>
__device__ __forceinline__ Pair<T> as_pair(uint32_t w) {
  return *reinterpret_cast<const Pair<T>*>(&w);
}
template <class T>
__device__ __forceinline__ float2 unpack_pair(uint32_t w) {
  if constexpr (std::is_same_v<T, __half>)
    return __half22float2(as_pair<T>(w));
  else
    return __bfloat1622float2(as_pair<T>(w));
}

// Runtime dtype of a buffer, for kernels that serve several tensors of different types in one
// launch (multi-tensor ops). The branch is uniform per tensor, so warps do not diverge.
enum class ElemType : uint8_t { F32 = 0, F16 = 1, BF16 = 2 };

// Loading is split in two, the raw bits (nothing waits for the load yet) and the conversion,
// so that a kernel can load several elements before it uses any. A load that converts inside
// each dtype's branch waits there for its own data, and a run of them waits for one memory
// latency after another, far below memory bandwidth.
__device__ __forceinline__ uint32_t load_bits_dyn(const void* base, ElemType t, int64_t i) {
  if (t == ElemType::F32) return static_cast<const uint32_t*>(base)[i];
  return static_cast<const uint16_t*>(base)[i];
}
__device__ __forceinline__ float bits_to_float(ElemType t, uint32_t bits) {
  switch (t) {
    case ElemType::F16: return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
    case ElemType::BF16: return __bfloat162float(__ushort_as_bfloat16(static_cast<unsigned short>(bits)));
    default: return __uint_as_float(bits);
  }
}

__device__ __forceinline__ void store_float_dyn(void* base, ElemType t, int64_t i, float v) {
  switch (t) {
    case ElemType::F16: static_cast<__half*>(base)[i] = __float2half_rn(v); break;
    case ElemType::BF16: static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(v); break;
    default: static_cast<float*>(base)[i] = v; break;
  }
}

inline ElemType elem_type(DType t) {
  switch (t) {
    case DType::F32: return ElemType::F32;
    case DType::F16: return ElemType::F16;
    case DType::BF16: return ElemType::BF16;
    default: fail("CUDA kernels take f32, f16 or bf16 tensors, got ", dtype_name(t));
  }
}

// Runs the statement list with `scalar_t` bound to the C++ type of a floating DType.
#define GE_DISPATCH_FLOAT(dtype, scalar_t, ...)                                                         \
  do {                                                                                                  \
    switch (dtype) {                                                                                    \
      case ::ge::DType::F32: {                                                                          \
        using scalar_t = float;                                                                         \
        __VA_ARGS__;                                                                                    \
        break;                                                                                          \
      }                                                                                                 \
      case ::ge::DType::F16: {                                                                          \
        using scalar_t = __half;                                                                        \
        __VA_ARGS__;                                                                                    \
        break;                                                                                          \
      }                                                                                                 \
      case ::ge::DType::BF16: {                                                                         \
        using scalar_t = __nv_bfloat16;                                                                 \
        __VA_ARGS__;                                                                                    \
        break;                                                                                          \
      }                                                                                                 \
      default: ::ge::fail("CUDA kernels take f32, f16 or bf16 tensors, got ", ::ge::dtype_name(dtype)); \
    }                                                                                                   \
  } while (0)

// Runs the statement list with `half_t` bound to the C++ type of a 16-bit floating DType.
#define GE_DISPATCH_HALF(dtype, half_t, ...)                                                        \
  do {                                                                                              \
    if ((dtype) == ::ge::DType::F16) {                                                              \
      using half_t = __half;                                                                        \
      __VA_ARGS__;                                                                                  \
    } else if ((dtype) == ::ge::DType::BF16) {                                                      \
      using half_t = __nv_bfloat16;                                                                 \
      __VA_ARGS__;                                                                                  \
    } else {                                                                                        \
      ::ge::fail("half-precision kernels take f16 or bf16 tensors, got ", ::ge::dtype_name(dtype)); \
    }                                                                                               \
  } while (0)

// ---- launch sizes
constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n elements: enough to fill the GPU, never more than
// the work needs.
inline unsigned grid_for(int64_t n, int threads = kThreads, int64_t max_blocks = 4096) {
  int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(blocks, max_blocks)));
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks of `kernel` resident at once on `device` (the current device) with `threads` threads and
// `dynamic_smem` bytes of dynamic shared memory each: SMs x blocks per SM, at least one per SM.
// Grids of that size walk their work in one wave. Asked of the runtime once per kernel, block
// shape and device (resident_blocks.cpp): an occupancy query per launch costs host time on every
// eager step.
int resident_blocks(const void* kernel, int threads, size_t dynamic_smem, int device);
template <class Kernel>
int resident_blocks(Kernel* kernel, int threads, size_t dynamic_smem, int device) {
  return resident_blocks(reinterpret_cast<const void*>(kernel), threads, dynamic_smem, device);
}
// The SMs of `device`, asked once.
int sm_count(int device);
// Clusters of `cluster_blocks` blocks of `kernel` (block shape `block`, `dynamic_smem` bytes each)
// that fit on `device` at once; 0 when none can be placed. Asked once per kernel, shape and
// device, like resident_blocks. The kernel must already have the attributes (shared memory,
// non-portable cluster size) it will be launched with.
int resident_clusters(const void* kernel, dim3 block, unsigned cluster_blocks, size_t dynamic_smem, int device);

// ---- argument checks and the stream of a tensor's device
inline void check_gpu_float(const Tensor& t, const char* what) {
  GE_CHECK(t.defined(), what, " is undefined");
  GE_CHECK(t.device().is_cuda(), what, " must be on a CUDA device, is ", t.str());
  GE_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::F16 || t.dtype() == DType::BF16, what,
           " must be f32, f16 or bf16, is ", t.str());
}

// True when a 4-D tensor's memory order differs from its logical NCHW order.
inline bool reorders_elements(const Tensor& t) {
  return t.rank() == 4 && t.format() == MemoryFormat::NHWC && t.dim(1) != 1 && t.dim(2) * t.dim(3) != 1;
}

// Element-wise kernels index both buffers physically: that is right when the i-th stored
// element of a is the i-th stored element of b in logical terms too.
inline bool same_element_order(const Tensor& a, const Tensor& b) {
  if (a.numel() != b.numel()) return false;
  if (reorders_elements(a) != reorders_elements(b)) return false;
  return !reorders_elements(a) || a.shape() == b.shape();
}

inline cudaStream_t stream_of(const Tensor& t) { return context(t.device().index).stream(); }

}  // namespace gpu
}  // namespace ge
