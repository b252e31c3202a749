// Sizes computed from a file's header or a flag: each product and sum is checked, so a value
// chosen to wrap around (4 billion images of 16384 x 16384 pixels) becomes an error naming
// what overflowed instead of a small allocation that later code overruns.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>

#include "ganengine/error.h"

namespace ge {

// a * b for sizes that must be >= 0; throws ge::Error "<what>: a x b overflows" otherwise.
inline int64_t checked_mul(int64_t a, int64_t b, const std::string& what) {
  int64_t product = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &product))
    fail(what, ": ", a, " x ", b, " is not a valid size (negative or beyond ", std::numeric_limits<int64_t>::max(),
         ")");
  return product;
}

// a + b for sizes that must be >= 0; throws ge::Error naming `what` otherwise.
inline int64_t checked_add(int64_t a, int64_t b, const std::string& what) {
  int64_t sum = 0;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &sum))
    fail(what, ": ", a, " + ", b, " is not a valid size (negative or beyond ", std::numeric_limits<int64_t>::max(),
         ")");
  return sum;
}

// The product of several sizes, each step checked.
inline int64_t checked_product(std::initializer_list<int64_t> factors, const std::string& what) {
  int64_t product = 1;
  for (int64_t f : factors) product = checked_mul(product, f, what);
  return product;
}

}  // namespace ge
