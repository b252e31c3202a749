// Bitwise comparisons of whole trainers, shared by the CUDA-graph and data-parallel tests.
#pragma once
#include <cstddef>

#include "ganengine/ops.h"
#include "ganengine/trainer.h"

namespace ge::test {

// Deterministic cuDNN algorithms for the scope: the fastest ones may accumulate with atomics,
// which would make even two identical runs differ in the last bits.
struct DeterministicConvolutions {
  bool previous = ops::deterministic_convolutions();
  DeterministicConvolutions() { ops::set_deterministic_convolutions(true); }
  ~DeterministicConvolutions() { ops::set_deterministic_convolutions(previous); }
};

bool same_bits(float a, float b);
// Same shape, dtype, layout and bytes (either may be undefined only if both are).
bool same_tensor(const Tensor& a, const Tensor& b);
// Every field of two step records, bit for bit.
void expect_same_record(const StepRecord& a, const StepRecord& b, size_t step);
// Every weight (model copy, master, gradients), BatchNorm buffer and counter, Adam moment and
// step count, and loss-scaler state. with_buffers=false leaves out BatchNorm's running statistics.
void expect_same_state(DcganTrainer& a, DcganTrainer& b, bool with_buffers = true);

}  // namespace ge::test
