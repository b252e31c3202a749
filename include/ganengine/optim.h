// Adam over a network's parameters, with PyTorch's semantics. The optimizer updates each
// parameter's optimizer_value() (its fp32 master when one exists) from its f32 grad, and
// refreshes the half model copy from the master in the same pass.
#pragma once
#include <vector>

#include "ganengine/nn.h"
#include "ganengine/ops.h"

namespace ge {

class Adam {
 public:
  Adam(std::vector<nn::Param*> params, const ops::AdamConfig& cfg, Device device);
  // skip: f32 (k) on the device; any nonzero element means "a loss overflowed": no change.
  // pending (optional): the last loss's gradients, one per parameter in the order given, still
  // to be unscaled into the grads; the update does it as it reads them (ops::PendingGrads).
  void step(const Tensor& skip, const ops::PendingGrads* pending = nullptr);
  const ops::AdamConfig& config() const { return cfg_; }
  // Checkpoint access: per parameter (in the order given) its two moments, and the step count.
  std::vector<Tensor>& exp_avg() { return exp_avg_; }
  std::vector<Tensor>& exp_avg_sq() { return exp_avg_sq_; }
  Tensor& step_count() { return step_; }

 private:
  std::vector<nn::Param*> params_;
  ops::AdamConfig cfg_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
  Tensor step_;  // f32 (1) on the device, so a skipped step needs no host decision
  // Parameters fall in groups that one multi-tensor call can take together.
  struct Group {
    std::vector<Tensor> values, grads, m, v, half_copies;
    std::vector<size_t> index;  // of each member in params_
  };
  std::vector<Group> groups_;
};

}  // namespace ge
