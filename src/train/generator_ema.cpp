#include "train/generator_ema.h"

#include "ganengine/ops.h"

namespace ge {

nn::StateDict ema_state_dict(DcganTrainer& trainer) {
  const std::vector<Tensor>& ema = trainer.generator_ema();
  GE_CHECK(!ema.empty(), "ema_state_dict: the trainer keeps no moving average (TrainerConfig::ema_decay is 0)");
  nn::StateDict sd = nn::state_dict(trainer.generator());
  auto params = trainer.generator().named_params();
  for (size_t i = 0; i < params.size(); ++i)
    sd[params[i].first] = ops::converted(ema[i], DType::F32, MemoryFormat::NCHW, Device::cpu());
  return sd;
}

EmaSampler::EmaSampler(const DcganTrainer& trainer)
    : generator_(nn::make_generator(trainer.config().net, trainer.config().policy, trainer.placement())) {
  generator_->set_update_running_stats(false);
}

Tensor EmaSampler::sample(DcganTrainer& trainer, const Tensor& noise) {
  nn::load_state_dict(*generator_, ema_state_dict(trainer), "the moving average of G's weights");
  return generator_->forward(noise, true);
}

}  // namespace ge
