// Small trainers, their synthetic inputs, and bitwise comparisons of whole trainers and of
// state_dicts, shared by the trainer, CUDA-graph, data-parallel and .pth tests.
#pragma once
#include <cstddef>
#include <map>
#include <string>

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

// A DCGAN of width ngf = ndf = `width` on image_size x image_size images.
TrainerConfig small_trainer_config(OptLevel level, Device d, int64_t width, int image_size, DType half = DType::F16);
// Step `step`'s inputs on the CPU: n images uniform in [-1, 1) from Philox stream `seed`, and
// their noise N(0, 1) from stream seed + 1.
void synthetic_step_inputs(int64_t step, int64_t n, int image_size, uint64_t seed, Tensor& real, Tensor& noise);

bool same_bits(float a, float b);
// Same shape, dtype, layout and bytes (either may be undefined only if both are).
bool same_tensor(const Tensor& a, const Tensor& b);
// The same names in both maps, and under each the same dtype, shape, layout and bytes (on any
// device).
void expect_same_tensors(const std::map<std::string, Tensor>& got, const std::map<std::string, Tensor>& want);
// Every field of two step records, bit for bit.
void expect_same_record(const StepRecord& a, const StepRecord& b, size_t step);
// Every weight (model copy, master, gradients), BatchNorm buffer and counter, Adam moment and
// step count, loss-scaler state, and O4's FP8 scaling states. with_buffers=false leaves out
// BatchNorm's running statistics, with_grads=false the f32 gradients.
void expect_same_state(DcganTrainer& a, DcganTrainer& b, bool with_buffers = true, bool with_grads = true);

}  // namespace ge::test
