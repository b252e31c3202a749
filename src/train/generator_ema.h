// What `train` makes of the moving average of G's weights (TrainerConfig::ema_decay): the
// netG_ema_epoch_%d.safetensors state dict and the sample grids drawn with it.
#pragma once
#include <memory>

#include "ganengine/state_dict.h"
#include "ganengine/trainer.h"

namespace ge {

// G's state dict under the same PyTorch names as netG_epoch_%d's, the weights replaced by their
// averages; the BatchNorm buffers (running statistics, num_batches_tracked) are G's own, copied
// as they are, since an average of running statistics is not what PyTorch's EMA keeps either.
nn::StateDict ema_state_dict(DcganTrainer& trainer);

// A second generator, of the trainer's configuration and placement, that holds the averaged
// weights while it draws the sample grid.
class EmaSampler {
 public:
  explicit EmaSampler(const DcganTrainer& trainer);
  // G(noise) with the current averages, in training mode (batch statistics) as the example draws
  // its samples; the trainer's own networks are left untouched.
  Tensor sample(DcganTrainer& trainer, const Tensor& noise);

 private:
  std::unique_ptr<nn::Sequential> generator_;
};

}  // namespace ge
