// Conv2d with its activation fused (D's first layer and its LeakyReLU, G's last and its Tanh):
// on the CPU the layer is bitwise the two layers in sequence, forward and every kind of backward
// (the filter gradient alone, as D's passes on data and on fake.detach() ask, the input gradient
// alone, as G's pass through D asks, and both), and so is Tanh's gradient taken by D's first
// layer for G; the GPU's fused kernels against the CPU, and bitwise against the separate ops
// where the hand-written kernels run both.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ganengine/nn.h"
#include "ops/op_test_util.h"
#include "support/test_util.h"

namespace {

// --------------------------------------------------------------------------------------- CPU layers

namespace layer_checks {

using namespace ge;
using namespace ge::test;

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

}  // namespace layer_checks

// ---------------------------------------------------------------------------------- GPU against CPU

namespace gpu_checks {

using namespace ge::test::gpu_ref;

// conv2d followed by an activation as one op (D's first layer and its LeakyReLU): against the
// CPU's two ops in sequence, and bitwise against the GPU's two ops in sequence where the
// hand-written 8-channel kernels run both (they are deterministic; cuDNN's choices need not be;
// with Tanh the forward kernel runs the convolution and the activation kernel follows).
// The batch of 64 images of 64x64 has more tiles (1024) than the kernels launch blocks, so
// blocks walk several tiles; the 3x3 case goes to cuDNN and the separate activation kernels.
TEST_CASE("gpu ops: conv2d with a fused activation matches the CPU and the two ops in sequence") {
  GE_REQUIRE_GPU();
  struct Case {
    ConvCase shape;
    DType dt;
    MemoryFormat f;
    bool hand_written;  // the 8-channel kernels apply
  };
  const Case cases[] = {
      {{64, 8, 64, 64, 64, 4, 4, 2, 1}, DType::F16, MemoryFormat::NHWC, true},
      {{2, 8, 16, 16, 128, 4, 4, 2, 1}, DType::BF16, MemoryFormat::NHWC, true},
      {{1, 8, 8, 256, 64, 4, 4, 2, 1}, DType::F16, MemoryFormat::NHWC, true},
      {{2, 5, 9, 7, 6, 3, 3, 1, 1}, DType::F16, MemoryFormat::NHWC, false},
      {{2, 8, 16, 16, 64, 4, 4, 2, 1}, DType::F32, MemoryFormat::NCHW, false},
      {{70, 512, 4, 4, 1, 4, 4, 1, 0}, DType::F16, MemoryFormat::NHWC, false},  // D's last layer's kernels
  };
  for (const Case& c : cases)
    for (const Activation kind : {Activation::LeakyReLU, Activation::ReLU, Activation::Tanh}) {
      const ConvCase& cc = c.shape;
      CAPTURE(tag(c.dt, c.f));
      CAPTURE(cc.n);
      CAPTURE(cc.c);
      CAPTURE(cc.h);
      CAPTURE(cc.w);
      CAPTURE(cc.k);
      CAPTURE(std::string(ge::ops::activation_name(kind)));
      const ge::ops::FusedActivation act{kind, 0.2f};
      const ge::Conv2dParams p{cc.stride, cc.pad};
      const Tensor x = random_cpu({cc.n, cc.c, cc.h, cc.w}, c.dt, c.f);
      const Tensor w = random_cpu({cc.k, cc.c, cc.r, cc.s}, c.dt, c.f);
      const Tensor dy = random_cpu(cc.y_shape(), c.dt, c.f);

      Tensor y = zeros_cpu(dy.shape(), c.dt, c.f);
      ge::ops::conv2d_activation_forward(x, w, y, p, act);
      Tensor yg = poisoned_gpu(y);
      ge::ops::conv2d_activation_forward(gpu(x), gpu(w), yg, p, act);
      expect_close("conv2d_activation_forward", yg, y);
      if (c.hand_written) {
        Tensor two_ops = poisoned_gpu(y);
        ge::ops::conv2d_forward(gpu(x), gpu(w), two_ops, p);
        ge::ops::activation_forward(kind, two_ops, two_ops, 0.2f);
        expect_identical("conv2d_activation_forward vs conv2d_forward + activation_forward", yg, two_ops);
      }

      // The gradient flows from the GPU's own forward output (its signs decide the slopes).
      const Tensor y_ref = yg.to(kCpu);
      for (const float beta : {0.f, 1.f}) {
        CAPTURE(beta);
        const Tensor dw0 = random_cpu(w.shape(), c.dt, c.f);
        Tensor dw = dw0.clone();
        ge::ops::conv2d_activation_backward_filter(x, y_ref, dy, dw, p, act, beta);
        Tensor dwg = gpu(dw0);
        ge::ops::conv2d_activation_backward_filter(gpu(x), yg, gpu(dy), dwg, p, act, beta);
        expect_close("conv2d_activation_backward_filter", dwg, dw);
        if (c.hand_written) {
          Tensor dpre = poisoned_gpu(dy);
          ge::ops::activation_backward(kind, yg, gpu(dy), dpre, 0.2f);
          Tensor two_ops = gpu(dw0);
          ge::ops::conv2d_backward_filter(gpu(x), dpre, two_ops, p, beta);
          expect_identical("conv2d_activation_backward_filter vs activation_backward + conv2d_backward_filter", dwg,
                           two_ops);
        }
      }
      // The input gradient alone (G's pass through D), into all of w's channels and, where the
      // 8-channel kernels write fewer, into the first 3 or 1.
      std::vector<int64_t> dx_widths{cc.c};
      if (c.hand_written) dx_widths.insert(dx_widths.end(), {3, 1});
      for (const int64_t dx_channels : dx_widths) {
        CAPTURE(dx_channels);
        const ge::Shape dx_shape{cc.n, dx_channels, cc.h, cc.w};
        Tensor dx = zeros_cpu(dx_shape, c.dt, c.f);
        ge::ops::conv2d_activation_backward_data(y_ref, dy, w, dx, p, act);
        Tensor dxg = poisoned_gpu(dx);
        ge::ops::conv2d_activation_backward_data(yg, gpu(dy), gpu(w), dxg, p, act);
        expect_close("conv2d_activation_backward_data", dxg, dx);
        if (c.hand_written) {
          Tensor dpre = poisoned_gpu(dy);
          ge::ops::activation_backward(kind, yg, gpu(dy), dpre, 0.2f);
          Tensor two_ops = poisoned_gpu(dx);
          ge::ops::conv2d_backward_data(dpre, gpu(w), two_ops, p);
          expect_identical("conv2d_activation_backward_data vs activation_backward + conv2d_backward_data", dxg,
                           two_ops);
        }
        // Taken on through the activation whose output x is (G's Tanh before D's first layer):
        // the input gradient above followed by that activation's backward, bitwise where the
        // hand-written kernel takes it as it writes dx (cuDNN's algorithms need not repeat their
        // bits from one call to the next).
        for (const Activation before : {Activation::Tanh, Activation::LeakyReLU}) {
          CAPTURE(std::string(ge::ops::activation_name(before)));
          const Tensor x_act = random_cpu(dx_shape, c.dt, c.f, -1.0, 1.0);
          const ge::ops::InputActivation through{{before, 0.2f}, gpu(x_act)};
          Tensor dxt = poisoned_gpu(dx);
          ge::ops::conv2d_activation_backward_data(yg, gpu(dy), gpu(w), dxt, p, act, &through);
          Tensor apart = dxg.clone();
          ge::ops::activation_backward(before, through.x, apart, apart, 0.2f);
          if (c.hand_written)
            expect_identical("conv2d_activation_backward_data through the input's activation vs the two ops", dxt,
                             apart);
          else
            expect_close("conv2d_activation_backward_data through the input's activation vs the two ops", dxt,
                         apart.to(kCpu));
          Tensor dxt_cpu = zeros_cpu(dx_shape, c.dt, c.f);
          const ge::ops::InputActivation through_cpu{{before, 0.2f}, x_act};
          ge::ops::conv2d_activation_backward_data(y_ref, dy, w, dxt_cpu, p, act, &through_cpu);
          expect_close("conv2d_activation_backward_data through the input's activation", dxt, dxt_cpu);
        }
      }
    }
}

// A transposed convolution followed by an activation as one op (G's last layer and its Tanh): the
// 8-channel backward-data kernel takes the activation as it writes y, into 8 channels or the
// image's 3; against the CPU, and bitwise against the GPU's two ops in sequence there. The 3x3
// and f32 cases go to cuDNN and the separate activation kernel.
TEST_CASE("gpu ops: a transposed convolution with a fused activation matches the CPU and the two ops") {
  GE_REQUIRE_GPU();
  struct Case {
    int64_t n, k, p, q;  // x (N, K, P, Q)
    int64_t c, r;        // w (K, c, r, r); y twice x's size with stride 2 (r 4, pad 1) or as r gives
    int stride, pad;
    DType dt;
    MemoryFormat f;
  };
  const Case cases[] = {
      {64, 64, 32, 32, 8, 4, 2, 1, DType::F16, MemoryFormat::NHWC},
      {2, 128, 8, 16, 8, 4, 2, 1, DType::BF16, MemoryFormat::NHWC},
      {2, 6, 5, 5, 5, 3, 1, 1, DType::F16, MemoryFormat::NHWC},
      {2, 16, 8, 8, 8, 4, 2, 1, DType::F32, MemoryFormat::NCHW},
  };
  for (const Case& c : cases)
    for (const Activation kind : {Activation::Tanh, Activation::ReLU, Activation::LeakyReLU}) {
      CAPTURE(tag(c.dt, c.f));
      CAPTURE(c.n);
      CAPTURE(c.k);
      CAPTURE(c.p);
      CAPTURE(std::string(ge::ops::activation_name(kind)));
      const ge::ops::FusedActivation act{kind, 0.2f};
      const ge::Conv2dParams p{c.stride, c.pad};
      const Tensor x = random_cpu({c.n, c.k, c.p, c.q}, c.dt, c.f);
      const Tensor w = random_cpu({c.k, c.c, c.r, c.r}, c.dt, c.f);
      const int64_t H = ge::conv_transpose_out_size(c.p, c.r, c.stride, c.pad);
      const int64_t W = ge::conv_transpose_out_size(c.q, c.r, c.stride, c.pad);
      std::vector<int64_t> widths{c.c};
      if (c.c == 8) widths.push_back(3);
      for (const int64_t channels : widths) {
        CAPTURE(channels);
        Tensor y = zeros_cpu({c.n, channels, H, W}, c.dt, c.f);
        ge::ops::conv_transpose2d_activation_forward(x, w, y, p, act);
        Tensor yg = poisoned_gpu(y);
        ge::ops::conv_transpose2d_activation_forward(gpu(x), gpu(w), yg, p, act);
        expect_close("conv_transpose2d_activation_forward", yg, y);
        Tensor two_ops = poisoned_gpu(y);
        ge::ops::conv_transpose2d_forward(gpu(x), gpu(w), two_ops, p);
        ge::ops::activation_forward(kind, two_ops, two_ops, 0.2f);
        const bool hand_written = c.dt != DType::F32 && c.r == 4;
        if (hand_written)
          expect_identical("conv_transpose2d_activation_forward vs conv_transpose2d_forward + activation_forward", yg,
                           two_ops);
        else
          expect_close("conv_transpose2d_activation_forward vs conv_transpose2d_forward + activation_forward", yg,
                       two_ops.to(kCpu));
      }
    }
}

// The 8-channel forward takes LeakyReLU with a slope in (0, 1] as max(v, v * slope) on the
// rounded values (conv_8ch_tile.cuh's leaky_relu_pair), other slopes as compare and select: both
// must give the separate activation's bits, also where the convolution overflows to infinities
// and NaNs (x holds some of the dtype's largest values and infinities of either sign).
TEST_CASE("gpu ops: the forward's fused LeakyReLU gives the separate op's bits at any slope and at inf and NaN") {
  GE_REQUIRE_GPU();
  const MemoryFormat f = MemoryFormat::NHWC;
  for (const DType dt : {DType::F16, DType::BF16})
    for (const int64_t channels : {int64_t{8}, int64_t{3}}) {
      CAPTURE(tag(dt, f));
      CAPTURE(channels);
      const ConvCase cc{4, channels, 32, 32, 64, 4, 4, 2, 1};
      const ge::Conv2dParams p{cc.stride, cc.pad};
      Tensor x = random_cpu({cc.n, cc.c, cc.h, cc.w}, dt, f);
      // Every 37th value the dtype's largest finite value, every 101st +inf, every 103rd -inf
      // (bit patterns: f16 0x7bff, 0x7c00, 0xfc00; bf16 0x7f7f, 0x7f80, 0xff80).
      const bool half = dt == DType::F16;
      auto* bits = static_cast<uint16_t*>(x.data());
      for (int64_t i = 0; i < x.numel(); ++i) {
        if (i % 37 == 0) bits[i] = half ? 0x7bff : 0x7f7f;
        if (i % 101 == 0) bits[i] = half ? 0x7c00 : 0x7f80;
        if (i % 103 == 0) bits[i] = half ? 0xfc00 : 0xff80;
      }
      const Tensor xg = gpu(x), wg = gpu(random_cpu({cc.k, cc.c, cc.r, cc.s}, dt, f));
      Tensor plain = poisoned_gpu(zeros_cpu(cc.y_shape(), dt, f));
      ge::ops::conv2d_forward(xg, wg, plain, p);
      // The convolution's outputs cover what the activation must keep apart.
      size_t nans = 0, infs = 0, negative = 0, positive = 0;
      for (const double v : plain.to(kCpu).to_doubles()) {
        nans += std::isnan(v);
        infs += std::isinf(v);
        negative += v < 0 && std::isfinite(v);
        positive += v > 0 && std::isfinite(v);
      }
      CHECK(nans > 0);
      CHECK(infs > 0);
      CHECK(negative > 0);
      CHECK(positive > 0);
      for (const float slope : {0.f, 0.2f, 0.5f, 1.f, 1.5f, -0.25f}) {
        CAPTURE(slope);
        Tensor fused = poisoned_gpu(plain), two_ops = poisoned_gpu(plain);
        ge::ops::conv2d_activation_forward(xg, wg, fused, p, {Activation::LeakyReLU, slope});
        ge::ops::conv2d_forward(xg, wg, two_ops, p);
        ge::ops::activation_forward(Activation::LeakyReLU, two_ops, two_ops, slope);
        const Tensor a = fused.to(kCpu), b = two_ops.to(kCpu);
        CHECK(std::memcmp(a.data(), b.data(), a.nbytes()) == 0);
      }
    }
}

}  // namespace gpu_checks

}  // namespace
