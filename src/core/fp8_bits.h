// Exact float <-> FP8 conversions on raw bits, identical on host and device: the two OCP 8-bit
// formats Hopper's Tensor Cores take, E4M3 (bias 7, no infinities, S.1111.111 the only NaN, largest
// finite 448: PyTorch's float8_e4m3fn) and E5M2 (bias 15, IEEE-like infinities and NaNs, largest
// finite 57344: float8_e5m2).
//
// float -> FP8 rounds to nearest, ties to even, and saturates: a finite value beyond the largest
// finite, and an infinity, become the largest finite of their sign (PTX's cvt .satfinite, Transformer
// Engine's casts). NaN stays NaN (S.1111.111 in both formats). Within range this is exactly
// `x.to(torch.float8_e4m3fn)`; beyond it exactly `x.clamp(-max, max).to(...)`
// (tests/ops/test_fp8_bits.cpp checks every half value and the float rounding edges against those).
#pragma once
#include <cmath>
#include <cstdint>

#include "core/host_device_math.h"
#include "ganengine/fp8.h"  // Fp8Format

namespace ge {

namespace fp8_detail {
// Exponent and mantissa widths, and the bit pattern of the largest finite value.
GE_HD int mantissa_bits(Fp8Format f) { return f == Fp8Format::E4M3 ? 3 : 2; }
GE_HD int exponent_bias(Fp8Format f) { return f == Fp8Format::E4M3 ? 7 : 15; }
GE_HD uint32_t max_finite_code(Fp8Format f) { return f == Fp8Format::E4M3 ? 0x7Eu : 0x7Bu; }
constexpr uint32_t kNanCode = 0x7Fu;
}  // namespace fp8_detail

// The largest finite value: 448 (E4M3), 57344 (E5M2).
GE_HD float fp8_max(Fp8Format f) { return f == Fp8Format::E4M3 ? 448.0f : 57344.0f; }

GE_HD uint8_t float_to_fp8_bits(float value, Fp8Format f) {
  using namespace fp8_detail;
  const uint32_t x = float_bits(value);
  const uint32_t sign = (x >> 24) & 0x80u;
  const uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<uint8_t>(sign | kNanCode);
  const int mbits = mantissa_bits(f);
  const int min_normal_exponent = 1 - exponent_bias(f);
  const float a = bits_float(magnitude);
  if (a >= fp8_max(f)) return static_cast<uint8_t>(sign | max_finite_code(f));  // infinities too
  uint32_t code = 0;
  if (static_cast<int>(magnitude >> 23) - 127 < min_normal_exponent) {
    // Subnormal range: the value in units of the smallest subnormal, rounded to an integer
    // (the scaling by a power of two is exact). A result of 2^mbits is the smallest normal,
    // whose code is that same integer.
#if defined(__CUDA_ARCH__)
    code = static_cast<uint32_t>(rintf(ldexpf(a, mbits - min_normal_exponent)));
#else
    code = static_cast<uint32_t>(std::nearbyint(std::ldexp(a, mbits - min_normal_exponent)));
#endif
  } else {
    // Normal: drop the float's low mantissa bits, ties to even, then rebias the exponent. A carry
    // out of the mantissa moves to the next binade, which is the right code.
    const int shift = 23 - mbits;
    const uint32_t rounded = (magnitude + ((1u << (shift - 1)) - 1u) + ((magnitude >> shift) & 1u)) >> shift;
    code = rounded - (static_cast<uint32_t>(127 - exponent_bias(f)) << mbits);
  }
  if (code > max_finite_code(f)) code = max_finite_code(f);  // rounded up past the largest finite
  return static_cast<uint8_t>(sign | code);
}

GE_HD float fp8_bits_to_float(uint8_t bits, Fp8Format f) {
  using namespace fp8_detail;
  const int mbits = mantissa_bits(f);
  const uint32_t magnitude = bits & 0x7fu;
  const uint32_t exponent = magnitude >> mbits;
  const uint32_t mantissa = magnitude & ((1u << mbits) - 1u);
  float a = 0;
  if (f == Fp8Format::E4M3 && magnitude == kNanCode) {
    a = bits_float(0x7fc00000u);
  } else if (f == Fp8Format::E5M2 && exponent == 31) {
    a = bits_float(mantissa ? 0x7fc00000u : 0x7f800000u);
  } else if (exponent == 0) {
    a = ldexpf(static_cast<float>(mantissa), 1 - exponent_bias(f) - mbits);
  } else {
    a = ldexpf(static_cast<float>(mantissa | (1u << mbits)), static_cast<int>(exponent) - exponent_bias(f) - mbits);
  }
  return (bits & 0x80u) ? -a : a;
}

}  // namespace ge
