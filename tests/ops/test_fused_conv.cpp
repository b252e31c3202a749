// Conv2d with its activation fused (D's first layer and its LeakyReLU, G's last and its Tanh):
// on the CPU the layer is bitwise the two layers in sequence, forward and every kind of backward
// (the filter gradient alone, as D's passes on data and on fake.detach() ask, the input gradient
// alone, as G's pass through D asks, and both), and so is Tanh's gradient taken by D's first
// layer for G. The GPU kernels are held to the same ops in tests/ops/test_gpu_ops.cpp.
#include <algorithm>
#include <cmath>

#include "ganengine/nn.h"
#include "support/test_util.h"

using namespace ge;
using namespace ge::test;

namespace {

struct Pass {
  Tensor y, dx, dw;
};

// One forward and one backward through Conv2d(8 -> 16, 4, 2, 1) and a LeakyReLU(0.2), with the
// activation fused into the convolution or as its own layer.
Pass run(bool fused, bool want_input_grad, const PrecisionPolicy& policy, const Tensor& w, const Tensor& x,
         const Tensor& dy, bool want_param_grads = true) {
  const nn::Placement where = nn::Placement::for_device(Device::cpu(), policy.compute_dtype);
  nn::Conv2d conv(8, 16, 4, 2, 1, false, policy, where);
  nn::ActivationLayer act(ops::Activation::LeakyReLU, 0.2f);
  nn::assign_param(conv.weight(), w);
  if (fused) {
    REQUIRE(conv.can_fuse_activation());
    conv.fuse_activation({ops::Activation::LeakyReLU, 0.2f});
    act.set_fused_into_previous(true);
  }
  Pass out;
  out.y = act.forward(conv.forward(x, true), true).clone();
  out.dx =
      conv.backward(act.backward(dy.clone(), want_param_grads, want_input_grad), want_param_grads, want_input_grad);
  out.dw = conv.weight().model_grad.clone();
  return out;
}

}  // namespace

TEST_CASE("fused conv activation: Conv2d with its LeakyReLU fused is bitwise the two layers on the CPU") {
  const PrecisionPolicy policy = resolve_policy(OptLevel::O2);
  const Tensor w = random_tensor({16, 8, 4, 4}, DType::F32, Device::cpu(), MemoryFormat::NCHW, -0.2, 0.2);
  const Tensor x = random_tensor({3, 8, 8, 8}, DType::F16, Device::cpu());
  const Tensor dy = random_tensor({3, 16, 4, 4}, DType::F16, Device::cpu());
  for (const bool want_input_grad : {false, true}) {
    CAPTURE(want_input_grad);
    const Pass fused = run(true, want_input_grad, policy, w, x, dy);
    const Pass apart = run(false, want_input_grad, policy, w, x, dy);
    CHECK(same_bytes(fused.y, apart.y));
    CHECK(same_bytes(fused.dw, apart.dw));
    REQUIRE(fused.dx.defined() == want_input_grad);
    if (want_input_grad) CHECK(same_bytes(fused.dx, apart.dx));
    // The activation mattered: some outputs are negative (slope 0.2), some positive.
    bool negative = false, positive = false;
    for (const double v : fused.y.to_doubles()) (v < 0 ? negative : positive) = true;
    CHECK((negative && positive));
  }
  // G's pass through D: the input gradient only.
  const Pass fused = run(true, true, policy, w, x, dy, /*want_param_grads=*/false);
  const Pass apart = run(false, true, policy, w, x, dy, /*want_param_grads=*/false);
  REQUIRE(fused.dx.defined());
  CHECK(same_bytes(fused.dx, apart.dx));
}

