// FastDivmod (fast_divmod.h) against the / and % operators: the host runs the arithmetic the
// device runs, so this checks the kernels' tile arithmetic too.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "core/fast_divmod.h"

namespace {

void check_divisor(uint32_t d, const std::vector<uint32_t>& dividends) {
  const ge::FastDivmod fd(d);
  CHECK(fd.divisor() == d);
  for (uint32_t n : dividends) {
    uint32_t q = 0, r = 0;
    fd.divmod(n, q, r);
    if (q != n / d || r != n % d) {
      CAPTURE(d);
      CAPTURE(n);
      CHECK(q == n / d);
      CHECK(r == n % d);
      return;  // one report per divisor
    }
  }
}

// Around each multiple of d (where a quotient that is one off shows), and the largest dividends.
std::vector<uint32_t> dividends_for(uint32_t d, std::mt19937& rng) {
  std::vector<uint32_t> n;
  for (uint32_t i = 0; i < 300; ++i) n.push_back(i);
  for (uint64_t k :
       {uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{1000}, (uint64_t{1} << 31) / d - 1, (uint64_t{1} << 31) / d})
    for (int delta = -2; delta <= 2; ++delta) {
      const int64_t v = static_cast<int64_t>(k * d) + delta;
      if (v >= 0 && v < int64_t{ge::FastDivmod::kLimit}) n.push_back(static_cast<uint32_t>(v));
    }
  for (uint32_t top = ge::FastDivmod::kLimit - 1; top > ge::FastDivmod::kLimit - 64; --top) n.push_back(top);
  std::uniform_int_distribution<uint32_t> any(0, ge::FastDivmod::kLimit - 1);
  for (int i = 0; i < 200; ++i) n.push_back(any(rng));
  return n;
}

}  // namespace

TEST_CASE("fast divmod: quotients and remainders equal / and % for divisors and dividends below 2^31") {
  std::mt19937 rng(7);
  SUBCASE("every divisor up to 4096, every dividend up to 65536 for the first 64") {
    std::vector<uint32_t> all;
    for (uint32_t n = 0; n <= 65536; ++n) all.push_back(n);
    for (uint32_t d = 1; d <= 64; ++d) check_divisor(d, all);
    for (uint32_t d = 1; d <= 4096; ++d) check_divisor(d, dividends_for(d, rng));
  }
  SUBCASE("powers of two, their neighbours and random divisors up to 2^31 - 1") {
    for (int s = 0; s < 31; ++s)
      for (int delta = -1; delta <= 1; ++delta) {
        const int64_t d = (int64_t{1} << s) + delta;
        if (d >= 1 && d < int64_t{ge::FastDivmod::kLimit})
          check_divisor(static_cast<uint32_t>(d), dividends_for(static_cast<uint32_t>(d), rng));
      }
    std::uniform_int_distribution<uint32_t> any(1, ge::FastDivmod::kLimit - 1);
    for (int i = 0; i < 2000; ++i) {
      const uint32_t d = any(rng);
      check_divisor(d, dividends_for(d, rng));
    }
  }
  SUBCASE("the default divides by one") {
    const ge::FastDivmod one;
    uint32_t q = 0, r = 0;
    one.divmod(123456789u, q, r);
    CHECK(q == 123456789u);
    CHECK(r == 0u);
  }
}
