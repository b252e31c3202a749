// The whole training step on the GPU: against the CPU trainer, and without cudaMalloc once warm.
#include <cmath>

#include "ganengine/allocator.h"
#include "ganengine/ops.h"
#include "ganengine/state_dict.h"
#include "ganengine/trainer.h"
#include "test_util.h"

using namespace ge;
using namespace ge::test;

namespace {

TrainerConfig small_config(OptLevel level, Device d, DType half = DType::F16) {
  TrainerConfig cfg;
  cfg.net.ngf = cfg.net.ndf = 16;
  cfg.net.image_size = 32;
  AmpOverrides o;
  o.half = half;
  cfg.policy = resolve_policy(level, o);
  cfg.device = d;
  return cfg;
}

void batch(int64_t step, int64_t n, Tensor& real, Tensor& noise) {
  real = Tensor::empty({n, 3, 32, 32}, DType::F32);
  ops::fill_uniform(real, 11, static_cast<uint64_t>(step) << 20);
  std::vector<double> v = real.to_doubles();
  for (double& x : v) x = 2 * x - 1;
  real = Tensor::from_doubles(v, real.shape(), DType::F32);
  noise = Tensor::empty({n, 100, 1, 1}, DType::F32);
  ops::fill_normal(noise, 12, static_cast<uint64_t>(step) << 20);
}

}  // namespace

TEST_CASE("gpu trainer: O0 steps on the GPU follow the CPU trainer") {
  GE_REQUIRE_GPU();
  DcganTrainer cpu(small_config(OptLevel::O0, Device::cpu())), gpu(small_config(OptLevel::O0, Device::cuda(0)));
  for (int64_t s = 0; s < 6; ++s) {
    Tensor real, noise;
    batch(s, 8, real, noise);
    cpu.step(real, noise);
    gpu.step(real, noise);
    const StepRecord a = cpu.record(), b = gpu.record();
    const float ca[] = {a.errD_real, a.errD_fake, a.errG, a.D_x, a.D_G_z1, a.D_G_z2};
    const float cb[] = {b.errD_real, b.errD_fake, b.errG, b.D_x, b.D_G_z1, b.D_G_z2};
    for (int c = 0; c < 6; ++c) {
      INFO("step ", s, " column ", c, ": cpu ", ca[c], " gpu ", cb[c]);
      CHECK(std::fabs(ca[c] - cb[c]) <= 1e-4 * std::fabs(ca[c]) + 1e-6);
    }
  }
  auto wa = nn::state_dict(cpu.generator()), wb = nn::state_dict(gpu.generator());
  for (auto& [k, t] : wa) {
    INFO(k);
    CHECK(rel_error(t.to_doubles(), wb.at(k).to_doubles()) < 1e-4);
  }
}

TEST_CASE("gpu trainer: every opt level and bf16 trains with finite losses and no cudaMalloc once warm") {
  GE_REQUIRE_GPU();
  struct Run {
    OptLevel level;
    DType half;
  };
  for (Run run : {Run{OptLevel::O0, DType::F16}, Run{OptLevel::O1, DType::F16}, Run{OptLevel::O2, DType::F16},
                  Run{OptLevel::O3, DType::F16}, Run{OptLevel::O2, DType::BF16}}) {
    INFO(opt_level_name(run.level), " ", dtype_name(run.half));
    DcganTrainer t(small_config(run.level, Device::cuda(0), run.half));
    Tensor real, noise;
    for (int64_t s = 0; s < 8; ++s) {
      if (s == 3) {
        const AllocatorStats before = cuda_allocator_stats(0);
        for (int64_t k = 0; k < 4; ++k, ++s) {
          batch(s, 8, real, noise);
          t.step(real, noise);
        }
        CHECK(cuda_allocator_stats(0).cuda_malloc_calls == before.cuda_malloc_calls);
      }
      batch(s, 8, real, noise);
      t.step(real, noise);
      const StepRecord r = t.record();
      CHECK(std::isfinite(r.errD_real + r.errD_fake + r.errG));
      CHECK(r.D_x > 0);
      CHECK(r.D_x < 1);
    }
  }
}
