// The training-state file: everything needed to continue a run bit for bit — weights (model
// copies and fp32 masters), Adam moments and step counts, the three loss scalers, BatchNorm
// buffers, O4's FP8 scaling states, the fixed noise, and where in which epoch the run stopped.
// One safetensors file, written atomically.
#pragma once
#include <string>

#include "ganengine/safetensors.h"
#include "ganengine/trainer.h"

namespace ge {

struct RunPosition {
  int64_t epoch = 0;        // the epoch to continue in
  int64_t iteration = 0;    // the next batch index within it
  int64_t global_step = 0;  // steps done so far
};

// Identity of a run: a resume under other settings would not be the same run.
struct RunIdentity {
  std::string dataset, opt_level, half;
  int64_t batch_size = 0, image_size = 0, nz = 0, ngf = 0, ndf = 0, nc = 0;
  uint64_t seed = 0;
};

void save_training_state(const std::string& path, DcganTrainer& trainer, const Tensor& fixed_noise,
                         const RunPosition& pos, const RunIdentity& id);
// What save_training_state writes, for a caller that publishes it with other files
// (train/checkpoint_set.h).
SafeTensorsFile training_state_contents(DcganTrainer& trainer, const Tensor& fixed_noise, const RunPosition& pos,
                                        const RunIdentity& id);
// Restores into a trainer built with the same settings; returns the position and fills fixed_noise.
// Errors name the file and every setting that differs from the saved run; a position, loss
// scale or fixed noise that no save writes (negative, not a number, not finite) is refused as
// damage, and so is a checkpoint set whose files belong to different saves.
RunPosition load_training_state(const std::string& path, DcganTrainer& trainer, Tensor& fixed_noise,
                                const RunIdentity& expected);

// Everything a resume restores (weights, masters, Adam moments and steps, BatchNorm buffers and
// counters, loss scalers), copied from one live trainer into another built with the same settings,
// on any devices. Tensors are filled in place, so a captured CUDA graph of `to` stays valid.
void copy_training_state(DcganTrainer& from, DcganTrainer& to);

}  // namespace ge
