// The moving average of G's weights in the training step (TrainerConfig::ema_decay): after every
// step it is the reference update of the previous average and the weights the step left, bit for
// bit, on the CPU and on the GPU with the step replayed from a CUDA graph; its state dict keeps
// G's names with G's BatchNorm buffers.
#include <cstring>
#include <vector>

#include "core/backend.h"
#include "support/test_util.h"
#include "support/trainer_compare.h"
#include "train/generator_ema.h"

using namespace ge;
using namespace ge::test;

namespace {

// average = f32(f32(decay * average) + f32((1 - decay) * weight)), element by element (ops.h).
std::vector<std::vector<float>> reference_update(const std::vector<std::vector<float>>& average,
                                                 const std::vector<std::vector<float>>& weights, double decay) {
  const auto keep = static_cast<float>(decay);
  const auto take = static_cast<float>(1.0 - decay);
  std::vector<std::vector<float>> out = average;
  for (size_t i = 0; i < out.size(); ++i)
    for (size_t e = 0; e < out[i].size(); ++e) {
      volatile float kept = keep * average[i][e];  // volatile: each product rounded on its own
      volatile float taken = take * weights[i][e];
      out[i][e] = kept + taken;
    }
  return out;
}

std::vector<float> floats_of(const Tensor& t) {
  const std::vector<double> d = t.to_doubles();
  return std::vector<float>(d.begin(), d.end());
}

// G's weights as the average reads them (the fp32 masters where there are any).
std::vector<std::vector<float>> generator_weights(DcganTrainer& t) {
  std::vector<std::vector<float>> out;
  for (nn::Param* p : t.generator().params()) out.push_back(floats_of(p->optimizer_value()));
  return out;
}

std::vector<std::vector<float>> averages(DcganTrainer& t) {
  std::vector<std::vector<float>> out;
  for (const Tensor& a : t.generator_ema()) out.push_back(floats_of(a));
  return out;
}

bool same_floats(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0)
      return false;
  return true;
}

// `steps` steps; after each, the average must be the reference update.
void check_average_follows_reference(TrainerConfig cfg, int steps) {
  cfg.ema_decay = 0.95;
  DcganTrainer trainer(cfg);
  REQUIRE(trainer.generator_ema().size() == trainer.generator().params().size());
  std::vector<std::vector<float>> expected = generator_weights(trainer);
  CHECK(same_floats(averages(trainer), expected));  // it starts at the initial weights
  for (int s = 0; s < steps; ++s) {
    CAPTURE(s);
    Tensor real, noise;
    synthetic_step_inputs(s, 8, cfg.net.image_size, 99, real, noise);
    trainer.step(real.to(cfg.device), noise.to(cfg.device));
    synchronize(cfg.device);
    expected = reference_update(expected, generator_weights(trainer), cfg.ema_decay);
    REQUIRE(same_floats(averages(trainer), expected));
  }
  if (cfg.cuda_graph) CHECK(trainer.graph_stats().replays == steps - cfg.cuda_graph_warmup);
  // The state dict: G's names and shapes, the averages as weights, G's own buffers.
  const nn::StateDict g = nn::state_dict(trainer.generator());
  const nn::StateDict a = ema_state_dict(trainer);
  REQUIRE(a.size() == g.size());
  auto named = trainer.generator().named_params();
  for (size_t i = 0; i < named.size(); ++i) {
    const Tensor& t = a.at(named[i].first);
    CHECK(t.shape() == g.at(named[i].first).shape());
    CHECK(floats_of(t) == expected[i]);
  }
  for (auto& entry : trainer.generator().named_buffers()) {
    const std::string& name = entry.first;
    CAPTURE(name);
    CHECK(a.at(name).to_doubles() == g.at(name).to_doubles());
  }
}

}  // namespace

TEST_CASE("generator ema: the average after each CPU step is the reference update") {
  for (OptLevel level : {OptLevel::O0, OptLevel::O2, OptLevel::O3}) {
    CAPTURE(opt_level_name(level));
    check_average_follows_reference(small_trainer_config(level, Device::cpu(), 4, 16), 3);
  }
}

TEST_CASE("generator ema: off by default and rejected outside 0 to 1") {
  TrainerConfig cfg = small_trainer_config(OptLevel::O0, Device::cpu(), 4, 16);
  CHECK(DcganTrainer(cfg).generator_ema().empty());
  cfg.ema_decay = 1.0;
  CHECK_THROWS_WITH_AS(DcganTrainer{cfg}, doctest::Contains("EMA decay 1"), Error);
}

TEST_CASE("gpu generator ema: the average inside the captured step is the reference update") {
  GE_REQUIRE_GPU();
  const DeterministicConvolutions deterministic;
  for (OptLevel level : {OptLevel::O1, OptLevel::O2}) {
    CAPTURE(opt_level_name(level));
    TrainerConfig cfg = small_trainer_config(level, Device::cuda(0), 8, 16);
    cfg.cuda_graph = true;
    // 3 warm-up steps, the capture, then replays: the average is updated in every one of them.
    check_average_follows_reference(cfg, 7);
  }
}
