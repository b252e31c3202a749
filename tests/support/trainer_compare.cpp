#include "support/trainer_compare.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>

namespace ge::test {

TrainerConfig small_trainer_config(OptLevel level, Device d, int64_t width, int image_size, DType half) {
  TrainerConfig cfg;
  cfg.net.ngf = cfg.net.ndf = width;
  cfg.net.image_size = image_size;
  AmpOverrides o;
  o.half = half;
  cfg.policy = resolve_policy(level, o);
  cfg.device = d;
  return cfg;
}

void synthetic_step_inputs(int64_t step, int64_t n, int image_size, uint64_t seed, Tensor& real, Tensor& noise) {
  real = Tensor::empty({n, 3, image_size, image_size}, DType::F32);
  ops::fill_uniform(real, seed, static_cast<uint64_t>(step) << 20);
  std::vector<double> v = real.to_doubles();
  for (double& x : v) x = 2 * x - 1;
  real = Tensor::from_doubles(v, real.shape(), DType::F32);
  noise = Tensor::empty({n, 100, 1, 1}, DType::F32);
  ops::fill_normal(noise, seed + 1, static_cast<uint64_t>(step) << 20);
}

bool same_bits(float a, float b) {
  static_assert(sizeof(float) == sizeof(uint32_t), "float is 32 bits");
  uint32_t ua = 0, ub = 0;
  std::memcpy(&ua, &a, sizeof a);
  std::memcpy(&ub, &b, sizeof b);
  return ua == ub;
}

bool same_tensor(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.shape() != b.shape() || a.dtype() != b.dtype() || a.format() != b.format()) return false;
  const Tensor ha = a.to(Device::cpu()), hb = b.to(Device::cpu());
  return std::memcmp(ha.data(), hb.data(), a.nbytes()) == 0;
}

void expect_same_tensors(const std::map<std::string, Tensor>& got, const std::map<std::string, Tensor>& want) {
  REQUIRE(got.size() == want.size());
  for (const auto& wanted : want) {
    const std::string& name = wanted.first;
    const Tensor t = wanted.second.to(Device::cpu());
    INFO(name);
    auto it = got.find(name);
    REQUIRE(it != got.end());
    const Tensor g = it->second.to(Device::cpu());
    CHECK(g.dtype() == t.dtype());
    CHECK(g.shape() == t.shape());
    CHECK(g.format() == t.format());
    REQUIRE(g.nbytes() == t.nbytes());
    CHECK(std::memcmp(g.data(), t.data(), t.nbytes()) == 0);
  }
}

void expect_same_record(const StepRecord& a, const StepRecord& b, size_t step) {
  INFO("step ", step);
  const float fa[] = {a.errD_real, a.errD_fake, a.errG, a.D_x, a.D_G_z1, a.D_G_z2, a.scale[0], a.scale[1], a.scale[2]};
  const float fb[] = {b.errD_real, b.errD_fake, b.errG, b.D_x, b.D_G_z1, b.D_G_z2, b.scale[0], b.scale[1], b.scale[2]};
  for (int c = 0; c < 9; ++c) {
    INFO("field ", c, " (errD_real errD_fake errG D_x D_G_z1 D_G_z2 scale0 scale1 scale2): ", fa[c], " vs ", fb[c]);
    CHECK(same_bits(fa[c], fb[c]));
  }
  for (int i = 0; i < 3; ++i) {
    INFO("overflow ", i);
    CHECK(a.overflow[i] == b.overflow[i]);
  }
}

void expect_same_state(DcganTrainer& a, DcganTrainer& b, bool with_buffers, bool with_grads) {
  for (int net = 0; net < 2; ++net) {
    nn::Sequential& na = net == 0 ? a.generator() : a.discriminator();
    nn::Sequential& nb = net == 0 ? b.generator() : b.discriminator();
    auto pa = na.named_params(), pb = nb.named_params();
    REQUIRE(pa.size() == pb.size());
    for (size_t i = 0; i < pa.size(); ++i) {
      INFO((net == 0 ? "G " : "D "), pa[i].first);
      CHECK(same_tensor(pa[i].second->value, pb[i].second->value));
      CHECK(same_tensor(pa[i].second->master, pb[i].second->master));
      if (with_grads) CHECK(same_tensor(pa[i].second->grad, pb[i].second->grad));
    }
    auto ba = na.named_buffers(), bb = nb.named_buffers();
    REQUIRE(ba.size() == bb.size());
    for (size_t i = 0; with_buffers && i < ba.size(); ++i) {
      INFO((net == 0 ? "G " : "D "), ba[i].first);
      if (ba[i].second.tensor) CHECK(same_tensor(*ba[i].second.tensor, *bb[i].second.tensor));
      if (ba[i].second.counter) CHECK(*ba[i].second.counter == *bb[i].second.counter);
    }
    Adam& oa = net == 0 ? a.optimizer_G() : a.optimizer_D();
    Adam& ob = net == 0 ? b.optimizer_G() : b.optimizer_D();
    INFO((net == 0 ? "Adam G" : "Adam D"));
    CHECK(same_tensor(oa.step_count(), ob.step_count()));
    REQUIRE(oa.exp_avg().size() == ob.exp_avg().size());
    for (size_t i = 0; i < oa.exp_avg().size(); ++i) {
      INFO("moment ", i);
      CHECK(same_tensor(oa.exp_avg()[i], ob.exp_avg()[i]));
      CHECK(same_tensor(oa.exp_avg_sq()[i], ob.exp_avg_sq()[i]));
    }
  }
  for (int i = 0; i < 3; ++i) {
    INFO("scaler ", i);
    CHECK(same_tensor(a.scaler_state(i), b.scaler_state(i)));
  }
  for (int net = 0; net < 2; ++net) {
    auto fa = (net == 0 ? a.generator() : a.discriminator()).named_fp8_scalings();
    auto fb = (net == 0 ? b.generator() : b.discriminator()).named_fp8_scalings();
    REQUIRE(fa.size() == fb.size());
    for (size_t i = 0; i < fa.size(); ++i) {
      const auto x = fa[i].second->named(), y = fb[i].second->named();
      for (size_t k = 0; k < x.size(); ++k) {
        INFO((net == 0 ? "G " : "D "), fa[i].first, " FP8 scaling of the ", x[k].first);
        CHECK(same_tensor(x[k].second->amax_history, y[k].second->amax_history));
        CHECK(same_tensor(x[k].second->scale, y[k].second->scale));
        CHECK(same_tensor(x[k].second->scale_inv, y[k].second->scale_inv));
      }
    }
  }
}

}  // namespace ge::test
