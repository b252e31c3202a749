// The DCGAN training step of Apex's main_amp.py, with Apex AMP semantics: three losses, one
// loss scaler each, two Adam optimizers. Everything a step decides (overflow, skip, new scale)
// is decided on the device; the host only reads the record of a step when it wants to log.
#pragma once
#include <array>
#include <memory>

#include "ganengine/amp.h"
#include "ganengine/nn.h"
#include "ganengine/optim.h"

namespace ge {

struct TrainerConfig {
  nn::NetConfig net;
  PrecisionPolicy policy;
  Device device = Device::cpu();
  uint64_t seed = 2809;
  double lr = 2e-4;
  double beta1 = 0.5;
};

// The losses of the example's three backward passes.
enum LossId { kLossDReal = 0, kLossDFake = 1, kLossG = 2 };

struct StepRecord {
  float errD_real = 0, errD_fake = 0, errG = 0;
  float D_x = 0, D_G_z1 = 0, D_G_z2 = 0;  // mean probabilities
  std::array<bool, 3> overflow{};          // found a non-finite gradient in loss i
  std::array<float, 3> scale{};            // loss scales after this step's update
  bool skipped_D() const { return overflow[0] || overflow[1]; }
};

class DcganTrainer {
 public:
  explicit DcganTrainer(const TrainerConfig& cfg);

  // One iteration. real: (N, nc, S, S) f32 in [-1, 1], any device; noise: (N, nz, 1, 1).
  void step(const Tensor& real, const Tensor& noise);
  // The latest step's losses, probabilities, overflows and scales (waits for the device).
  StepRecord record() const;
  // Test hook: the next step() puts an inf into loss `id`'s gradients, as a real overflow would.
  void force_overflow_next_step(LossId id) { forced_[id] = true; }

  nn::Sequential& generator() { return *G_; }
  nn::Sequential& discriminator() { return *D_; }
  Adam& optimizer_G() { return *optG_; }
  Adam& optimizer_D() { return *optD_; }
  // Loss scaler i's state: f32 (2) = {scale, clean steps}.
  Tensor& scaler_state(int i) { return scaler_[i]; }
  const TrainerConfig& config() const { return cfg_; }
  const nn::Placement& placement() const { return where_; }

 private:
  void scaled_backward(const Tensor& logits, float target, LossId id, bool accumulate);
  TrainerConfig cfg_;
  nn::Placement where_;
  std::unique_ptr<nn::Sequential> G_, D_;
  std::unique_ptr<Adam> optG_, optD_;
  std::array<Tensor, 3> scaler_;
  Tensor record_;      // f32 (12) on the device, read by record()
  Tensor no_skip_;     // f32 (1) zero: static loss scales never skip a step (Apex)
  std::array<bool, 3> forced_{};
  ops::ScalerConfig scaler_cfg_;
};

}  // namespace ge
