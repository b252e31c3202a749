// The noise a training step feeds G: N(0, 1) from the Philox stream of --manualSeed, each step's
// values in their own counter region, so any step's noise is known without drawing the steps
// before it (a resumed run, and `bench --dataset`, draw what an uninterrupted `train` would).
#pragma once
#include <cstdint>

#include "ganengine/tensor.h"

namespace ge {

// Counter regions of the Philox stream; the weights' initialisation uses regions 1 and 2.
constexpr uint64_t kFixedNoiseRegion = 3ULL << 40;  // the sample grids' fixed noise
constexpr uint64_t kNoiseRegion = 4ULL << 40;       // step s starts at kNoiseRegion + s * kNoiseCountersPerStep
constexpr uint64_t kNoiseCountersPerStep = 1ULL << 22;
// A counter gives 4 values: batch x nz may be at most this.
constexpr int64_t kMaxNoiseValuesPerStep = static_cast<int64_t>(kNoiseCountersPerStep) * 4;

// Fills `noise` (the whole batch's, batch x nz x 1 x 1) with global step `step`'s values.
void fill_step_noise(Tensor& noise, uint64_t seed, int64_t step);

}  // namespace ge
