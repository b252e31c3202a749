// The arithmetic of FP8 quantization and of the delayed-scaling recipe (ganengine/fp8.h), element
// by element, shared by the CPU reference and the CUDA kernels so that the two agree bitwise: each
// result is one correctly rounded f32 operation (core/host_device_math.h: the device's
// named-rounding intrinsics, so that no compiler flag can turn them into approximations or fused
// operations), then the exact FP8 conversion of core/fp8_bits.h.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/fp8_bits.h"
#include "core/host_device_math.h"

namespace ge {
namespace fp8_math {

// Classification on the bits, the same on both sides whatever the math library.
GE_HD bool is_nan(float x) { return (float_bits(x) & 0x7fffffffu) > 0x7f800000u; }
GE_HD bool is_finite(float x) { return (float_bits(x) & 0x7f800000u) != 0x7f800000u; }

constexpr uint32_t kCanonicalNanBits = 0x7fc00000u;
constexpr uint32_t kLargestFiniteBits = 0x7f7fffffu;

}  // namespace fp8_math

// The FP8 code of x * scale: the product rounded to f32, then to the format (nearest even,
// saturating). A NaN product is the positive NaN code: the GPU's arithmetic returns one canonical
// NaN whatever its operands' signs, so a NaN's sign cannot be kept alike on both backends.
GE_HD uint8_t fp8_quantize_element(float x, float scale, Fp8Format f) {
  const float scaled = fmul_rn(x, scale);
  return fp8_math::is_nan(scaled) ? static_cast<uint8_t>(fp8_detail::kNanCode) : float_to_fp8_bits(scaled, f);
}

// The value of an FP8 code times scale_inv, rounded to f32; a NaN result is 0x7fc00000 on both
// backends, for the same reason.
GE_HD float fp8_dequantize_element(uint8_t code, float scale_inv, Fp8Format f) {
  const float v = fmul_rn(fp8_bits_to_float(code, f), scale_inv);
  return fp8_math::is_nan(v) ? bits_float(fp8_math::kCanonicalNanBits) : v;
}

// x as an FP8 Tensor Core operand reads it, given x's code (fp8_quantize_element of x with the
// scale scale_inv undoes): the code's value times scale_inv, rounded to f32. A non-finite x is
// returned as it is, not saturated: an overflow in the loss-scaled gradients must still reach the
// loss scaler's check. The code is taken, not formed, because the round-trip loops write it too.
GE_HD float fp8_round_trip_of_code(float x, uint8_t code, float scale_inv, Fp8Format f) {
  return fp8_math::is_finite(x) ? fp8_dequantize_element(code, scale_inv, f) : x;
}

// |x| as an unsigned key whose integer order is the order of the magnitudes, every NaN mapped to
// one key above infinity: the maximum of the keys, read back as a float, is max |x| with NaN
// propagating, and it is the same bits in any order of reduction (integer max is exact), so a GPU
// reduction by atomics gives bitwise what the CPU's loop gives.
GE_HD uint32_t fp8_amax_key(float x) {
  const uint32_t magnitude = float_bits(x) & 0x7fffffffu;
  return magnitude > 0x7f800000u ? fp8_math::kCanonicalNanBits : magnitude;
}

// The amax-to-scale numerator of a format under a margin: fp8_max * 2^-margin, exact in f32 for
// the margins ops::fp8_update_scales accepts (the result stays a normal float).
inline float fp8_scaled_max(Fp8Format f, int margin) { return std::ldexp(fp8_max(f), -margin); }

// One step of the delayed-scaling recipe for one tensor (ganengine/fp8.h): reads the history's
// H entries, rolls them in place, and writes the new scale and scale_inv. scaled_max is
// fp8_max * 2^-margin, exact in f32.
GE_HD void fp8_delayed_scaling_step(float* history, int H, float* scale, float* scale_inv, float scaled_max,
                                    bool most_recent) {
  using namespace fp8_math;
  const float latest = history[0];
  float window = 0.0f;
  bool any_nan = false;
  for (int i = 0; i < H; ++i) {
    const float a = history[i];
    any_nan = any_nan || is_nan(a);
    window = a > window ? a : window;
  }
  for (int i = 0; i + 1 < H; ++i) history[i] = history[i + 1];
  history[H - 1] = latest;
  history[0] = 0.0f;  // after the move, so that H = 1 leaves 0 too

  const float amax = most_recent ? latest : (any_nan ? bits_float(kCanonicalNanBits) : window);
  float next = *scale;
  if (is_finite(amax) && amax > 0.0f) next = fdiv_rn(scaled_max, amax);
  // An amax so small that the quotient overflows: the largest scale there is (Transformer
  // Engine's choice); the amax then lands below the format's largest value, not beyond it.
  if (!is_finite(next) && !is_nan(next)) next = bits_float(kLargestFiniteBits);
  *scale = next;
  *scale_inv = fdiv_rn(1.0f, next);
}

}  // namespace ge
