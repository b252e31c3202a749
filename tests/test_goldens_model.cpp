// Whole networks, Adam and whole training steps against PyTorch.
#include <cmath>

#include "ganengine/ops.h"
#include "ganengine/state_dict.h"
#include "ganengine/trainer.h"
#include "golden.h"

using namespace ge;
using namespace ge::test;

namespace {

nn::StateDict prefixed(const SafeTensorsFile& f, const std::string& prefix) {
  nn::StateDict sd;
  for (auto& [k, v] : f.tensors)
    if (k.rfind(prefix, 0) == 0) sd[k.substr(prefix.size())] = v;
  return sd;
}

void check_network(Device d, bool generator) {
  const auto& f = golden("golden_dcgan.safetensors");
  nn::NetConfig cfg;
  cfg.nz = std::stoi(f.metadata.at("nz"));
  cfg.ngf = std::stoi(f.metadata.at("ngf"));
  cfg.ndf = std::stoi(f.metadata.at("ndf"));
  const PrecisionPolicy policy = resolve_policy(OptLevel::O0);
  const nn::Placement where = nn::Placement::for_device(d);
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
  for (auto& [name, p] : net->named_params()) {
    e = rel_error(p->model_grad.to_doubles(), golden_tensor(f, P + "grad." + name).to_doubles());
    INFO(P, name, " gradient error ", e);
    CHECK(e < 1e-5);
    ++grads;
  }
  CHECK(grads == (generator ? 13 : 11));
  for (auto& [name, b] : net->named_buffers()) {
    if (!b.tensor) continue;
    e = rel_error(b.tensor->to_doubles(), golden_tensor(f, P + "after." + name).to_doubles());
    INFO(P, name, " error ", e);
    CHECK(e < 1e-5);
  }
}

void check_adam(Device d) {
  const auto& f = golden("golden_adam.safetensors");
  std::vector<Tensor> params, grads, m, v;
  for (int i = 0; i < 2; ++i) {
    params.push_back(golden_on(f, "p" + std::to_string(i) + ".init", d));
    grads.push_back(Tensor::zeros(params.back().shape(), DType::F32, d));
    m.push_back(Tensor::zeros(params.back().shape(), DType::F32, d));
    v.push_back(Tensor::zeros(params.back().shape(), DType::F32, d));
  }
  Tensor step = Tensor::zeros({1}, DType::F32, d), skip = Tensor::zeros({1}, DType::F32, d);
  ops::AdamConfig cfg;  // lr 2e-4, betas (0.5, 0.999), eps 1e-8: the golden's
  for (int s = 1; s <= 3; ++s) {
    for (int i = 0; i < 2; ++i) grads[i].copy_from(golden_on(f, "p" + std::to_string(i) + ".grad" + std::to_string(s), d));
    ops::adam_step(params, grads, m, v, step, skip, cfg);
    CHECK(step.item() == s);
    for (int i = 0; i < 2; ++i) {
      const std::string k = "p" + std::to_string(i);
      double e = rel_error(params[i].to_doubles(), golden_tensor(f, k + ".value" + std::to_string(s)).to_doubles());
      INFO(k, " step ", s, " value error ", e);
      CHECK(e < 1e-6);
      CHECK(rel_error(m[i].to_doubles(), golden_tensor(f, k + ".exp_avg" + std::to_string(s)).to_doubles()) < 1e-5);
      CHECK(rel_error(v[i].to_doubles(), golden_tensor(f, k + ".exp_avg_sq" + std::to_string(s)).to_doubles()) < 1e-5);
    }
  }
}

// Column order of golden_train_*'s "records" (see tools/make_goldens.py).
enum Col { kErrDReal, kErrDFake, kErrG, kDx, kDGz1, kDGz2, kOvf0, kOvf1, kOvf2, kScale0, kScale1, kScale2 };

// 20 steps from PyTorch's initial weights, real batches and noise; losses per step within tol.
void check_trajectory(Device d, const std::string& run, OptLevel level, double tol) {
  const auto& in = golden("golden_train_inputs.safetensors");
  const auto& ref = golden("golden_train_" + run + ".safetensors");
  TrainerConfig cfg;
  cfg.net.nz = 100;
  cfg.net.ngf = cfg.net.ndf = 8;
  cfg.policy = resolve_policy(level);
  cfg.device = d;
  DcganTrainer trainer(cfg);
  nn::load_state_dict(trainer.generator(), prefixed(in, "G."), "golden G");
  nn::load_state_dict(trainer.discriminator(), prefixed(in, "D."), "golden D");
  // "loss1@step3;loss2@step5" -> forced overflows
  std::vector<std::pair<int, int>> forced;
  const std::string spec = ref.metadata.count("forced_overflows") ? ref.metadata.at("forced_overflows") : "";
  for (size_t pos = 0; pos < spec.size();) {
    size_t end = spec.find(';', pos);
    std::string item = spec.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    forced.emplace_back(item[4] - '0', std::stoi(item.substr(item.find('@') + 5)));
    pos = end == std::string::npos ? spec.size() : end + 1;
  }
  const Tensor& real_u8 = golden_tensor(in, "real");
  const Tensor& noise = golden_tensor(in, "noise");
  const std::vector<double> records = golden_tensor(ref, "records").to_doubles();
  // Step s uses real batch s mod (number of batches), as tools/make_goldens.py does.
  const int64_t steps = noise.dim(0), batches = real_u8.dim(0), N = real_u8.dim(1);
  const int64_t img = real_u8.numel() / batches, nz = noise.numel() / steps;
  const std::vector<double> pixels = real_u8.to_doubles(), z = noise.to_doubles();
  for (int64_t s = 0; s < steps; ++s) {
    std::vector<float> real(static_cast<size_t>(img));
    for (int64_t i = 0; i < img; ++i)
      real[i] = (static_cast<float>(pixels[(s % batches) * img + i]) / 255.0f - 0.5f) / 0.5f;
    std::vector<double> zs(z.begin() + s * nz, z.begin() + (s + 1) * nz);
    for (auto& [loss, at] : forced)
      if (at == s) trainer.force_overflow_next_step(static_cast<LossId>(loss));
    trainer.step(Tensor::from_floats(real, {N, 3, 64, 64}, DType::F32),
                 Tensor::from_doubles(zs, {N, 100, 1, 1}, DType::F32));
    const StepRecord r = trainer.record();
    const double* want = &records[s * 12];
    const float got[] = {r.errD_real, r.errD_fake, r.errG, r.D_x, r.D_G_z1, r.D_G_z2};
    for (int c = 0; c < 6; ++c) {
      double rel = std::fabs(got[c] - want[c]) / std::max(std::fabs(want[c]), 1e-3);
      INFO(run, " step ", s, " column ", c, ": ours ", got[c], " PyTorch ", want[c]);
      CHECK(rel < tol);
    }
    for (int i = 0; i < 3; ++i) {
      INFO(run, " step ", s, " loss ", i);
      CHECK(r.overflow[i] == (want[kOvf0 + i] != 0));
      CHECK(static_cast<double>(r.scale[i]) == want[kScale0 + i]);
    }
  }
  if (level == OptLevel::O0) {
    for (auto* net : {&trainer.generator(), &trainer.discriminator()}) {
      const std::string P = net == &trainer.generator() ? "G." : "D.";
      for (auto& [name, t] : nn::state_dict(*net)) {
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

}  // namespace

TEST_CASE("golden/cpu: Generator and Discriminator forward+backward match PyTorch") {
  check_network(Device::cpu(), true);
  check_network(Device::cpu(), false);
}
TEST_CASE("golden/cpu: Adam matches torch.optim.Adam over three steps") { check_adam(Device::cpu()); }
TEST_CASE("golden/cpu: 20 O0 training steps follow PyTorch's trajectory") {
  check_trajectory(Device::cpu(), "O0", OptLevel::O0, 1e-4);
}
TEST_CASE("golden/cpu: O1 with forced overflows skips and backs off exactly as Apex") {
  check_trajectory(Device::cpu(), "O1_forced", OptLevel::O1, 2e-2);
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
TEST_CASE("golden/gpu: 20 training steps at O0 O1 O2 follow PyTorch's trajectories") {
  GE_REQUIRE_GPU();
  check_trajectory(Device::cuda(0), "O0", OptLevel::O0, 1e-4);
  check_trajectory(Device::cuda(0), "O1", OptLevel::O1, 2e-2);
  check_trajectory(Device::cuda(0), "O2", OptLevel::O2, 2e-2);
  check_trajectory(Device::cuda(0), "O1_forced", OptLevel::O1, 2e-2);
}
