// The overflow test alone: Adam taking an optimizer's last loss still scaled at a dynamic scale
// (adam.cu) must know of an overflow anywhere in those gradients before any block updates, so the
// test runs first as its own pass. It reads each gradient once, 16 bytes a thread a load, and
// looks at the exponent bits only (all ones: an infinity or a NaN), which is !isfinite of the
// value converted to float, unscale_math.cuh's test.
#include "cuda_util.cuh"
#include "finite_check.h"
#include "kernel_launch.cuh"
#include "multi_tensor.cuh"

namespace ge {
namespace gpu {
namespace {

constexpr int kCheckTensors = 48;
constexpr int64_t kCheckChunk = 8192;  // elements a block: four 16-byte loads a thread at f16
using CheckTable = TensorTable<1, kCheckTensors>;

// Whether a 32-bit word of elements of type t (one f32, or two halves; a lone half in the low
// bits with zeros above) holds an infinity or a NaN.
__device__ __forceinline__ bool word_non_finite(ElemType t, uint32_t w) {
  switch (t) {
    case ElemType::F16:
      return (w & 0x7c00u) == 0x7c00u || (w & 0x7c000000u) == 0x7c000000u;
    case ElemType::BF16:
      return (w & 0x7f80u) == 0x7f80u || (w & 0x7f800000u) == 0x7f800000u;
    default:
      return (w & 0x7f800000u) == 0x7f800000u;
  }
}

__global__ void flag_non_finite_kernel(CheckTable table, float* found_inf) {
  await_previous_kernel();
  int tensor;
  int64_t begin, end;
  locate_chunk<kCheckChunk>(table, blockIdx.x, tensor, begin, end);
  const ElemType type = table.type[0][tensor];
  const void* base = table.ptr[0][tensor];
  const int64_t size = type == ElemType::F32 ? 4 : 2;
  const int64_t per_word = 16 / size;
  // Whole 16-byte words where the tensor's start allows them (a chunk starts 16-byte aligned
  // then), the rest an element a thread.
  const bool words = reinterpret_cast<uintptr_t>(base) % 16 == 0;
  const int64_t word_end = words ? begin + (end - begin) / per_word * per_word : begin;
  bool bad = false;
  const uint4* vec = static_cast<const uint4*>(base);
#pragma unroll 4
  for (int64_t w = begin / per_word + threadIdx.x; w < word_end / per_word; w += blockDim.x) {
    const uint4 v = vec[w];
    bad |= word_non_finite(type, v.x) | word_non_finite(type, v.y) | word_non_finite(type, v.z) |
           word_non_finite(type, v.w);
  }
  for (int64_t i = word_end + threadIdx.x; i < end; i += blockDim.x)
    bad |= word_non_finite(type, load_bits_dyn(base, type, i));
  // Every writer stores the same 1.0, so the race between blocks is benign (as unscale_kernel).
  if (__syncthreads_or(bad) && threadIdx.x == 0) found_inf[0] = 1.f;
}

}  // namespace

void raise_if_non_finite(const std::vector<const Tensor*>& tensors, float* found_inf, cudaStream_t stream) {
  for (const Tensor* t : tensors) check_gpu_float(*t, "raise_if_non_finite tensor");
  if (tensors.empty()) return;
  for_each_table<1, kCheckTensors, kCheckChunk>({tensors}, [&](const CheckTable& table, int blocks) {
    launch_kernel(flag_non_finite_kernel, blocks, kThreads, 0, stream, table, found_inf);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace gpu
}  // namespace ge
