// Correct rounding from double to the narrower floating types, for the CPU reference casts.
// Going double -> float -> half with round-to-nearest twice can land on the wrong side of a tie
// (the first rounding may create the tie). Rounding the first step to odd instead (truncate,
// then set the last bit when anything was cut off) keeps the information the second rounding
// needs, because float has far more than two bits beyond half's and bf16's precision at every
// magnitude (Boldo & Melquiond, "When double rounding is odd", 2005).
#pragma once
#include <cstdint>

#include "core/half_bits.h"

namespace ge {

inline float double_to_float_round_odd(double d) {
  const float f = static_cast<float>(d);
  if (static_cast<double>(f) == d || f != f || d != d) return f;  // exact or NaN
  uint32_t bits = float_bits(f);
  // Overflow to inf also counts as "rounded away from zero": step back to the largest finite.
  const bool rounded_away = (f < 0 ? -static_cast<double>(f) : static_cast<double>(f)) > (d < 0 ? -d : d);
  if (rounded_away) bits -= 1;  // one ulp toward zero: truncation (magnitude bits, sign kept)
  return bits_float(bits | 1u);
}

inline uint16_t double_to_half_bits(double d) { return float_to_half_bits(double_to_float_round_odd(d)); }
inline uint16_t double_to_bf16_bits(double d) { return float_to_bf16_bits(double_to_float_round_odd(d)); }

}  // namespace ge
