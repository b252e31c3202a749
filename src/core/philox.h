// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11) and the
// maps from its output words to uniform and standard normal floats, written once for host and
// device so that both backends draw bitwise the same numbers from the same (seed, counter).
//
// Bitwise agreement needs every floating operation to round identically on both sides. The
// normal map therefore uses only +, -, *, / and sqrt in double precision (all correctly rounded
// by IEEE 754) through the d* operations of core/host_device_math.h, which on the device name the
// round-to-nearest intrinsics explicitly: nvcc would otherwise fuse a*b+c into an FMA, which
// rounds once instead of twice. Host code built as ISO C++ (-std=c++17, GCC's -ffp-contract=off)
// never contracts.
// log, sin and cos are our own polynomials for the same reason: libm and CUDA's math library
// are not correctly rounded and differ in the last bit.
#pragma once
#include <cstdint>

#include "core/host_device_math.h"

namespace ge {
namespace philox {

struct Block {
  uint32_t w[4];
};

constexpr uint32_t kM0 = 0xD2511F53u;
constexpr uint32_t kM1 = 0xCD9E8D57u;
constexpr uint32_t kW0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kW1 = 0xBB67AE85u;  // sqrt(3) - 1
constexpr int kRounds = 10;

GE_HD uint32_t mul_hi(uint32_t a, uint32_t b) {
  return GE_DEVICE_OR_HOST(__umulhi(a, b), static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32));
}

// The bijection: 128-bit counter -> 128 pseudo-random bits under a 64-bit key.
GE_HD Block philox4x32_10(Block ctr, uint32_t key0, uint32_t key1) {
  for (int r = 0; r < kRounds; ++r) {
    if (r > 0) {
      key0 += kW0;
      key1 += kW1;
    }
    const uint32_t hi0 = mul_hi(kM0, ctr.w[0]);
    const uint32_t lo0 = kM0 * ctr.w[0];
    const uint32_t hi1 = mul_hi(kM1, ctr.w[2]);
    const uint32_t lo1 = kM1 * ctr.w[2];
    ctr = Block{{hi1 ^ ctr.w[1] ^ key0, lo1, hi0 ^ ctr.w[3] ^ key1, lo0}};
  }
  return ctr;
}

// The engine's stream: block k of (seed, offset) is Philox at counter offset + k (64-bit, in
// words 0..1; words 2..3 zero) under key = seed.
GE_HD Block block_at(uint64_t seed, uint64_t counter) {
  Block c{{static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0u, 0u}};
  return philox4x32_10(c, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// Uniform in [0, 1): the top 24 bits, so every value is exact in float.
GE_HD float uniform_from_word(uint32_t w) {
  return static_cast<float>(w >> 8) * 5.9604644775390625e-8f;  // 2^-24
}

// Natural log of a positive normal double, relative error ~1e-16.
// x = m * 2^e with m in [sqrt(1/2), sqrt(2)); ln m = 2 atanh(s), s = (m-1)/(m+1), |s| < 0.172,
// whose odd series needs terms up to s^21 for double accuracy.
GE_HD double log_positive(double x) {
  const uint64_t bits = double_bits(x);
  int e = static_cast<int>((bits >> 52) & 0x7ff) - 1023;
  double m = bits_double((bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull);  // [1, 2)
  if (m > 1.4142135623730951) {
    m = dmul(m, 0.5);
    e += 1;
  }
  const double s = ddiv(dsub(m, 1.0), dadd(m, 1.0));
  const double s2 = dmul(s, s);
  // Horner on 1 + s2/3 + s2^2/5 + ... + s2^10/21
  double p = 1.0 / 21.0;
  p = dadd(dmul(p, s2), 1.0 / 19.0);
  p = dadd(dmul(p, s2), 1.0 / 17.0);
  p = dadd(dmul(p, s2), 1.0 / 15.0);
  p = dadd(dmul(p, s2), 1.0 / 13.0);
  p = dadd(dmul(p, s2), 1.0 / 11.0);
  p = dadd(dmul(p, s2), 1.0 / 9.0);
  p = dadd(dmul(p, s2), 1.0 / 7.0);
  p = dadd(dmul(p, s2), 1.0 / 5.0);
  p = dadd(dmul(p, s2), 1.0 / 3.0);
  const double log_m = dmul(dmul(2.0, s), dadd(dmul(p, s2), 1.0));
  // ln 2 split so that e * kLn2Hi is exact (kLn2Hi has 32 significant bits, |e| < 1100).
  constexpr double kLn2Hi = 6.93147180369123816490e-01;
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  const double ed = static_cast<double>(e);
  return dadd(dmul(ed, kLn2Hi), dadd(dmul(ed, kLn2Lo), log_m));
}

// sin and cos of 2*pi*t for t in [0, 1], absolute error ~1e-16.
// t is split into quarter turns k (exactly: 4t and 4t - k are exact) and a remainder angle
// x in [-pi/4, pi/4], where Taylor series to x^17 / x^18 reach double accuracy.
GE_HD void sincos_turns(double t, double* sin_out, double* cos_out) {
  const double q = dmul(t, 4.0);
  const double k = static_cast<double>(static_cast<int64_t>(dadd(q, 0.5)));  // round to nearest, q >= 0
  const double x = dmul(dsub(q, k), 1.5707963267948966);                     // pi/2
  const double x2 = dmul(x, x);
  // sin x = x (1 - x2/3! + x2^2/5! - ... + x2^8/17!)
  double s = 1.0 / 355687428096000.0;  // 1/17!
  s = dsub(dmul(s, x2), 1.0 / 1307674368000.0);
  s = dadd(dmul(s, x2), 1.0 / 6227020800.0);
  s = dsub(dmul(s, x2), 1.0 / 39916800.0);
  s = dadd(dmul(s, x2), 1.0 / 362880.0);
  s = dsub(dmul(s, x2), 1.0 / 5040.0);
  s = dadd(dmul(s, x2), 1.0 / 120.0);
  s = dsub(dmul(s, x2), 1.0 / 6.0);
  s = dadd(dmul(dmul(s, x2), x), x);
  // cos x = 1 - x2/2! + x2^2/4! - ... - x2^9/18!
  double c = -1.0 / 6402373705728000.0;  // -1/18!
  c = dadd(dmul(c, x2), 1.0 / 20922789888000.0);
  c = dsub(dmul(c, x2), 1.0 / 87178291200.0);
  c = dadd(dmul(c, x2), 1.0 / 479001600.0);
  c = dsub(dmul(c, x2), 1.0 / 3628800.0);
  c = dadd(dmul(c, x2), 1.0 / 40320.0);
  c = dsub(dmul(c, x2), 1.0 / 720.0);
  c = dadd(dmul(c, x2), 1.0 / 24.0);
  c = dadd(dmul(c, x2), -0.5);
  c = dadd(dmul(c, x2), 1.0);
  switch (static_cast<int>(k) & 3) {
    case 0:
      *sin_out = s;
      *cos_out = c;
      break;
    case 1:
      *sin_out = c;
      *cos_out = -s;
      break;
    case 2:
      *sin_out = -s;
      *cos_out = -c;
      break;
    default:
      *sin_out = -c;
      *cos_out = s;
      break;
  }
}

// Box-Muller on two words: u1 = (a + 1) 2^-32 in (0, 1] keeps log finite, u2 = b 2^-32 in [0, 1).
// Gives the pair (r cos, r sin) rounded to float; |z| <= sqrt(64 ln 2) ~ 6.66.
GE_HD void normal_pair(uint32_t a, uint32_t b, float* z0, float* z1) {
  constexpr double kTwoPow32Inv = 2.3283064365386963e-10;                   // 2^-32
  const double u1 = dmul(dadd(static_cast<double>(a), 1.0), kTwoPow32Inv);  // exact: a + 1 <= 2^32
  const double u2 = dmul(static_cast<double>(b), kTwoPow32Inv);
  const double r = dsqrt(dmul(-2.0, log_positive(u1)));
  double s, c;
  sincos_turns(u2, &s, &c);
#if defined(__CUDA_ARCH__)
  *z0 = __double2float_rn(dmul(r, c));
  *z1 = __double2float_rn(dmul(r, s));
#else
  *z0 = static_cast<float>(dmul(r, c));
  *z1 = static_cast<float>(dmul(r, s));
#endif
}

// The four normals of one block: words (0,1) -> elements 4k, 4k+1; words (2,3) -> 4k+2, 4k+3.
GE_HD void normals_from_block(const Block& b, float out[4]) {
  normal_pair(b.w[0], b.w[1], &out[0], &out[1]);
  normal_pair(b.w[2], b.w[3], &out[2], &out[3]);
}

// mean + stddev * z in float, never fused, so that both backends round the same way.
GE_HD float affine(float z, float mean, float stddev) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(mean, __fmul_rn(stddev, z));
#else
  return mean + stddev * z;
#endif
}

}  // namespace philox
}  // namespace ge
