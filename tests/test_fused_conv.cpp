// Conv2d with its activation fused (D's first layer and its LeakyReLU): on the CPU the layer is
// bitwise the two layers in sequence, forward and every kind of backward (the filter gradient
// alone, as D's passes on data and on fake.detach() ask, the input gradient alone, as G's pass
// through D asks, and both). The GPU kernels are held to the same ops in tests/test_gpu_ops.cpp.
#include <cstring>

#include "ganengine/nn.h"
#include "test_util.h"

using namespace ge;
using namespace ge::test;

namespace {

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

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

TEST_CASE("fused conv activation: only a plain convolution takes an activation") {
  const PrecisionPolicy policy = resolve_policy(OptLevel::O0);
  const nn::Placement where = nn::Placement::for_device(Device::cpu(), DType::F32);
  nn::Conv2d transposed(8, 16, 4, 2, 1, true, policy, where);
  CHECK_FALSE(transposed.can_fuse_activation());
  CHECK_THROWS_WITH_AS(transposed.fuse_activation({ops::Activation::ReLU, 0.f}),
                       doctest::Contains("an activation fuses only into a (not transposed) convolution"), Error);
  nn::Conv2d padded_output(8, 3, 4, 2, 1, false, policy, where);
  padded_output.keep_padded_output(true);
  CHECK_FALSE(padded_output.can_fuse_activation());
}

TEST_CASE("fused conv activation: D's first LeakyReLU runs inside its convolution and G's Tanh stays apart") {
  const PrecisionPolicy policy = resolve_policy(OptLevel::O2);
  const nn::Placement where = nn::Placement::for_device(Device::cpu(), policy.compute_dtype);
  nn::NetConfig cfg;
  cfg.image_size = 16;
  auto D = nn::make_discriminator(cfg, policy, where);
  auto G = nn::make_generator(cfg, policy, where);
  CHECK(D->layers()[1]->precision().find("fused into the layer before it") != std::string::npos);
  CHECK(G->layers().back()->precision().find("fused") == std::string::npos);
}