TEST_CASE("fused conv activation: an activation fuses only into a convolution written without channel padding") {
  const PrecisionPolicy policy = resolve_policy(OptLevel::O0);
  const nn::Placement where = nn::Placement::for_device(Device::cpu(), DType::F32);
  nn::Conv2d transposed(8, 16, 4, 2, 1, true, policy, where);
  CHECK(transposed.can_fuse_activation());
  transposed.keep_padded_output(true);
  CHECK_FALSE(transposed.can_fuse_activation());
  CHECK_THROWS_WITH_AS(
      transposed.fuse_activation({ops::Activation::Tanh, 0.f}),
      doctest::Contains("an activation fuses only into a convolution whose output is written without channel padding"),
      Error);
  nn::Conv2d padded_output(8, 3, 4, 2, 1, false, policy, where);
  padded_output.keep_padded_output(true);
  CHECK_FALSE(padded_output.can_fuse_activation());
}

TEST_CASE("fused conv activation: D's first LeakyReLU and G's Tanh run inside their convolutions") {
  const PrecisionPolicy policy = resolve_policy(OptLevel::O2);
  const nn::Placement where = nn::Placement::for_device(Device::cpu(), policy.compute_dtype);
  nn::NetConfig cfg;
  cfg.image_size = 16;
  auto D = nn::make_discriminator(cfg, policy, where);
  auto G = nn::make_generator(cfg, policy, where);
  CHECK(D->layers()[1]->precision().find("fused into the layer before it") != std::string::npos);
  CHECK(G->layers().back()->precision().find("fused into the layer before it") != std::string::npos);
  auto* g_last = dynamic_cast<nn::Conv2d*>(G->layers()[G->layers().size() - 2].get());
  REQUIRE(g_last);
  REQUIRE(g_last->fused_activation());
  CHECK(g_last->fused_activation()->kind == ops::Activation::Tanh);
}

namespace {

// G's last layer (ConvTranspose2d(16 -> 3) and its Tanh) feeding D's first (Conv2d(3 -> 8) and its
// LeakyReLU), as the trainer's step for G runs them: forward through both, then the input
// gradient alone through D's layer and both gradients through G's. With `fused`, both
// activations run inside their convolutions and D's layer takes Tanh's gradient as it writes
// its input gradient (take_input_gradient_through); else four separate layers.
struct Handoff {
  Tensor fake, dfake, dw_g;
};

Handoff run_handoff(bool fused, const PrecisionPolicy& policy, const Tensor& wg, const Tensor& wd, const Tensor& h,
                    const Tensor& dlogits) {
  const nn::Placement where = nn::Placement::for_device(Device::cpu(), policy.compute_dtype);
  nn::Conv2d g_conv(16, 3, 4, 2, 1, true, policy, where), d_conv(3, 8, 4, 2, 1, false, policy, where);
  nn::ActivationLayer tanh_layer(ops::Activation::Tanh), leaky(ops::Activation::LeakyReLU, 0.2f);
  nn::assign_param(g_conv.weight(), wg);
  nn::assign_param(d_conv.weight(), wd);
  if (fused) {
    g_conv.fuse_activation({ops::Activation::Tanh, 0.f});
    tanh_layer.set_fused_into_previous(true);
    d_conv.fuse_activation({ops::Activation::LeakyReLU, 0.2f});
    leaky.set_fused_into_previous(true);
    d_conv.take_input_gradient_through({ops::Activation::Tanh, 0.f});
    g_conv.receives_gradient_through_activation(true);
  }
  Handoff out;
  out.fake = tanh_layer.forward(g_conv.forward(h, true), true).clone();
  leaky.forward(d_conv.forward(out.fake, true), true);
  Tensor d_in = d_conv.backward(leaky.backward(dlogits.clone(), false, true), false, true);
  Tensor g_out = tanh_layer.backward(d_in, true, true);
  out.dfake = g_out.clone();
  g_conv.backward(g_out, true, true);
  out.dw_g = g_conv.weight().model_grad.clone();
  return out;
}

}  // namespace

