// The bound an FP8 Tensor Core pass is held to against the f32 pass on the same FP8 values: its
// products are exact and its sums f32 but for the MMAs' order and the precision of their k32
// groups, so each result lies within 2^-7 of the same pass on the operands' magnitudes.
#pragma once
#include <cstdint>
#include <vector>

#include "ganengine/tensor.h"

namespace ge {
namespace test {

// |t| element by element: a CPU f32 tensor of t's shape in `format`.
Tensor magnitudes(const Tensor& t, MemoryFormat format);

// Elements of `got` further from `want` than 2^-7 of `bound` (the pass on the magnitudes) plus
// `rounding` of |want| (the result's own rounding); the first three fail as checks.
int64_t outside_fp8_bound(const std::vector<double>& got, const std::vector<double>& want,
                          const std::vector<double>& bound, double rounding);

}  // namespace test
}  // namespace ge
