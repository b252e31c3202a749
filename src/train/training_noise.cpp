#include "train/training_noise.h"

#include "ganengine/error.h"
#include "ganengine/ops.h"

namespace ge {

void fill_step_noise(Tensor& noise, uint64_t seed, int64_t step) {
  GE_CHECK(step >= 0 && noise.numel() <= kMaxNoiseValuesPerStep, "fill_step_noise: step ", step, ", ", noise.numel(),
           " values (at most ", kMaxNoiseValuesPerStep, " a step)");
  ops::fill_normal(noise, seed, kNoiseRegion + static_cast<uint64_t>(step) * kNoiseCountersPerStep);
}

}  // namespace ge
