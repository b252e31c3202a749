// The activations and their gradients as the element-wise kernels compute them (float in,
// float out; activation.cu and the fused BatchNorm kernels share them).
#pragma once
#include <type_traits>

#include "cuda/cuda_util.cuh"
#include "cuda/vector_pack.cuh"
#include "ganengine/ops.h"

namespace ge {
namespace gpu {

__device__ __forceinline__ float activate(ops::Activation a, float x, float slope) {
  if (a == ops::Activation::ReLU) return x <= 0.f ? 0.f : x;  // NaN falls through to x
  if (a == ops::Activation::LeakyReLU) return x > 0.f ? x : x * slope;
  return tanhf(x);
}

// activate() for ReLU and LeakyReLU only (the same expressions, so the same bits): for unrolled
// epilogues, where tanhf inlined at every output would double a kernel's code (conv_8ch.cu).
__device__ __forceinline__ float rectify(ops::Activation a, float x, float slope) {
  if (a == ops::Activation::ReLU) return x <= 0.f ? 0.f : x;
  return x > 0.f ? x : x * slope;
}

// d(activation)/dx written in terms of the output y, which is all an in-place layer keeps.
__device__ __forceinline__ float activate_grad(ops::Activation a, float y, float dy, float slope) {
  if (a == ops::Activation::ReLU) return y > 0.f ? dy : 0.f;
  if (a == ops::Activation::LeakyReLU) return y > 0.f ? dy : dy * slope;
  return dy * (1.f - y * y);
}

// LeakyReLU's gradient on two 16-bit values (one word of dy, one of the output y): y > 0 ? dy :
// dy * slope in float, each rounded to T, as activate_grad and store_float2 give them, with the
// test done on y's halves and the choice made on bits (a word mask), not on each float: y is
// never converted to float and there is no compare and select per value. Done per float, this pass
// takes a large share of D's first layer's filter-gradient stalls (docs/performance.md).
template <class T>
__device__ __forceinline__ uint32_t leaky_relu_grad_pair(uint32_t y, uint32_t dy, float slope) {
  const float2 f = unpack_pair<T>(dy);
  uint32_t kept, scaled;  // dy and dy * slope, rounded from float as store_float2 rounds them
  store_float2(reinterpret_cast<T*>(&kept), f.x, f.y);
  store_float2(reinterpret_cast<T*>(&scaled), f.x * slope, f.y * slope);
  Pair<T> zero;
  if constexpr (std::is_same_v<T, __half>)
    zero = __float2half2_rn(0.f);
  else
    zero = __float2bfloat162_rn(0.f);
  const uint32_t positive = __hgt2_mask(as_pair<T>(y), zero);  // all ones in each half where y > 0 (not NaN)
  return (kept & positive) | (scaled & ~positive);
}

// The outputs y of ReLU or LeakyReLU as their gradients read them (y > 0 or not) from eight FP8
// codes whose sign bit is clear exactly where y > 0 (ops::conv2d_activation_forward's codes_only;
// the first code in the lowest byte): +1 there, -1 elsewhere, for activate_grad_pack.
template <class T>
__device__ __forceinline__ Pack<T, 8> activation_signs_of_codes(uint2 codes) {
  Pack<T, 8> y;
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const uint32_t word = e < 4 ? codes.x : codes.y;
    store_float(&y.v[e], (word >> (8 * (e % 4) + 7)) & 1u ? -1.f : 1.f);
  }
  return y;
}

// activate_grad on each value of a pack given the activation's outputs y, each rounded to T (two
// at a time): what activation_backward stores, and so what the convolutions that take the
// gradient on their own input compute in its place (conv_8ch_dgrad.cu, conv_8ch_dgrad_narrow.cu,
// conv_8ch_wgrad.cu, conv_8ch_dx_activation.cuh).
template <class T, int V>
__device__ __forceinline__ Pack<T, V> activate_grad_pack(ops::Activation a, const Pack<T, V>& y, const Pack<T, V>& dy,
                                                         float slope) {
  static_assert(V % 2 == 0 || V == 1, "pairs of values, or one");
  Pack<T, V> out;
  if constexpr (V % 2 == 0 && (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>)) {
    if (a == ops::Activation::LeakyReLU) {
#pragma unroll
      for (int e = 0; e < V; e += 2)
        *reinterpret_cast<uint32_t*>(&out.v[e]) = leaky_relu_grad_pair<T>(
            *reinterpret_cast<const uint32_t*>(&y.v[e]), *reinterpret_cast<const uint32_t*>(&dy.v[e]), slope);
      return out;
    }
  }
  if constexpr (V % 2 == 0) {
    if (a == ops::Activation::Tanh) {  // the kind's tests taken once, not per value (the same expression)
#pragma unroll
      for (int e = 0; e < V; e += 2)
        store_float2(&out.v[e], activate_grad(ops::Activation::Tanh, load_float(&y.v[e]), load_float(&dy.v[e]), slope),
                     activate_grad(ops::Activation::Tanh, load_float(&y.v[e + 1]), load_float(&dy.v[e + 1]), slope));
      return out;
    }
  }
  if constexpr (V == 1) {
    store_float(&out.v[0], activate_grad(a, load_float(&y.v[0]), load_float(&dy.v[0]), slope));
  } else {
#pragma unroll
    for (int e = 0; e < V; e += 2)
      store_float2(&out.v[e], activate_grad(a, load_float(&y.v[e]), load_float(&dy.v[e]), slope),
                   activate_grad(a, load_float(&y.v[e + 1]), load_float(&dy.v[e + 1]), slope));
  }
  return out;
}

// v as the activation dtype T would hold it: what an unfused layer writes and the next reads.
template <class T>
__device__ __forceinline__ float round_to(float v) {
  T t;
  store_float(&t, v);
  return load_float(&t);
}

}  // namespace gpu
}  // namespace ge
