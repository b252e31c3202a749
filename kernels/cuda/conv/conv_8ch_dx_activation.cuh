// The activation the backward-data kernels of the 8-channel layers (conv_8ch_dgrad.cu,
// conv_8ch_dgrad_narrow.cu) take on dx as they write it (conv_8ch.h's DxActivation), on the
// device.
#pragma once
#include <cstdint>
#include <cstring>

#include "cuda/activation_math.cuh"
#include "cuda/conv/conv_8ch.h"

namespace ge {
namespace gpu {

template <class T>
struct DxActivationArgs {
  bool on = false;
  bool gradient = false;  // the activation's gradient from its output y, else its forward
  ops::Activation kind = ops::Activation::ReLU;
  float slope = 0.f;
  const T* y = nullptr;  // with gradient: dx's shape, 16-byte aligned

  // y's word at element `at` (even) of dx: the activation's output there, for apply.
  __device__ __forceinline__ uint32_t y_word(size_t at) const {
    return gradient ? *reinterpret_cast<const uint32_t*>(y + at) : 0u;
  }
  // Two neighbouring dx values as one word of the dtype's halves, with y's word at the same
  // place (gradient): activate() or activate_grad() on each as rounded, rounded again, as the
  // element-wise kernels compute and store them (activation.cu).
  __device__ __forceinline__ uint32_t apply(uint32_t word, uint32_t y_word) const {
    Pack<T, 2> v, out;
    memcpy(&v, &word, sizeof(word));
    if (gradient) {
      Pack<T, 2> yv;
      memcpy(&yv, &y_word, sizeof(y_word));
      out = activate_grad_pack(kind, yv, v, slope);
    } else if (kind == ops::Activation::Tanh) {  // G's output: the kind's tests taken once, not per value
      store_float2(out.v, activate(ops::Activation::Tanh, load_float(&v.v[0]), slope),
                   activate(ops::Activation::Tanh, load_float(&v.v[1]), slope));
    } else {
      store_float2(out.v, activate(kind, load_float(&v.v[0]), slope), activate(kind, load_float(&v.v[1]), slope));
    }
    memcpy(&word, &out, sizeof(word));
    return word;
  }
};

// The kernels' form of dx_act (nullptr: off).
template <class T>
DxActivationArgs<T> dx_activation_args(const DxActivation* dx_act) {
  DxActivationArgs<T> args;
  if (dx_act) {
    args.on = true;
    args.gradient = dx_act->y != nullptr;
    args.kind = dx_act->act.kind;
    args.slope = dx_act->act.negative_slope;
    args.y = dx_act->y ? dx_act->y->data_as<T>() : nullptr;
  }
  return args;
}

}  // namespace gpu
}  // namespace ge
