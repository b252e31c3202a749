// The activations and their gradients as the element-wise kernels compute them (float in,
// float out; activation.cu and the fused BatchNorm kernels share them).
#pragma once
#include "cuda_util.cuh"
#include "ganengine/ops.h"

namespace ge {
namespace gpu {

__device__ __forceinline__ float activate(ops::Activation a, float x, float slope) {
  if (a == ops::Activation::ReLU) return x <= 0.f ? 0.f : x;  // NaN falls through to x
  if (a == ops::Activation::LeakyReLU) return x > 0.f ? x : x * slope;
  return tanhf(x);
}

// activate() for ReLU and LeakyReLU only (the same expressions, so the same bits): for unrolled
// epilogues, where tanhf inlined at every output doubled a kernel's code (conv_8ch.cu).
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

// v as the activation dtype T would hold it: what an unfused layer writes and the next reads.
template <class T>
__device__ __forceinline__ float round_to(float v) {
  T t;
  store_float(&t, v);
  return load_float(&t);
}

}  // namespace gpu
}  // namespace ge
