// Each image's dot product with one filter of the image's size (D's last layer, a 512x4x4 -> 1
// convolution), summed in one fixed order wherever it is formed: by that layer's own forward
// (conv_scalar.cu) or by the BatchNorm pass that writes its input (batchnorm.cu), so the two give
// the same bits. A block of kThreads threads takes one image; thread t adds packs t, t +
// kThreads, ... one value after another, then block_sum adds the threads.
#pragma once
#include "cuda/cuda_util.cuh"
#include "cuda/vector_pack.cuh"

namespace ge {
namespace gpu {

template <class T, int V>
__device__ __forceinline__ float dot_pack(const Pack<T, V>& a, const Pack<T, V>& b, float acc) {
#pragma unroll
  for (int e = 0; e < V; ++e) acc = fmaf(load_float(&a.v[e]), load_float(&b.v[e]), acc);
  return acc;
}

// The sum of every thread's v over a block of kBlockThreads (a multiple of 32, at most 1024):
// each warp's values by a fixed shuffle tree, then the warps' sums by the same tree. Valid in
// thread 0 only; every thread of the block must call it.
template <int kBlockThreads>
__device__ __forceinline__ float block_sum(float v) {
  static_assert(kBlockThreads % 32 == 0 && kBlockThreads <= 1024, "whole warps, at most 32");
  __shared__ float warp_sums[kBlockThreads / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  v = lane < kBlockThreads / 32 ? warp_sums[lane] : 0.f;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

}  // namespace gpu
}  // namespace ge
