// Channel padding: ops::copy_padded (the CPU reference against its definition, the GPU bitwise
// against the CPU), Conv2d on channels it pads, and convolutions whose x, w or dx hold 1 or 3 of
// the 8 channels the kernels take, against their zero-padded copies.
#include <cstdint>
#include <cstring>

#include "ganengine/nn.h"
#include "ops/op_test_util.h"
#include "support/test_util.h"

namespace {

// --------------------------------------------------------------------------- copy_padded and Conv2d

namespace copy_padded_checks {

using namespace ge;
using namespace ge::test;

struct PadCase {
  Shape src, dst;
};
const PadCase kCases[] = {
    {{5, 3, 4, 4}, {5, 8, 4, 4}},        // an image batch padded to 8 channels
    {{5, 8, 4, 4}, {5, 3, 4, 4}},        // and trimmed back
    {{64, 3, 4, 4}, {64, 8, 4, 4}},      // a first-layer weight
    {{100, 64, 4, 4}, {104, 64, 4, 4}},  // a transposed weight padded along its first dimension
    {{1, 512, 4, 4}, {8, 512, 4, 4}},    // a one-output weight
    {{7, 100, 1, 1}, {7, 104, 1, 1}},    // noise
    {{6, 5, 3, 2}, {4, 9, 3, 2}},        // both ways at once
    {{70, 3, 64, 64}, {70, 8, 64, 64}},  // a DCGAN image batch: blocks walk several runs
    {{70, 8, 64, 64}, {70, 3, 64, 64}},  // G's padded output trimmed to the image: a thread per pixel
    {{9, 8, 5, 5}, {7, 1, 5, 5}},        // a 1-channel trim of fewer images
};

TEST_CASE("copy_padded: copies the overlap and zeros the rest in both layouts") {
  for (const PadCase& pc : kCases)
    for (MemoryFormat f : {MemoryFormat::NCHW, MemoryFormat::NHWC}) {
      INFO(shape_str(pc.src), " -> ", shape_str(pc.dst), " ", format_name(f));
      const Tensor src = random_tensor(pc.src, DType::F32, Device::cpu(), f, -1, 1);
      Tensor dst =
          random_tensor(pc.dst, DType::F32, Device::cpu(), f, 5, 6);  // poisoned: every element must be written
      ops::copy_padded(src, dst);
      const std::vector<double> s = src.to_doubles(), d = dst.to_doubles();
      const int64_t C = pc.dst[1], HW = pc.dst[2] * pc.dst[3], sC = pc.src[1];
      bool ok = true;
      for (int64_t i = 0; i < static_cast<int64_t>(d.size()); ++i) {
        const int64_t n = i / (C * HW), c = i / HW % C, hw = i % HW;
        const double want = n < pc.src[0] && c < sC ? s[static_cast<size_t>((n * sC + c) * HW + hw)] : 0.0;
        ok = ok && d[static_cast<size_t>(i)] == want;
      }
      CHECK(ok);
    }
}

TEST_CASE("copy_padded: mismatched arguments are errors") {
  Tensor a = Tensor::zeros({2, 3, 4, 4}, DType::F32), b = Tensor::zeros({2, 8, 4, 5}, DType::F32);
  CHECK_THROWS_WITH_AS(ops::copy_padded(a, b), doctest::Contains("differ only in their first two sizes"), Error);
  Tensor h = Tensor::zeros({2, 8, 4, 4}, DType::F16);
  CHECK_THROWS_AS(ops::copy_padded(a, h), Error);
}

TEST_CASE("gpu copy_padded: bitwise the CPU result in every dtype and layout") {
  GE_REQUIRE_GPU();
  for (const PadCase& pc : kCases)
    for (DType dt : {DType::F32, DType::F16, DType::BF16})
      for (MemoryFormat f : {MemoryFormat::NCHW, MemoryFormat::NHWC}) {
        INFO(shape_str(pc.src), " -> ", shape_str(pc.dst), " ", dtype_name(dt), " ", format_name(f));
        const Tensor src = random_tensor(pc.src, dt, Device::cpu(), f, -1, 1);
        Tensor want = Tensor::empty(pc.dst, dt, Device::cpu(), f);
        ops::copy_padded(src, want);
        Tensor got = random_tensor(pc.dst, dt, Device::cpu(), f, 5, 6).to(Device::cuda(0));
        ops::copy_padded(src.to(Device::cuda(0)), got);
        const Tensor host = got.to(Device::cpu());
        CHECK(std::memcmp(host.data(), want.data(), want.nbytes()) == 0);
      }
}

// The DCGAN layers whose channel counts are not multiples of 8, on the GPU (where Conv2d pads
// them) against the same layer on the CPU (which does not), in f16.
TEST_CASE("gpu conv2d layer: zero-padded channels give the unpadded results") {
  GE_REQUIRE_GPU();
  struct LayerCase {
    int64_t in, out;
    int kernel, stride, pad;
    bool transposed;
    int64_t hw;  // input side
  };
  const PrecisionPolicy policy = resolve_policy(OptLevel::O3);
  // Then D's first and G's last layers' shapes, whose weights keep the image's channels
  // (the 8-channel kernels read them as their zero-padded copies).
  for (const LayerCase& lc : {LayerCase{3, 16, 4, 2, 1, false, 16}, LayerCase{16, 3, 4, 2, 1, true, 8},
                              LayerCase{100, 32, 4, 1, 0, true, 1}, LayerCase{32, 1, 4, 1, 0, false, 4},
                              LayerCase{3, 64, 4, 2, 1, false, 16}, LayerCase{64, 3, 4, 2, 1, true, 8}}) {
    INFO("in ", lc.in, " out ", lc.out, lc.transposed ? " transposed" : "");
    const nn::Placement gpu_place = nn::Placement::for_device(Device::cuda(0), DType::F16);
    const nn::Placement cpu_place = nn::Placement::for_device(Device::cpu(), DType::F16);
    nn::Conv2d gpu(lc.in, lc.out, lc.kernel, lc.stride, lc.pad, lc.transposed, policy, gpu_place);
    nn::Conv2d cpu(lc.in, lc.out, lc.kernel, lc.stride, lc.pad, lc.transposed, policy, cpu_place);
    const Tensor w =
        random_tensor(cpu.weight().value.shape(), DType::F32, Device::cpu(), MemoryFormat::NCHW, -0.2, 0.2);
    nn::assign_param(gpu.weight(), w);
    nn::assign_param(cpu.weight(), w);
    const Tensor x = random_tensor({4, lc.in, lc.hw, lc.hw}, DType::F16, Device::cpu());
    const Tensor yc = cpu.forward(x, true), yg = gpu.forward(x.to(Device::cuda(0)), true);
    REQUIRE(yg.shape() == yc.shape());
    CHECK(rel_error(yg.to_doubles(), yc.to_doubles()) < 2e-3);
    const Tensor dy = random_tensor(yc.shape(), DType::F16, Device::cpu());
    const Tensor dxc = cpu.backward(dy, true, true), dxg = gpu.backward(dy.to(Device::cuda(0)), true, true);
    REQUIRE(dxg.shape() == dxc.shape());
    CHECK(rel_error(dxg.to_doubles(), dxc.to_doubles()) < 2e-3);
    CHECK(rel_error(gpu.weight().model_grad.to_doubles(), cpu.weight().model_grad.to_doubles()) < 2e-3);
  }
}

}  // namespace copy_padded_checks

// ---------------------------------------------------------------------------------- narrow channels

namespace narrow_channel_checks {

using namespace ge::test::gpu_ref;

// The forward (and so the transposed convolution's backward-data) reads a 1- or 3-channel x as
// 4-channel pixels (a reduction of 64 instead of 128, conv_8ch.cu): the same products, summed in
// another order, so close rather than bitwise. The backward-filters read it so too, but sum each
// dw value over the same pixels in the same order as from the padded copy: bitwise.
TEST_CASE("gpu ops: an x with 1 or 3 of w's 8 channels gives what its zero-padded copy gives") {
  GE_REQUIRE_GPU();
  using ge::ops::Activation;
  struct Case {
    ConvCase shape;  // c: the channels x holds; w has 8
    DType dt;
    MemoryFormat f;
  };
  // The 8-channel kernels' shapes (D's first layer at batch 64 and 2, a 256-wide row), then
  // shapes they do not take, where the GPU backend pads x itself.
  const Case cases[] = {
      {{64, 3, 64, 64, 64, 4, 4, 2, 1}, DType::F16, MemoryFormat::NHWC},
      {{2, 1, 16, 16, 128, 4, 4, 2, 1}, DType::BF16, MemoryFormat::NHWC},
      {{1, 3, 8, 256, 64, 4, 4, 2, 1}, DType::F16, MemoryFormat::NHWC},
      {{2, 3, 9, 7, 16, 3, 3, 1, 1}, DType::F16, MemoryFormat::NHWC},
      {{2, 3, 16, 16, 64, 4, 4, 2, 1}, DType::F32, MemoryFormat::NCHW},
  };
  for (const Case& c : cases) {
    const ConvCase& cc = c.shape;
    CAPTURE(tag(c.dt, c.f));
    CAPTURE(cc.n);
    CAPTURE(cc.c);
    CAPTURE(cc.w);
    const ge::Conv2dParams p{cc.stride, cc.pad};
    const Tensor x = gpu(random_cpu({cc.n, cc.c, cc.h, cc.w}, c.dt, c.f));
    Tensor xp = Tensor::empty({cc.n, 8, cc.h, cc.w}, c.dt, kGpu, c.f);
    ge::ops::copy_padded(x, xp);
    const Tensor w = gpu(random_cpu({cc.k, 8, cc.r, cc.s}, c.dt, c.f));
    const Tensor dy = gpu(random_cpu(cc.y_shape(), c.dt, c.f));
    const ge::ops::FusedActivation act{Activation::LeakyReLU, 0.2f};

    Tensor y = poisoned_gpu(dy), yp = poisoned_gpu(dy), y_ref = zeros_cpu(dy.shape(), c.dt, c.f);
    ge::ops::conv2d_forward(x.to(kCpu), w.to(kCpu), y_ref, p);
    ge::ops::conv2d_forward(x, w, y, p);
    ge::ops::conv2d_forward(xp, w, yp, p);
    expect_close("conv2d_forward", y, y_ref);
    expect_close("conv2d_forward, padded x", yp, y_ref);
    ge::ops::conv2d_activation_forward(x, w, y, p, act);
    ge::ops::conv2d_activation_forward(xp, w, yp, p, act);
    expect_close("conv2d_activation_forward", y, yp.to(kCpu));
    for (const float beta : {0.f, 1.f}) {
      CAPTURE(beta);
      const Tensor dw0 = gpu(random_cpu(w.shape(), c.dt, c.f));
      Tensor dw = dw0.clone(), dwp = dw0.clone();
      ge::ops::conv2d_backward_filter(x, dy, dw, p, beta);
      ge::ops::conv2d_backward_filter(xp, dy, dwp, p, beta);
      expect_identical("conv2d_backward_filter", dw, dwp.to(kCpu));
      dw = dw0.clone();
      dwp = dw0.clone();
      ge::ops::conv2d_activation_backward_filter(x, y, dy, dw, p, act, beta);
      ge::ops::conv2d_activation_backward_filter(xp, y, dy, dwp, p, act, beta);
      expect_identical("conv2d_activation_backward_filter", dw, dwp.to(kCpu));
    }
    // G's last layer: the transposed convolution's output gradient is the narrow side of both of
    // its backward passes (weight (Cin = k, Cout = 8, r, s)).
    Tensor dx = poisoned_gpu(dy), dxp = poisoned_gpu(dy);
    ge::ops::conv_transpose2d_backward_data(x, w, dx, p);
    ge::ops::conv_transpose2d_backward_data(xp, w, dxp, p);
    expect_close("conv_transpose2d_backward_data", dx, dxp.to(kCpu));
    Tensor dwt = poisoned_gpu(w), dwtp = poisoned_gpu(w);
    ge::ops::conv_transpose2d_backward_filter(dy, x, dwt, p, 0.f);
    ge::ops::conv_transpose2d_backward_filter(dy, xp, dwtp, p, 0.f);
    expect_identical("conv_transpose2d_backward_filter", dwt, dwtp.to(kCpu));
  }
}

// The layers keep D's first and G's last weights with the image's channels (Conv2d); the 8-channel
// kernels read such a w (and write such a dw) as its zero-padded copy: bitwise the same results
// in every pass they run, fused activations included.
TEST_CASE("gpu ops: a w with x's 1 or 3 channels gives bitwise what its zero-padded copy gives") {
  GE_REQUIRE_GPU();
  using ge::ops::Activation;
  struct Case {
    ConvCase shape;  // c: the channels x and w hold
    DType dt;
  };
  const Case cases[] = {{{64, 3, 64, 64, 64, 4, 4, 2, 1}, DType::F16},
                        {{2, 1, 16, 16, 128, 4, 4, 2, 1}, DType::BF16},
                        {{1, 3, 8, 256, 64, 4, 4, 2, 1}, DType::F16}};
  const MemoryFormat f = MemoryFormat::NHWC;
  for (const Case& c : cases) {
    const ConvCase& cc = c.shape;
    CAPTURE(tag(c.dt, f));
    CAPTURE(cc.n);
    CAPTURE(cc.c);
    CAPTURE(cc.w);
    const ge::Conv2dParams p{cc.stride, cc.pad};
    const ge::ops::FusedActivation leaky{Activation::LeakyReLU, 0.2f}, tanh_act{Activation::Tanh, 0.f};
    const Tensor x = gpu(random_cpu({cc.n, cc.c, cc.h, cc.w}, c.dt, f));
    const Tensor w = gpu(random_cpu({cc.k, cc.c, cc.r, cc.s}, c.dt, f));
    Tensor wp = Tensor::empty({cc.k, 8, cc.r, cc.s}, c.dt, kGpu, f);
    ge::ops::copy_padded(w, wp);
    const Tensor dy = gpu(random_cpu(cc.y_shape(), c.dt, f));
    auto first_channels = [&](const Tensor& padded_w) {
      Tensor t = Tensor::empty(w.shape(), c.dt, kGpu, f);
      ge::ops::copy_padded(padded_w, t);
      return t.to(kCpu);
    };

    // D's first layer: forward with LeakyReLU, its filter gradient, its input gradient (G's pass
    // through D, with Tanh's gradient on the way out).
    Tensor y = poisoned_gpu(dy), yp = poisoned_gpu(dy);
    ge::ops::conv2d_activation_forward(x, w, y, p, leaky);
    ge::ops::conv2d_activation_forward(x, wp, yp, p, leaky);
    expect_identical("conv2d_activation_forward", y, yp.to(kCpu));
    for (const float beta : {0.f, 1.f}) {
      CAPTURE(beta);
      Tensor dwp = gpu(random_cpu(wp.shape(), c.dt, f));
      Tensor dw = gpu(first_channels(dwp));
      ge::ops::conv2d_activation_backward_filter(x, y, dy, dw, p, leaky, beta);
      ge::ops::conv2d_activation_backward_filter(x, y, dy, dwp, p, leaky, beta);
      expect_identical("conv2d_activation_backward_filter", dw, first_channels(dwp));
    }
    const Tensor x_act = gpu(random_cpu(x.shape(), c.dt, f, -1.0, 1.0));
    const ge::ops::InputActivation through{tanh_act, x_act};
    Tensor dx = poisoned_gpu(x), dxp = poisoned_gpu(x);
    ge::ops::conv2d_activation_backward_data(y, dy, w, dx, p, leaky, &through);
    ge::ops::conv2d_activation_backward_data(y, dy, wp, dxp, p, leaky, &through);
    expect_identical("conv2d_activation_backward_data", dx, dxp.to(kCpu));

    // G's last layer (weight (Cin = k, Cout = c, r, s)): forward with Tanh, input and filter
    // gradients.
    Tensor img = poisoned_gpu(x), imgp = poisoned_gpu(x);
    ge::ops::conv_transpose2d_activation_forward(dy, w, img, p, tanh_act);
    ge::ops::conv_transpose2d_activation_forward(dy, wp, imgp, p, tanh_act);
    expect_identical("conv_transpose2d_activation_forward", img, imgp.to(kCpu));
    Tensor gin = poisoned_gpu(dy), ginp = poisoned_gpu(dy);
    ge::ops::conv_transpose2d_backward_data(x, w, gin, p);
    ge::ops::conv_transpose2d_backward_data(x, wp, ginp, p);
    expect_identical("conv_transpose2d_backward_data", gin, ginp.to(kCpu));
    Tensor dwt = poisoned_gpu(w), dwtp = poisoned_gpu(wp);
    ge::ops::conv_transpose2d_backward_filter(dy, x, dwt, p, 0.f);
    ge::ops::conv_transpose2d_backward_filter(dy, x, dwtp, p, 0.f);
    expect_identical("conv_transpose2d_backward_filter", dwt, first_channels(dwtp));
  }
}

TEST_CASE(
    "ops: on the CPU an x with fewer channels than w is its zero-padded copy - a narrower dx the first channels") {
  const Tensor xc = random_cpu({2, 3, 8, 8}, DType::F32), wc = random_cpu({4, 8, 3, 3}, DType::F32);
  Tensor xcp = zeros_cpu({2, 8, 8, 8}, DType::F32);
  ge::ops::copy_padded(xc, xcp);
  Tensor yc = zeros_cpu({2, 4, 8, 8}, DType::F32), ycp = zeros_cpu({2, 4, 8, 8}, DType::F32);
  ge::ops::conv2d_forward(xc, wc, yc, {1, 1});
  ge::ops::conv2d_forward(xcp, wc, ycp, {1, 1});
  CHECK(yc.to_doubles() == ycp.to_doubles());
  // backward-data into 3 of w's 8 channels: the full gradient's first 3.
  Tensor dx_full = zeros_cpu({2, 8, 8, 8}, DType::F32), dx_first = zeros_cpu({2, 3, 8, 8}, DType::F32);
  ge::ops::conv2d_backward_data(ycp, wc, dx_full, {1, 1});
  ge::ops::copy_padded(dx_full, dx_first);
  Tensor dxc = zeros_cpu({2, 3, 8, 8}, DType::F32);
  ge::ops::conv2d_backward_data(ycp, wc, dxc, {1, 1});
  CHECK(dxc.to_doubles() == dx_first.to_doubles());
  // More channels than w has is still refused.
  Tensor dx_wide = zeros_cpu({2, 9, 8, 8}, DType::F32);
  CHECK_THROWS_AS(ge::ops::conv2d_backward_data(ycp, wc, dx_wide, {1, 1}), ge::Error);
}

// The backward-data kernels write only dx's channels; elsewhere the GPU backend trims a
// full-width copy. Either way a narrower dx holds the full gradient's first channels: bitwise
// where one kernel runs both (conv_8ch_dgrad.cu computes all 8 channels alike: 128 channels of
// dy, a 256-wide row), within tolerance where the narrow kernel writes the narrower dx (the same
// products summed in another order, conv_8ch_dgrad_narrow.cu) or cuDNN runs (its algorithms need
// not be deterministic). G's last layer is the transposed form: its forward writes the 3 image
// channels.
TEST_CASE("gpu ops: backward-data into a dx with 1 or 3 of w's 8 channels gives the full gradient's first channels") {
  GE_REQUIRE_GPU();
  struct Case {
    ConvCase shape;  // c: the channels dx holds; w has 8
    DType dt;
    MemoryFormat f;
    bool one_kernel;  // the 8-channel backward-data kernel writes both widths
  };
  const Case cases[] = {
      {{64, 3, 64, 64, 64, 4, 4, 2, 1}, DType::F16, MemoryFormat::NHWC, false},
      {{2, 1, 32, 32, 128, 4, 4, 2, 1}, DType::BF16, MemoryFormat::NHWC, true},
      {{1, 3, 8, 256, 64, 4, 4, 2, 1}, DType::F16, MemoryFormat::NHWC, true},
      {{2, 1, 32, 32, 64, 4, 4, 2, 1}, DType::BF16, MemoryFormat::NHWC, false},
      {{2, 3, 9, 7, 16, 3, 3, 1, 1}, DType::F16, MemoryFormat::NHWC, false},
      {{2, 3, 16, 16, 32, 4, 4, 2, 1}, DType::F16, MemoryFormat::NHWC, false},
      {{2, 3, 16, 16, 64, 4, 4, 2, 1}, DType::F32, MemoryFormat::NCHW, false},
  };
  for (const Case& c : cases) {
    const ConvCase& cc = c.shape;
    CAPTURE(tag(c.dt, c.f));
    CAPTURE(cc.n);
    CAPTURE(cc.c);
    CAPTURE(cc.w);
    CAPTURE(cc.k);
    const ge::Conv2dParams p{cc.stride, cc.pad};
    const Tensor w = gpu(random_cpu({cc.k, 8, cc.r, cc.s}, c.dt, c.f));
    const Tensor dy = gpu(random_cpu(cc.y_shape(), c.dt, c.f));
    Tensor full = poisoned_gpu(zeros_cpu({cc.n, 8, cc.h, cc.w}, c.dt, c.f));
    ge::ops::conv2d_backward_data(dy, w, full, p);
    Tensor first = poisoned_gpu(zeros_cpu({cc.n, cc.c, cc.h, cc.w}, c.dt, c.f));
    ge::ops::copy_padded(full, first);
    const Tensor expected = first.to(kCpu);

    Tensor dx = poisoned_gpu(expected);
    ge::ops::conv2d_backward_data(dy, w, dx, p);
    Tensor y = poisoned_gpu(expected);
    ge::ops::conv_transpose2d_forward(dy, w, y, p);
    if (c.one_kernel) {
      expect_identical("conv2d_backward_data", dx, expected);
      expect_identical("conv_transpose2d_forward", y, expected);
    } else {
      expect_close("conv2d_backward_data", dx, expected);
      expect_close("conv_transpose2d_forward", y, expected);
    }
  }
}

}  // namespace narrow_channel_checks

}  // namespace
