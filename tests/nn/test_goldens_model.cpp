// Whole networks, Adam and whole training steps against PyTorch.
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "ganengine/ops.h"
#include "ganengine/state_dict.h"
#include "ganengine/trainer.h"
#include "ganengine/training_state.h"
#include "support/golden.h"

using namespace ge;
using namespace ge::test;

namespace {

nn::StateDict prefixed(const SafeTensorsFile& f, const std::string& prefix) {
  nn::StateDict sd;
  for (auto& [k, v] : f.tensors)
    if (k.rfind(prefix, 0) == 0) sd[k.substr(prefix.size())] = v;
  return sd;
}

void check_network(Device d, bool generator, const SafeTensorsFile& f = golden("golden_dcgan.safetensors")) {
  nn::NetConfig cfg;
  cfg.nz = std::stoi(f.metadata.at("nz"));
  cfg.ngf = std::stoi(f.metadata.at("ngf"));
  cfg.ndf = std::stoi(f.metadata.at("ndf"));
  const PrecisionPolicy policy = resolve_policy(OptLevel::O0);
  const nn::Placement where = nn::Placement::for_device(d, policy.compute_dtype);
  auto net = generator ? nn::make_generator(cfg, policy, where) : nn::make_discriminator(cfg, policy, where);
  const std::string P = generator ? "G." : "D.";
  nn::load_state_dict(*net, prefixed(f, P + "init."), "golden_dcgan " + P);
  Tensor x = golden_on(f, P + (generator ? "z" : "x"), d, where.format);
  Tensor y = net->forward(x, true);
  Tensor dx = net->backward(golden_on(f, P + "dy", d, where.format).reshape(y.shape()), true, true);
  double e = rel_error(y.to_doubles(), golden_tensor(f, P + "y").to_doubles());
  INFO(P, "output error ", e);
  CHECK(e < 1e-5);
  e = rel_error(dx.to_doubles(), golden_tensor(f, P + (generator ? "dz" : "dx")).to_doubles());
  INFO(P, "input-gradient error ", e);
  CHECK(e < 1e-5);
  int grads = 0;
  for (const auto& named : net->named_params()) {
    const std::string& name = named.first;
    nn::Param* p = named.second;
    e = rel_error(p->model_grad.to_doubles(), golden_tensor(f, P + "grad." + name).to_doubles());
    INFO(P, name, " gradient error ", e);
    CHECK(e < 1e-5);
    ++grads;
  }
  CHECK(grads == (generator ? 13 : 11));
  for (const auto& named : net->named_buffers()) {
    const std::string& name = named.first;
    const nn::Buffer& b = named.second;
    if (!b.tensor) continue;
    e = rel_error(b.tensor->to_doubles(), golden_tensor(f, P + "after." + name).to_doubles());
    INFO(P, name, " error ", e);
    CHECK(e < 1e-5);
  }
}

// The golden's Adam, stated here rather than read from the engine: Apex's DCGAN example passes
// lr 2e-4 and betas (0.5, 0.999) and leaves eps at PyTorch's default, 1e-8 (tools/make_goldens.py
// wrote the golden with these and records them in its metadata). The engine runs with its
// AdamConfig defaults, which must be these: a change of them moves the updates and fails below.
constexpr double kAdamLr = 2e-4, kAdamBeta1 = 0.5, kAdamBeta2 = 0.999, kAdamEps = 1e-8;

// Each step's update (p_new - p_old) is compared with PyTorch's (value_s - value_{s-1}), relative
// to the norm of PyTorch's update: whole parameters at 1e-6 could not tell eps 1e-8 from 1e-6, the
// update being ~2e-4 of a parameter ~1. Measured error: 0 on the CPU (the fp32 arithmetic is
// PyTorch's, bit for bit; emulating the FMA contractions the GPU kernel may use also gives 0 on
// these values). eps 1e-7 makes it 1.3e-4 and eps 1e-6 3.2e-4; one fp32 rounding of a parameter
// of magnitude 0.5 or more the other way, 3e-5 or more. Bound on the CPU: 1e-5.
constexpr double kAdamUpdateTol = 1e-5;

void check_adam(Device d) {
  const auto& f = golden("golden_adam.safetensors");
  CHECK(std::stod(f.metadata.at("lr")) == kAdamLr);
  CHECK(std::stod(f.metadata.at("beta1")) == kAdamBeta1);
  CHECK(std::stod(f.metadata.at("beta2")) == kAdamBeta2);
  CHECK(std::stod(f.metadata.at("eps")) == kAdamEps);
  std::vector<Tensor> params, grads, m, v;
  for (int i = 0; i < 2; ++i) {
    params.push_back(golden_on(f, "p" + std::to_string(i) + ".init", d));
    grads.push_back(Tensor::zeros(params.back().shape(), DType::F32, d));
    m.push_back(Tensor::zeros(params.back().shape(), DType::F32, d));
    v.push_back(Tensor::zeros(params.back().shape(), DType::F32, d));
  }
  Tensor step = Tensor::zeros({1}, DType::F32, d), skip = Tensor::zeros({1}, DType::F32, d);
  const ops::AdamConfig cfg;  // the engine's defaults
  for (int s = 1; s <= 3; ++s) {
    std::vector<std::vector<double>> before;
    for (int i = 0; i < 2; ++i) {
      grads[i].copy_from(golden_on(f, "p" + std::to_string(i) + ".grad" + std::to_string(s), d));
      before.push_back(params[i].to_doubles());
    }
    ops::adam_step(params, grads, m, v, step, skip, cfg);
    CHECK(step.item() == s);
    for (int i = 0; i < 2; ++i) {
      const std::string k = "p" + std::to_string(i);
      const std::vector<double> after = params[i].to_doubles();
      const std::vector<double> torch_before =
          golden_tensor(f, s == 1 ? k + ".init" : k + ".value" + std::to_string(s - 1)).to_doubles();
      const std::vector<double> torch_after = golden_tensor(f, k + ".value" + std::to_string(s)).to_doubles();
      std::vector<double> ours(after.size()), theirs(after.size());
      for (size_t j = 0; j < after.size(); ++j) {
        ours[j] = after[j] - before[i][j];
        theirs[j] = torch_after[j] - torch_before[j];
      }
      const double e = rel_error(ours, theirs);
      INFO(k, " step ", s, " update error ", e);
      if (d.is_cuda()) {
        // The GPU kernel shares the update's arithmetic (adam_math.h) with the CPU, whose updates
        // are held to kAdamUpdateTol; its fused multiply-adds may round a parameter the other way,
        // so here the whole parameters are held to 1e-6.
        CHECK(rel_error(after, torch_after) < 1e-6);
      } else {
        CHECK(e < kAdamUpdateTol);
      }
      CHECK(rel_error(m[i].to_doubles(), golden_tensor(f, k + ".exp_avg" + std::to_string(s)).to_doubles()) < 1e-5);
      CHECK(rel_error(v[i].to_doubles(), golden_tensor(f, k + ".exp_avg_sq" + std::to_string(s)).to_doubles()) < 1e-5);
    }
  }
}

// Column order of golden_train_*'s "records" (see tools/make_goldens.py).
enum Col { kErrDReal, kErrDFake, kErrG, kDx, kDGz1, kDGz2, kOvf0, kOvf1, kOvf2, kScale0, kScale1, kScale2 };

struct TrajectoryInputs {
  const SafeTensorsFile& in;
  int64_t steps, batches, N, img, nz;
  std::vector<double> pixels, z;
  explicit TrajectoryInputs(const SafeTensorsFile& f) : in(f) {
    const Tensor& real_u8 = golden_tensor(f, "real");
    const Tensor& noise = golden_tensor(f, "noise");
    steps = noise.dim(0);
    batches = real_u8.dim(0);  // step s uses batch s mod batches, as tools/make_goldens.py does
    N = real_u8.dim(1);
    img = real_u8.numel() / batches;
    nz = noise.numel() / (steps * N);
    pixels = real_u8.to_doubles();
    z = noise.to_doubles();
  }
  Tensor real(int64_t s) const {  // ToTensor + Normalize(0.5, 0.5), in f32 as torchvision does
    std::vector<float> v(static_cast<size_t>(img));
    for (int64_t i = 0; i < img; ++i)
      v[i] = (static_cast<float>(pixels[(s % batches) * img + i]) / 255.0f - 0.5f) / 0.5f;
    return Tensor::from_floats(v, {N, 3, 64, 64}, DType::F32);
  }
  Tensor noise(int64_t s) const {
    return Tensor::from_doubles(std::vector<double>(z.begin() + s * N * nz, z.begin() + (s + 1) * N * nz),
                                {N, nz, 1, 1}, DType::F32);
  }
};

TrainerConfig trajectory_config(Device d, OptLevel level) {
  TrainerConfig cfg;
  cfg.net.nz = 100;
  cfg.net.ngf = cfg.net.ndf = 8;
  cfg.policy = resolve_policy(level);
  cfg.device = d;
  return cfg;
}

// Losses and probabilities of one step within tol (relative); overflows and scales exact.
void compare_record(const std::string& run, int64_t s, const StepRecord& r, const double* want, double tol,
                    bool compare_losses) {
  const float got[] = {r.errD_real, r.errD_fake, r.errG, r.D_x, r.D_G_z1, r.D_G_z2};
  if (compare_losses)
    for (int c = 0; c < 6; ++c) {
      double rel = std::fabs(got[c] - want[c]) / std::max(std::fabs(want[c]), 1e-3);
      INFO(run, " step ", s, " column ", c, ": ours ", got[c], " PyTorch ", want[c], " relative difference ", rel);
      CHECK(rel < tol);
    }
  for (int i = 0; i < 3; ++i) {
    INFO(run, " step ", s, " loss ", i);
    CHECK(r.overflow[i] == (want[kOvf0 + i] != 0));
    CHECK(static_cast<double>(r.scale[i]) == want[kScale0 + i]);
  }
}

// 20 free-running steps from PyTorch's initial weights, real batches and noise. Overflows,
// skipped steps and loss scales must match exactly. Losses are compared (within tol) only where
// a trajectory is predictable: GAN training amplifies rounding-level differences step by step,
// and from this start an fp32 run stays within 1e-7 of a perturbed copy of itself for 20 steps
// while an fp16 run drifts by 1e-2, far enough that even a natural overflow can come a step
// earlier or later (measured). So fp16 runs are checked free-running only where overflows are
// forced, and step by step from PyTorch's own states (check_teacher_forced).
void check_trajectory(Device d, const std::string& run, OptLevel level, double tol, bool compare_losses) {
  const TrajectoryInputs in(golden("golden_train_inputs.safetensors"));
  const auto& ref = golden("golden_train_" + run + ".safetensors");
  DcganTrainer trainer(trajectory_config(d, level));
  nn::load_state_dict(trainer.generator(), prefixed(in.in, "G."), "golden G");
  nn::load_state_dict(trainer.discriminator(), prefixed(in.in, "D."), "golden D");
  // "loss1@step3;loss2@step5" -> forced overflows
  std::vector<std::pair<int, int>> forced;
  const std::string spec = ref.metadata.count("forced_overflows") ? ref.metadata.at("forced_overflows") : "";
  for (size_t pos = 0; pos < spec.size();) {
    size_t end = spec.find(';', pos);
    std::string item = spec.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    forced.emplace_back(item[4] - '0', std::stoi(item.substr(item.find('@') + 5)));
    pos = end == std::string::npos ? spec.size() : end + 1;
  }
  const std::vector<double> records = golden_tensor(ref, "records").to_doubles();
  int overflows = 0;
  for (int64_t s = 0; s < in.steps; ++s) {
    for (auto& [loss, at] : forced)
      if (at == s) trainer.force_overflow_next_step(static_cast<LossId>(loss));
    trainer.step(in.real(s), in.noise(s));
    const StepRecord r = trainer.record();
    compare_record(run, s, r, &records[s * 12], tol, compare_losses);
    overflows += r.overflow[0] + r.overflow[1] + r.overflow[2];
  }
  if (!forced.empty()) CHECK(overflows >= static_cast<int>(forced.size()));
  if (level == OptLevel::O0) {
    for (auto* net : {&trainer.generator(), &trainer.discriminator()}) {
      const std::string P = net == &trainer.generator() ? "G." : "D.";
      for (const auto& entry : nn::state_dict(*net)) {
        const std::string& name = entry.first;
        const Tensor& t = entry.second;
        if (t.dtype() == DType::I64) {
          CHECK(t.item() == golden_tensor(ref, P + name).item());
          continue;
        }
        double e = rel_error(t.to_doubles(), golden_tensor(ref, P + name).to_doubles());
        INFO(run, " final ", P, name, " error ", e);
        CHECK(e < tol);
      }
    }
  }
}

// Each of the 20 steps taken from PyTorch's own state before that step (weights, fp32 masters,
// Adam moments and counts, loss scalers), written by make_goldens.py --teacher-dir on a GPU: one
// step of ours must reproduce PyTorch's step.
void check_teacher_forced(Device d, const std::string& run, OptLevel level, double tol) {
  // The states, inputs and records of one fresh make_goldens.py run (they must belong together).
  const char* dir = std::getenv("GE_TEACHER_DIR");
  INFO("GE_TEACHER_DIR is not set: tools/gpu_suite.sh writes PyTorch's per-step states and sets it");
  REQUIRE(dir != nullptr);
  const SafeTensorsFile inputs = load_safetensors(std::string(dir) + "/golden_train_inputs.safetensors");
  const TrajectoryInputs in(inputs);
  const std::vector<double> records =
      golden_tensor(load_safetensors(std::string(dir) + "/golden_train_" + run + ".safetensors"), "records")
          .to_doubles();
  DcganTrainer trainer(trajectory_config(d, level));
  const RunIdentity id{"golden", opt_level_name(level), "f16", in.N, 64, 100, 8, 8, 3, 0};
  Tensor fixed_noise = Tensor::zeros({in.N, 100, 1, 1}, DType::F32, d);
  double worst = 0;
  for (int64_t s = 0; s < in.steps; ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "/teacher/%s/state_%02d.safetensors", run.c_str(), static_cast<int>(s));
    const RunPosition pos = load_training_state(std::string(dir) + name, trainer, fixed_noise, id);
    CHECK(pos.global_step == s);
    trainer.step(in.real(s), in.noise(s));
    const StepRecord r = trainer.record();
    compare_record(run + " from PyTorch's state", s, r, &records[s * 12], tol, true);
    const float got[] = {r.errD_real, r.errD_fake, r.errG, r.D_x, r.D_G_z1, r.D_G_z2};
    for (int c = 0; c < 6; ++c)
      worst = std::max(worst, std::fabs(got[c] - records[s * 12 + c]) / std::max(std::fabs(records[s * 12 + c]), 1e-3));
  }
  MESSAGE(run, " on ", d.str(), ": worst relative difference of a step from PyTorch's state: ", worst);
}

}  // namespace

