// The sample grid that `train` writes is the example's: G on the fixed noise in training mode
// (BatchNorm over the batch's own statistics), as main_amp.py draws it without netG.eval().
#include <cmath>
#include <cstdlib>
#include <string>

#include "ganengine/amp.h"
#include "ganengine/image_grid.h"
#include "ganengine/nn.h"
#include "ganengine/safetensors.h"
#include "ganengine/state_dict.h"
#include "support/cli_runner.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

using namespace ge;
using ge::test::TempDir;

namespace {

// The mean absolute difference of two u8 images of one shape, in grey levels.
double mean_abs_difference(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const auto* pa = a.data_as<uint8_t>();
  const auto* pb = b.data_as<uint8_t>();
  double sum = 0;
  for (int64_t i = 0; i < a.numel(); ++i) sum += std::abs(int(pa[i]) - int(pb[i]));
  return sum / static_cast<double>(a.numel());
}

}  // namespace

TEST_CASE("train cli: the last sample grid is G in training mode on the fixed noise with the saved weights") {
  TempDir tmp("ge_grid_mode");
  // Two steps: the grid written at the end of the epoch uses the weights netG_epoch_0 holds.
  const auto r = ge::test::run_ganengine(
      "train --dataset fake --device cpu --imageSize 16 --ngf 4 --ndf 4 --nz 8 --batchSize 8 --no-progress "
      "--opt-level O0 --max-steps 2 --outf " +
      tmp.dir.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const SafeTensorsFile state = load_safetensors(tmp.file("training_state.safetensors"));
  const Tensor& fixed_noise = state.tensors.at("fixed_noise");

  const PrecisionPolicy policy = resolve_policy(OptLevel::O0);
  nn::NetConfig cfg;
  cfg.image_size = 16;
  cfg.nz = 8;
  cfg.ngf = 4;
  cfg.ndf = 4;
  auto G = nn::make_generator(cfg, policy, nn::Placement::for_device(Device::cpu(), policy.compute_dtype));
  nn::load_state_dict(*G, load_safetensors(tmp.file("netG_epoch_0.safetensors")).tensors, "netG_epoch_0");
  G->set_update_running_stats(false);
  save_image_grid(G->forward(fixed_noise, /*training=*/true), tmp.file("train_mode.png"));
  save_image_grid(G->forward(fixed_noise, /*training=*/false), tmp.file("eval_mode.png"));

  const Tensor written = load_png_as_tensor(tmp.file("fake_samples_epoch_000.png"));
  const double to_train = mean_abs_difference(written, load_png_as_tensor(tmp.file("train_mode.png")));
  const double to_eval = mean_abs_difference(written, load_png_as_tensor(tmp.file("eval_mode.png")));
  MESSAGE("mean grey-level difference to training mode ", to_train, ", to eval mode ", to_eval);
  // Rounding-level differences at most (the CLI's CPU backend may order sums differently).
  CHECK(to_train < 0.05);
  // Running statistics after two steps are far from the batch's own: eval mode is another image.
  CHECK(to_eval > 1.0);
}
