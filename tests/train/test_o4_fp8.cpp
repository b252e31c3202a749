// O4 (PrecisionPolicy::fp8_convolutions): which layers read FP8 operands, that training with them
// runs and differs from O2 while staying close to it, that each scale is the recipe's function of
// the recorded amaxes, that a saved state continues bit for bit and a damaged one is refused, that
// looking at samples changes nothing, and that the GPU's first step agrees with the CPU's (also
// where D's second layer reads FP8 codes on the GPU).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ganengine/safetensors.h"
#include "ganengine/state_dict.h"
#include "ganengine/trainer.h"
#include "ganengine/training_state.h"
#include "support/temp_dir.h"
#include "support/test_util.h"
#include "support/trainer_compare.h"

using namespace ge;
using namespace ge::test;

namespace {

constexpr int kImage = 32;
constexpr int64_t kBatch = 8;

TrainerConfig o4_config(Device d) { return small_trainer_config(OptLevel::O4, d, 16, kImage); }

void step(DcganTrainer& t, int64_t s) {
  Tensor real, noise;
  synthetic_step_inputs(s, kBatch, kImage, 41, real, noise);
  t.step(real, noise);
}

RunIdentity identity() {
  RunIdentity id;
  id.dataset = "synthetic";
  id.opt_level = "O4";
  id.half = "f16";
  id.batch_size = kBatch;
  id.image_size = kImage;
  id.nz = 100;
  id.ngf = id.ndf = 16;
  id.nc = 3;
  id.seed = 2809;
  return id;
}

// The losses, scores and next scales of one step on the CPU and the GPU agree within FP8's rounding.
void check_first_steps_agree(DcganTrainer& cpu, DcganTrainer& gpu) {
  const StepRecord a = cpu.record(), b = gpu.record();
  const float ca[] = {a.errD_real, a.errD_fake, a.errG, a.D_x, a.D_G_z1, a.D_G_z2};
  const float cb[] = {b.errD_real, b.errD_fake, b.errG, b.D_x, b.D_G_z1, b.D_G_z2};
  for (int c = 0; c < 6; ++c) {
    INFO("column ", c, ": cpu ", ca[c], " gpu ", cb[c]);
    CHECK(std::fabs(ca[c] - cb[c]) <= 2e-2 * std::fabs(ca[c]) + 1e-4);
  }
  // The scales of the next step agree as closely: the amaxes are maxima of nearly equal values.
  auto scales = [](DcganTrainer& t) {
    std::vector<double> out;
    for (nn::Sequential* net : {&t.generator(), &t.discriminator()})
      for (auto& [name, s] : net->named_fp8_scalings())
        for (const Fp8Scaling* state : {&s->input, &s->weight}) out.push_back(state->scale.to_doubles()[0]);
    return out;
  };
  CHECK(rel_error(scales(gpu), scales(cpu)) < 2e-2);
}

}  // namespace

TEST_CASE("trainer: O4 reads FP8 operands in exactly the convolutions with at least 8 channels on each side") {
  DcganTrainer t(o4_config(Device::cpu()));
  int fp8_layers = 0, half_layers = 0;
  for (nn::Sequential* net : {&t.generator(), &t.discriminator()})
    for (auto& layer : net->layers()) {
      auto* conv = dynamic_cast<nn::Conv2d*>(layer.get());
      if (!conv) continue;
      const Shape& w = conv->weight().value.shape();
      const bool wide = w[0] >= 8 && w[1] >= 8;
      INFO(conv->describe(), ": ", conv->precision());
      CHECK((conv->fp8() != nullptr) == wide);
      CHECK((conv->precision().find("E4M3") != std::string::npos) == wide);
      if (wide) {
        CHECK(conv->fp8()->input.format == Fp8Format::E4M3);
        CHECK(conv->fp8()->weight.format == Fp8Format::E4M3);
        CHECK(conv->fp8()->grad_output.format == Fp8Format::E5M2);
      }
      (wide ? fp8_layers : half_layers)++;
    }
  // G: 100 -> 64 -> 32 -> 16 in FP8, 16 -> 3 in half; D: 3 -> 16 and 64 -> 1 in half, 16 -> 32 -> 64 in FP8.
  CHECK(fp8_layers == 5);
  CHECK(half_layers == 3);
  // O2 has none.
  DcganTrainer o2(small_trainer_config(OptLevel::O2, Device::cpu(), 16, kImage));
  CHECK(o2.generator().named_fp8_scalings().empty());
  CHECK(o2.discriminator().named_fp8_scalings().empty());
}