TEST_CASE("golden/cpu: Generator and Discriminator forward+backward match PyTorch") {
  check_network(Device::cpu(), true);
  check_network(Device::cpu(), false);
}
TEST_CASE("golden/cpu: Adam matches torch.optim.Adam over three steps") { check_adam(Device::cpu()); }
TEST_CASE("golden/cpu: 20 O0 training steps follow PyTorch's trajectory") {
  check_trajectory(Device::cpu(), "O0", OptLevel::O0, 1e-4, true);
}
// O1 and O2 free-running from PyTorch's start (golden_train_O1, golden_train_O2): the natural
// overflows of the first steps (all three losses at step 0, losses 1 and 2 at steps 1 and 2) and
// the loss scales exactly for 16 steps, the losses within 5e-3 for 4 steps (measured: 2e-3) and
// within 5e-2 up to step 15 (measured: 3.3e-2). fp16 rounding then drifts the runs apart: at step 18
// the CPU's loss 2 overflows where PyTorch's does not.
TEST_CASE("golden/cpu: 16 free-running O1 and O2 steps overflow where PyTorch's do and stay close") {
  for (OptLevel level : {OptLevel::O1, OptLevel::O2}) {
    const std::string run = opt_level_name(level);
    const TrajectoryInputs in(golden("golden_train_inputs.safetensors"));
    const std::vector<double> records =
        golden_tensor(golden("golden_train_" + run + ".safetensors"), "records").to_doubles();
    DcganTrainer trainer(trajectory_config(Device::cpu(), level));
    nn::load_state_dict(trainer.generator(), prefixed(in.in, "G."), "golden G");
    nn::load_state_dict(trainer.discriminator(), prefixed(in.in, "D."), "golden D");
    REQUIRE(in.steps >= 16);
    int overflows = 0;
    for (int64_t s = 0; s < 16; ++s) {
      trainer.step(in.real(s), in.noise(s));
      const StepRecord r = trainer.record();
      compare_record(run, s, r, &records[s * 12], s < 4 ? 5e-3 : 5e-2, true);
      overflows += r.overflow[0] + r.overflow[1] + r.overflow[2];
    }
    CHECK(overflows == 7);
  }
}

