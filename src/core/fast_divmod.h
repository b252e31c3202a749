// Quotient and remainder by a divisor fixed before a kernel runs, as a multiply-high, an add and
// a shift (Granlund & Montgomery, "Division by invariant integers using multiplication", 1994,
// figure 4.1). A 32-bit division by a runtime value is a subroutine of some twenty instructions
// on the GPU: a tile-walking kernel turning tile numbers into (image, row, column) with three of
// them per tile spends much of its issue slots there (docs/performance.md).
// Identical on host and device, so the host tests check the device's arithmetic.
#pragma once
#include <cstdint>

#include "core/half_bits.h"  // GE_HD

namespace ge {

class FastDivmod {
 public:
  // Dividends and divisors below 2^31 (the add below then cannot overflow 32 bits).
  static constexpr uint32_t kLimit = uint32_t{1} << 31;

  FastDivmod() = default;  // divides by 1
  // Host side; divisor in [1, 2^31).
  explicit FastDivmod(uint32_t divisor) : divisor_(divisor) {
    while ((uint64_t{1} << shift_) < divisor) ++shift_;  // shift = ceil(log2(divisor))
    // multiplier = floor(2^32 (2^shift - d) / d) + 1 < 2^32 for d < 2^31.
    multiplier_ = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift_) - divisor)) / divisor + 1);
  }

  GE_HD uint32_t divisor() const { return divisor_; }

  // n / divisor for n < 2^31.
  GE_HD uint32_t div(uint32_t n) const { return (mul_hi(n, multiplier_) + n) >> shift_; }
  GE_HD void divmod(uint32_t n, uint32_t& quotient, uint32_t& remainder) const {
    quotient = div(n);
    remainder = n - quotient * divisor_;
  }

 private:
  GE_HD static uint32_t mul_hi(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
    return __umulhi(a, b);
#else
    return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
#endif
  }

  uint32_t divisor_ = 1;
  uint32_t multiplier_ = 1;
  uint32_t shift_ = 0;
};

}  // namespace ge