TEST_CASE("trainer: O4 on the CPU trains close to O2 but not as O2 with scales the recipe makes of the amaxes") {
  DcganTrainer o4(o4_config(Device::cpu()));
  DcganTrainer o2(small_trainer_config(OptLevel::O2, Device::cpu(), 16, kImage));
  int64_t overflows = 0;
  for (int64_t s = 0; s < 6; ++s) {
    step(o4, s);
    step(o2, s);
    const StepRecord a = o4.record(), b = o2.record();
    for (bool skipped : a.overflow) overflows += skipped;
    INFO("step ", s, ": O4 ", a.errD_real, " ", a.errD_fake, " ", a.errG, ", O2 ", b.errD_real, " ", b.errD_fake, " ",
         b.errG);
    CHECK(std::isfinite(a.errD_real + a.errD_fake + a.errG));
    // D's loss on the real batch of the first step: the same weights, FP8 operands against half.
    if (s == 0) CHECK(std::fabs(a.errD_real - b.errD_real) < 0.05);
  }
  // The first steps at the initial loss scale of 2^16 overflow at O4 as at O2: the infinities in
  // the gradients pass the FP8 rounding unchanged (not saturated), reach the loss scaler, and are
  // recorded as an infinite amax of some output gradient.
  CHECK(overflows > 0);
  bool infinite_gradient_amax = false;
  for (nn::Sequential* net : {&o4.generator(), &o4.discriminator()})
    for (const auto& named : net->named_fp8_scalings())
      for (double a : named.second->grad_output.amax_history.to_doubles()) infinite_gradient_amax |= std::isinf(a);
  CHECK(infinite_gradient_amax);
  const auto g4 = nn::state_dict(o4.generator()), g2 = nn::state_dict(o2.generator());
  CHECK_FALSE(same_tensor(g4.at("main.0.weight"), g2.at("main.0.weight")));
  CHECK(rel_error(g4.at("main.0.weight").to_doubles(), g2.at("main.0.weight").to_doubles()) < 0.5);
  // Every input and weight state has seen 6 finite amaxes (the history's first 10 entries were never
  // written, none has dropped out yet): its scale is E4M3's 448 over their maximum, one f32 division.
  for (nn::Sequential* net : {&o4.generator(), &o4.discriminator()})
    for (const auto& [name, s] : net->named_fp8_scalings())
      for (const Fp8Scaling* state : {&s->input, &s->weight}) {
        const std::string layer = name;  // a structured binding cannot be captured (INFO's lambda)
        INFO(layer);
        const std::vector<double> h = state->amax_history.to_doubles();
        REQUIRE(h.size() == 16);
        CHECK(h[0] == 0.0);  // the next step's entry
        CHECK(std::count(h.begin(), h.end(), 0.0) == 10);
        const auto amax = static_cast<float>(*std::max_element(h.begin(), h.end()));
        REQUIRE(amax > 0);
        const volatile float expected = 448.0f / amax;
        CHECK(state->scale.to_doubles()[0] == expected);
        CHECK(state->scale_inv.to_doubles()[0] == static_cast<float>(1.0f / expected));
      }
}

