// Typed element access for the fast backend's own loops: f32, f16 and bf16 storage, each
// widened to float exactly and rounded once (to nearest even) on store, the way the reference
// rounds an fp32 result. with_element_type calls a generic lambda with a value of the storage
// type, so each loop is compiled once per dtype with no per-element switch.
#pragma once
#include <cstdint>

#include "core/half_bits.h"
#include "ganengine/error.h"
#include "ganengine/tensor.h"

namespace ge::onednn {

struct Half {
  uint16_t bits;
};
struct BFloat {
  uint16_t bits;
};

inline float widen(float v) { return v; }
inline float widen(Half v) { return half_bits_to_float(v.bits); }
inline float widen(BFloat v) { return bf16_bits_to_float(v.bits); }

template <class T>
T narrow(float v);
template <>
inline float narrow<float>(float v) {
  return v;
}
template <>
inline Half narrow<Half>(float v) {
  return Half{float_to_half_bits(v)};
}
template <>
inline BFloat narrow<BFloat>(float v) {
  return BFloat{float_to_bf16_bits(v)};
}

// Whether the fast loops take this dtype (f64 stays on the reference).
inline bool fast_dtype(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

template <class Fn>
void with_element_type(DType t, const Fn& fn) {
  switch (t) {
    case DType::F32: fn(float{}); return;
    case DType::F16: fn(Half{}); return;
    case DType::BF16: fn(BFloat{}); return;
    default: break;
  }
  fail("the fast CPU backend takes f32, f16 and bf16 tensors, got ", dtype_name(t));
}

}  // namespace ge::onednn
