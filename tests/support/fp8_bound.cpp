#include "support/fp8_bound.h"

#include <doctest/doctest.h>

#include <cmath>

namespace ge {
namespace test {

Tensor magnitudes(const Tensor& t, MemoryFormat format) {
  std::vector<double> v = t.to_doubles();
  for (double& x : v) x = std::fabs(x);
  return Tensor::from_doubles(v, t.shape(), DType::F32, Device::cpu(), format);
}

int64_t outside_fp8_bound(const std::vector<double>& got, const std::vector<double>& want,
                          const std::vector<double>& bound, double rounding) {
  int64_t outside = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 0x1p-7 * bound[i] + rounding * std::fabs(want[i]) + 1e-30) && ++outside <= 3)
      FAIL_CHECK("element ", i, ": ", got[i], " against ", want[i], ", magnitudes ", bound[i]);
  return outside;
}

}  // namespace test
}  // namespace ge