TEST_CASE(
    "trainer: an O4 training state saved and loaded continues bitwise and a damaged FP8 scale or amax or scale_inv is "
    "refused") {
  TempDir dir("ge_o4_state");
  const std::string path = (dir.dir / "training_state.safetensors").string();
  DcganTrainer a(o4_config(Device::cpu()));
  for (int64_t s = 0; s < 3; ++s) step(a, s);
  Tensor fixed_noise = Tensor::zeros({4, 100, 1, 1}, DType::F32);
  save_training_state(path, a, fixed_noise, RunPosition{0, 3, 3}, identity());
  const SafeTensorsFile saved = load_safetensors(path);
  CHECK(saved.tensors.count("G.main.0.fp8_input.scale") == 1);
  CHECK(saved.tensors.count("D.main.2.fp8_grad_output.amax_history") == 1);

  DcganTrainer b(o4_config(Device::cpu()));
  Tensor loaded_noise = Tensor::zeros({4, 100, 1, 1}, DType::F32);
  const RunPosition pos = load_training_state(path, b, loaded_noise, identity());
  CHECK(pos.global_step == 3);
  expect_same_state(a, b, /*with_buffers=*/true, /*with_grads=*/false);  // gradients are no state
  for (int64_t s = 3; s < 6; ++s) {
    step(a, s);
    step(b, s);
    expect_same_record(a.record(), b.record(), static_cast<size_t>(s));
  }
  expect_same_state(a, b);

  SafeTensorsFile damaged = saved;
  damaged.tensors["G.main.0.fp8_weight.scale"] = Tensor::from_floats({-2.0f}, {1}, DType::F32);
  save_safetensors(path, damaged.tensors, damaged.metadata);
  DcganTrainer c(o4_config(Device::cpu()));
  CHECK_THROWS_WITH_AS(load_training_state(path, c, loaded_noise, identity()),
                       doctest::Contains("G.main.0.fp8_weight.scale' holds -2"), Error);
  damaged = saved;
  damaged.tensors["D.main.2.fp8_input.amax_history"] =
      Tensor::from_doubles(std::vector<double>(16, -1.0), {16}, DType::F32);
  save_safetensors(path, damaged.tensors, damaged.metadata);
  CHECK_THROWS_WITH_AS(load_training_state(path, c, loaded_noise, identity()),
                       doctest::Contains("expected amaxes >= 0"), Error);
  // Each value valid on its own, but scale_inv is not 1 / scale.
  damaged = saved;
  damaged.tensors["D.main.5.fp8_grad_output.scale_inv"] = Tensor::from_floats({5.0f}, {1}, DType::F32);
  save_safetensors(path, damaged.tensors, damaged.metadata);
  CHECK_THROWS_WITH_AS(load_training_state(path, c, loaded_noise, identity()),
                       doctest::Contains("D.main.5.fp8_grad_output.scale_inv' holds 5, not 1 / "), Error);
}

TEST_CASE("trainer: looking at O4 samples in training or eval mode records no amax and changes nothing") {
  DcganTrainer looked(o4_config(Device::cpu())), plain(o4_config(Device::cpu()));
  for (int64_t s = 0; s < 2; ++s) {
    step(looked, s);
    step(plain, s);
  }
  // An amax far above the noise's.
  const Tensor loud = Tensor::from_doubles(std::vector<double>(kBatch * 100, 50.0), {kBatch, 100, 1, 1}, DType::F32);
  looked.generator().set_update_running_stats(false);
  (void)looked.generator().forward(loud, /*training=*/true);
  looked.generator().set_update_running_stats(true);
  (void)looked.generator().forward(loud, /*training=*/false);
  for (int64_t s = 2; s < 4; ++s) {
    step(looked, s);
    step(plain, s);
    expect_same_record(looked.record(), plain.record(), static_cast<size_t>(s));
  }
  expect_same_state(looked, plain);
}

// At 64x64 with 64 channels D's second layer takes its input gradient from FP8 codes on a compute
// capability 9.0 GPU (ops::fp8_conv2d_backward_data_beats_half); the CPU rounds to FP8 and back.
TEST_CASE("gpu trainer: O4's first step on the GPU gives the CPU's losses within FP8's rounding") {
  GE_REQUIRE_GPU();
  DeterministicConvolutions deterministic;
  for (const auto& size : {std::pair<int64_t, int>{16, kImage}, std::pair<int64_t, int>{64, 64}}) {
    const int64_t width = size.first;
    const int image = size.second;
    CAPTURE(width);
    DcganTrainer cpu(small_trainer_config(OptLevel::O4, Device::cpu(), width, image));
    DcganTrainer gpu(small_trainer_config(OptLevel::O4, Device::cuda(0), width, image));
    Tensor real, noise;
    synthetic_step_inputs(0, kBatch, image, 41, real, noise);
    cpu.step(real, noise);
    gpu.step(real, noise);
    check_first_steps_agree(cpu, gpu);
  }
}