TEST_CASE("golden/cpu: O1 with forced overflows skips and backs off exactly as Apex") {
  check_trajectory(Device::cpu(), "O1_forced", OptLevel::O1, 0, false);
}

TEST_CASE("golden/gpu: Generator and Discriminator forward+backward match PyTorch") {
  GE_REQUIRE_GPU();
  check_network(Device::cuda(0), true);
  check_network(Device::cuda(0), false);
}
TEST_CASE("golden/gpu: Adam matches torch.optim.Adam over three steps") {
  GE_REQUIRE_GPU();
  check_adam(Device::cuda(0));
}
TEST_CASE("golden/gpu: 20 free-running O0 steps follow PyTorch and forced overflows skip as Apex") {
  GE_REQUIRE_GPU();
  check_trajectory(Device::cuda(0), "O0", OptLevel::O0, 1e-4, true);
  check_trajectory(Device::cuda(0), "O1_forced", OptLevel::O1, 0, false);
}
TEST_CASE("golden/gpu: every training step from PyTorch's state matches PyTorch at O0 O1 O2") {
  GE_REQUIRE_GPU();
  for (Device d : {Device::cuda(0), Device::cpu()}) {
    check_teacher_forced(d, "O0", OptLevel::O0, 1e-4);
    // The difference is at most 6e-4 on either device (PyTorch's own fp16 noise); the bound is
    // tighter than the 2e-2 the spec allows, to catch regressions early.
    check_teacher_forced(d, "O1", OptLevel::O1, 5e-3);
    check_teacher_forced(d, "O2", OptLevel::O2, 5e-3);
  }
}
TEST_CASE("golden/gpu: full-width Generator and Discriminator (ngf=ndf=64) match PyTorch computed on the spot") {
  GE_REQUIRE_GPU();
  const char* dir = std::getenv("GE_TEACHER_DIR");
  INFO("GE_TEACHER_DIR is not set: tools/gpu_suite.sh writes the full-width golden there and sets it");
  REQUIRE(dir != nullptr);
  const SafeTensorsFile full = load_safetensors(std::string(dir) + "/teacher/golden_dcgan_full.safetensors");
  REQUIRE(full.metadata.at("ngf") == "64");
  check_network(Device::cuda(0), true, full);
  check_network(Device::cuda(0), false, full);
}