TEST_CASE("fused conv activation: G's Tanh taken by D's first layer gives G the gradients of the layers apart") {
  for (const OptLevel level : {OptLevel::O0, OptLevel::O2}) {
    CAPTURE(static_cast<int>(level));
    const PrecisionPolicy policy = resolve_policy(level);
    const DType dt = policy.compute_dtype;
    const Tensor wg = random_tensor({16, 3, 4, 4}, DType::F32, Device::cpu(), MemoryFormat::NCHW, -0.3, 0.3);
    const Tensor wd = random_tensor({8, 3, 4, 4}, DType::F32, Device::cpu(), MemoryFormat::NCHW, -0.3, 0.3);
    const Tensor h = random_tensor({2, 16, 4, 4}, dt, Device::cpu());
    const Tensor dlogits = random_tensor({2, 8, 4, 4}, dt, Device::cpu());
    const Handoff fused = run_handoff(true, policy, wg, wd, h, dlogits);
    const Handoff apart = run_handoff(false, policy, wg, wd, h, dlogits);
    CHECK(same_bytes(fused.fake, apart.fake));
    CHECK(same_bytes(fused.dfake, apart.dfake));
    CHECK(same_bytes(fused.dw_g, apart.dw_g));
    // Tanh's gradient mattered: the fake batch is not all near zero.
    double largest = 0;
    for (const double v : fused.fake.to_doubles()) largest = std::max(largest, std::abs(v));
    CHECK(largest > 0.1);
  }
}

// A convolution without a fused activation of its own takes the input's activation gradient
// after writing the input gradient: bitwise activation_backward on the plain input gradient,
// with and without the filter gradient wanted.
TEST_CASE("fused conv activation: a plain convolution takes the input's activation gradient after writing dx") {
  const PrecisionPolicy policy = resolve_policy(OptLevel::O2);
  const nn::Placement where = nn::Placement::for_device(Device::cpu(), policy.compute_dtype);
  const Tensor w = random_tensor({8, 3, 4, 4}, DType::F32, Device::cpu(), MemoryFormat::NCHW, -0.3, 0.3);
  const Tensor x = random_tensor({2, 3, 8, 8}, DType::F16, Device::cpu());  // Tanh's outputs
  const Tensor dy = random_tensor({2, 8, 4, 4}, DType::F16, Device::cpu());
  for (const bool want_param_grads : {false, true}) {
    CAPTURE(want_param_grads);
    nn::Conv2d through(3, 8, 4, 2, 1, false, policy, where), plain(3, 8, 4, 2, 1, false, policy, where);
    nn::assign_param(through.weight(), w);
    nn::assign_param(plain.weight(), w);
    through.take_input_gradient_through({ops::Activation::Tanh, 0.f});
    through.forward(x, true);
    plain.forward(x, true);
    const Tensor got = through.backward(dy.clone(), want_param_grads, true);
    const Tensor plain_dx = plain.backward(dy.clone(), want_param_grads, true);
    Tensor want = plain_dx.clone();
    ops::activation_backward(ops::Activation::Tanh, x, want, want);
    CHECK(same_bytes(got, want));
    CHECK_FALSE(same_bytes(got, plain_dx));  // Tanh's gradient was taken
  }
}

TEST_CASE("fused conv activation: a gradient taken through the input's activation needs that activation's output") {
  const PrecisionPolicy policy = resolve_policy(OptLevel::O2);
  const nn::Placement where = nn::Placement::for_device(Device::cpu(), policy.compute_dtype);
  nn::Conv2d d_conv(3, 8, 4, 2, 1, false, policy, where);
  d_conv.take_input_gradient_through({ops::Activation::Tanh, 0.f});
  // An f32 input is converted to the layer's f16: not the activation's own output.
  const Tensor x = random_tensor({2, 3, 8, 8}, DType::F32, Device::cpu());
  d_conv.forward(x, true);
  const Tensor dy = random_tensor({2, 8, 4, 4}, DType::F16, Device::cpu());
  CHECK_THROWS_WITH_AS(d_conv.backward(dy, false, true),
                       doctest::Contains("give both layers the same precision policy"), Error);
}
