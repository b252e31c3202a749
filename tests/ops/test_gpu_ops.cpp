// The CUDA backend against the CPU reference: every op, in f32, f16 and bf16, NCHW and NHWC,
// on fresh random inputs. Both backends read the same (already rounded) inputs; GPU outputs are
// poisoned with NaN first, so an element the GPU forgot to write fails the comparison. Results
// must agree within tolerance_for(dtype) relative to the reference's norm.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/half_bits.h"
#include "support/test_util.h"
#include "support/trainer_compare.h"

namespace {

using ge::Device;
using ge::DType;
using ge::MemoryFormat;
using ge::Shape;
using ge::Tensor;
using ge::ops::Activation;
using Values = std::vector<double>;

constexpr DType kDTypes[] = {DType::F32, DType::F16, DType::BF16};
constexpr MemoryFormat kFormats[] = {MemoryFormat::NCHW, MemoryFormat::NHWC};
const Device kGpu = Device::cuda(0);
const Device kCpu = Device::cpu();

Tensor random_cpu(const Shape& s, DType dt, MemoryFormat f = MemoryFormat::NCHW, double lo = -1.0, double hi = 1.0) {
  return ge::test::random_tensor(s, dt, kCpu, s.size() == 4 ? f : MemoryFormat::NCHW, lo, hi);
}

Tensor zeros_cpu(const Shape& s, DType dt, MemoryFormat f = MemoryFormat::NCHW) {
  return Tensor::zeros(s, dt, kCpu, s.size() == 4 ? f : MemoryFormat::NCHW);
}

Tensor values_cpu(const Values& v, const Shape& s, DType dt = DType::F32) {
  return Tensor::from_doubles(v, s, dt, kCpu);
}

Tensor gpu(const Tensor& cpu) { return cpu.to(kGpu); }

// An output buffer on the GPU, shaped like the reference's, full of NaN.
Tensor poisoned_gpu(const Tensor& like) { return ge::test::poisoned_like(like, kGpu); }

void expect_close(const std::string& what, const Tensor& gpu_out, const Tensor& cpu_ref, double tol) {
  const double err = ge::test::rel_error(gpu_out.to(kCpu), cpu_ref);
  INFO(what, ": ", gpu_out.str(), " relative error ", err, " vs tolerance ", tol);
  CHECK(err <= tol);
}

void expect_close(const std::string& what, const Tensor& gpu_out, const Tensor& cpu_ref) {
  expect_close(what, gpu_out, cpu_ref, ge::test::tolerance_for(cpu_ref.dtype()));
}

void expect_identical(const std::string& what, const Tensor& gpu_out, const Tensor& cpu_ref) {
  INFO(what, ": ", gpu_out.str());
  CHECK(gpu_out.to(kCpu).to_doubles() == cpu_ref.to_doubles());
}

std::string tag(DType dt, MemoryFormat f) { return std::string(ge::dtype_name(dt)) + " " + ge::format_name(f); }

// ---------------------------------------------------------------------------- convolution

struct ConvCase {
  int64_t n, c, h, w, k, r, s;
  int stride, pad;
  // The output's (and so dy's) shape: (n, k, P, Q).
  Shape y_shape() const {
    return {n, k, ge::conv_out_size(h, r, stride, pad), ge::conv_out_size(w, s, stride, pad)};
  }
};

// Conv cases: DCGAN's first D layer (3->8 at 64x64, 4x4 stride 2 pad 1), an inner stride-2
// layer, D's last layer (4x4 valid to 1x1), and odd shapes with a 3x3 and a non-square kernel.
// Then the shapes of the hand-written 8-channel kernels (conv_8ch.cu forward and
// conv_8ch_wgrad.cu backward-filter, half NHWC only): D's first
// layer as the engine runs it (image channels padded to 8, 64x64 -> 32x32x64; tiles of two
// output rows), tiles of eight rows with two groups of 64 output channels, 64-wide segments of
// 128-pixel rows, and whole rows of 64 from an odd input height. The backward-data kernel
// (conv_8ch_dgrad.cu) takes the first and the 256-wide row (32-wide segments), and two more:
// 128 output channels in tiles of 8 rows of 16, and tiles of 16 rows of 8. Last, D's last layer
// at its real width with more images than the hand-written dot-product kernels' 32 slices
// (conv_scalar.cu, half precision; the 32-channel case above takes them too). Last, the 8-channel
// kernels with x and w both holding an image's 3 or 1 channels (as the layers keep D's first
// and G's last weights), and the backward-data kernel for such a dx (conv_8ch_dgrad_narrow.cu)
// in blocks of ten dy rows of 16 (the last block short) and of one row of 64.
const ConvCase kConvCases[] = {
    {3, 3, 64, 64, 8, 4, 4, 2, 1},    {2, 16, 8, 8, 32, 4, 4, 2, 1},   {3, 32, 4, 4, 1, 4, 4, 1, 0},
    {2, 5, 9, 7, 6, 3, 3, 1, 1},      {1, 4, 6, 11, 3, 2, 3, 3, 1},    {3, 8, 64, 64, 64, 4, 4, 2, 1},
    {2, 8, 16, 16, 128, 4, 4, 2, 1},  {1, 8, 8, 256, 64, 4, 4, 2, 1},  {1, 8, 9, 128, 64, 4, 4, 2, 1},
    {2, 8, 32, 32, 128, 4, 4, 2, 1},  {2, 8, 32, 16, 64, 4, 4, 2, 1},  {70, 512, 4, 4, 1, 4, 4, 1, 0},
    {2, 3, 64, 64, 64, 4, 4, 2, 1},   {2, 1, 32, 32, 128, 4, 4, 2, 1}, {2, 1, 32, 32, 64, 4, 4, 2, 1},
    {1, 3, 128, 128, 64, 4, 4, 2, 1},
};

// Runs the three conv2d passes (and backward-filter accumulation) on both backends.
void check_conv2d(const ConvCase& cc, DType dt, MemoryFormat f, bool allow_tf32 = false) {
  const ge::Conv2dParams p{cc.stride, cc.pad, allow_tf32};
  const double tol = allow_tf32 ? 2e-3 : ge::test::tolerance_for(dt);
  const Tensor x = random_cpu({cc.n, cc.c, cc.h, cc.w}, dt, f);
  const Tensor w = random_cpu({cc.k, cc.c, cc.r, cc.s}, dt, f);
  const Tensor dy = random_cpu(cc.y_shape(), dt, f);

  Tensor y = zeros_cpu(dy.shape(), dt, f);
  ge::ops::conv2d_forward(x, w, y, p);
  for (int run = 0; run < 2; ++run) {  // the second run takes the cached plan
    CAPTURE(run);
    Tensor yg = poisoned_gpu(y);
    ge::ops::conv2d_forward(gpu(x), gpu(w), yg, p);
    expect_close("conv2d_forward", yg, y, tol);
  }

  Tensor dx = zeros_cpu(x.shape(), dt, f);
  ge::ops::conv2d_backward_data(dy, w, dx, p);
  Tensor dxg = poisoned_gpu(dx);
  ge::ops::conv2d_backward_data(gpu(dy), gpu(w), dxg, p);
  expect_close("conv2d_backward_data", dxg, dx, tol);

  Tensor dw = zeros_cpu(w.shape(), dt, f);
  ge::ops::conv2d_backward_filter(x, dy, dw, p, 0.f);
  Tensor dwg = poisoned_gpu(dw);
  ge::ops::conv2d_backward_filter(gpu(x), gpu(dy), dwg, p, 0.f);
  expect_close("conv2d_backward_filter beta=0", dwg, dw, tol);

  // beta = 1: accumulate onto an existing gradient (the same starting values on both sides).
  const Tensor dw0 = random_cpu(w.shape(), dt, f);
  Tensor dw_acc = dw0.clone();
  ge::ops::conv2d_backward_filter(x, dy, dw_acc, p, 1.f);
  Tensor dwg_acc = gpu(dw0);
  ge::ops::conv2d_backward_filter(gpu(x), gpu(dy), dwg_acc, p, 1.f);
  expect_close("conv2d_backward_filter beta=1", dwg_acc, dw_acc, tol);
}

TEST_CASE("gpu ops: conv2d forward backward-data backward-filter (beta 0 and 1) match the CPU") {
  GE_REQUIRE_GPU();
  for (DType dt : kDTypes)
    for (MemoryFormat f : kFormats)
      for (const ConvCase& cc : kConvCases) {
        CAPTURE(tag(dt, f));
        CAPTURE(cc.n);
        CAPTURE(cc.c);
        CAPTURE(cc.h);
        CAPTURE(cc.k);
        CAPTURE(cc.r);
        CAPTURE(cc.stride);
        check_conv2d(cc, dt, f);
      }
}

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
          expect_identical("conv2d_activation_backward_filter vs activation_backward + conv2d_backward_filter",
                           dwg, two_ops);
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

TEST_CASE("ops: on the CPU an x with fewer channels than w is its zero-padded copy - a narrower dx the first channels") {
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

TEST_CASE("gpu ops: conv2d in f32 with allow_tf32 stays within TF32 accuracy") {
  GE_REQUIRE_GPU();
  for (MemoryFormat f : kFormats) {
    CAPTURE(ge::format_name(f));
    check_conv2d(kConvCases[1], DType::F32, f, /*allow_tf32=*/true);
    check_conv2d(kConvCases[1], DType::F32, f, /*allow_tf32=*/false);  // a separate cached plan
  }
}

struct ConvTransposeCase {
  int64_t n, cin, h, w, cout, r, s;
  int stride, pad;
};

// G's first layer (nz=100 -> 32 at 1x1 -> 4x4; in half precision its forward and weight
// gradient are GEMMs, conv_gemm.cpp, which read the noise's rows of 100 values as they are),
// with nz padded to 104 (64 output channels), and unpadded at batch 256; an inner layer
// (16 -> 8, 8x8 -> 16x16), and an odd one; G's last layer into 3 channels at 64x64 and into 1
// at 32x32 (half precision: conv_8ch_dgrad_narrow.cu).
const ConvTransposeCase kConvTransposeCases[] = {{3, 100, 1, 1, 32, 4, 4, 1, 0},   {64, 104, 1, 1, 64, 4, 4, 1, 0},
                                                 {256, 100, 1, 1, 16, 4, 4, 1, 0}, {2, 16, 8, 8, 8, 4, 4, 2, 1},
                                                 {2, 5, 5, 3, 3, 3, 3, 2, 1},      {2, 64, 32, 32, 3, 4, 4, 2, 1},
                                                 {3, 64, 16, 16, 1, 4, 4, 2, 1}};

TEST_CASE("gpu ops: conv_transpose2d passes (DCGAN generator shapes) match the CPU") {
  GE_REQUIRE_GPU();
  for (DType dt : kDTypes)
    for (MemoryFormat f : kFormats)
      for (const ConvTransposeCase& cc : kConvTransposeCases) {
        CAPTURE(tag(dt, f));
        CAPTURE(cc.cin);
        CAPTURE(cc.h);
        CAPTURE(cc.cout);
        const ge::Conv2dParams p{cc.stride, cc.pad};
        const int64_t Ho = ge::conv_transpose_out_size(cc.h, cc.r, cc.stride, cc.pad);
        const int64_t Wo = ge::conv_transpose_out_size(cc.w, cc.s, cc.stride, cc.pad);
        const Tensor x = random_cpu({cc.n, cc.cin, cc.h, cc.w}, dt, f);
        const Tensor w = random_cpu({cc.cin, cc.cout, cc.r, cc.s}, dt, f);
        const Tensor dy = random_cpu({cc.n, cc.cout, Ho, Wo}, dt, f);

        Tensor y = zeros_cpu(dy.shape(), dt, f);
        ge::ops::conv_transpose2d_forward(x, w, y, p);
        Tensor yg = poisoned_gpu(y);
        ge::ops::conv_transpose2d_forward(gpu(x), gpu(w), yg, p);
        expect_close("conv_transpose2d_forward", yg, y);

        Tensor dx = zeros_cpu(x.shape(), dt, f);
        ge::ops::conv_transpose2d_backward_data(dy, w, dx, p);
        Tensor dxg = poisoned_gpu(dx);
        ge::ops::conv_transpose2d_backward_data(gpu(dy), gpu(w), dxg, p);
        expect_close("conv_transpose2d_backward_data", dxg, dx);

        Tensor dw = zeros_cpu(w.shape(), dt, f);
        ge::ops::conv_transpose2d_backward_filter(x, dy, dw, p, 0.f);
        Tensor dwg = poisoned_gpu(dw);
        ge::ops::conv_transpose2d_backward_filter(gpu(x), gpu(dy), dwg, p, 0.f);
        expect_close("conv_transpose2d_backward_filter beta=0", dwg, dw);

        const Tensor dw0 = random_cpu(w.shape(), dt, f);
        Tensor dw_acc = dw0.clone();
        ge::ops::conv_transpose2d_backward_filter(x, dy, dw_acc, p, 1.f);
        Tensor dwg_acc = gpu(dw0);
        ge::ops::conv_transpose2d_backward_filter(gpu(x), gpu(dy), dwg_acc, p, 1.f);
        expect_close("conv_transpose2d_backward_filter beta=1", dwg_acc, dw_acc);
      }
}

// ------------------------------------------------------------------------------ batchnorm

// (5,16,8,8) is a plain case; (3,7,5,3) has odd sizes; (16,8,32,32) is big enough to be
// cut into several partial sums per channel (64); (64,40,4,4) has more channels than one NHWC
// tile; (37,128,16,16) two 64-channel tiles of 37 partial sums; (8,64,64,64) 128 partial sums
// and (150,64,16,16) 150: the merge takes four partials at a time, then the rest one by one.
const Shape kBatchNormShapes[] = {{5, 16, 8, 8},   {3, 7, 5, 3},      {16, 8, 32, 32}, {64, 40, 4, 4},
                                  {37, 128, 16, 16}, {8, 64, 64, 64}, {150, 64, 16, 16}};

TEST_CASE("gpu ops: batchnorm training/eval forward and backward match the CPU") {
  GE_REQUIRE_GPU();
  for (DType dt : kDTypes)
    for (MemoryFormat f : kFormats)
      for (const Shape& s : kBatchNormShapes)
        for (DType pdt : dt == DType::F32 ? std::vector<DType>{DType::F32}
                                          : std::vector<DType>{DType::F32, dt}) {  // O1/O2 or O3 params
          CAPTURE(tag(dt, f));
          CAPTURE(ge::dtype_name(pdt));
          CAPTURE(ge::shape_str(s));
          const Shape cs{s[1]};
          // An offset mean checks that the variance does not cancel.
          const Tensor x = random_cpu(s, dt, f, -1.0, 3.0);
          const Tensor gamma = random_cpu(cs, pdt, f, 0.5, 1.5);
          const Tensor beta = random_cpu(cs, pdt, f);
          const Tensor rm0 = random_cpu(cs, pdt, f);
          const Tensor rv0 = random_cpu(cs, pdt, f, 0.5, 2.0);
          const float momentum = 0.1f, eps = 1e-5f;

          // training forward
          Tensor rm = rm0.clone(), rv = rv0.clone();
          Tensor y = zeros_cpu(s, dt, f), mean = zeros_cpu(cs, DType::F32), invstd = zeros_cpu(cs, DType::F32);
          ge::ops::batchnorm_forward_train(x, gamma, beta, rm, rv, momentum, eps, y, mean, invstd);
          Tensor rmg = gpu(rm0), rvg = gpu(rv0);
          Tensor yg = poisoned_gpu(y), meang = poisoned_gpu(mean), invstdg = poisoned_gpu(invstd);
          ge::ops::batchnorm_forward_train(gpu(x), gpu(gamma), gpu(beta), rmg, rvg, momentum, eps, yg, meang,
                                           invstdg);
          expect_close("bn train y", yg, y);
          expect_close("bn save_mean", meang, mean, 1e-5);
          expect_close("bn save_invstd", invstdg, invstd, 1e-5);
          expect_close("bn running_mean", rmg, rm);
          expect_close("bn running_var", rvg, rv);
          {
            // The same bits again: every sum is taken in a fixed order (no atomics).
            Tensor rm2 = gpu(rm0), rv2 = gpu(rv0);
            Tensor y2 = poisoned_gpu(y), mean2 = poisoned_gpu(mean), invstd2 = poisoned_gpu(invstd);
            ge::ops::batchnorm_forward_train(gpu(x), gpu(gamma), gpu(beta), rm2, rv2, momentum, eps, y2, mean2,
                                             invstd2);
            expect_identical("bn train y, second run", y2, yg);
            expect_identical("bn save_mean, second run", mean2, meang);
            expect_identical("bn save_invstd, second run", invstd2, invstdg);
            expect_identical("bn running_var, second run", rv2, rvg);
          }

          // eval forward with the updated running statistics
          Tensor ye = zeros_cpu(s, dt, f);
          ge::ops::batchnorm_forward_eval(x, gamma, beta, rm, rv, eps, ye);
          Tensor yeg = poisoned_gpu(ye);
          ge::ops::batchnorm_forward_eval(gpu(x), gpu(gamma), gpu(beta), gpu(rm), gpu(rv), eps, yeg);
          expect_close("bn eval y", yeg, ye);

          // backward from the reference's saved statistics
          const Tensor dy = random_cpu(s, dt, f);
          Tensor dx = zeros_cpu(s, dt, f), dgamma = zeros_cpu(cs, pdt), dbeta = zeros_cpu(cs, pdt);
          ge::ops::batchnorm_backward(x, dy, gamma, mean, invstd, dx, dgamma, dbeta);
          Tensor dxg = poisoned_gpu(dx), dgammag = poisoned_gpu(dgamma), dbetag = poisoned_gpu(dbeta);
          ge::ops::batchnorm_backward(gpu(x), gpu(dy), gpu(gamma), gpu(mean), gpu(invstd), dxg, dgammag, dbetag);
          // dx cancels (dy minus its mean minus its projection on xhat): allow twice the rounding.
          expect_close("bn dx", dxg, dx, 2 * ge::test::tolerance_for(dt));
          expect_close("bn dgamma", dgammag, dgamma);
          expect_close("bn dbeta", dbetag, dbeta);
          {
            Tensor dx2 = poisoned_gpu(dx), dgamma2 = poisoned_gpu(dgamma), dbeta2 = poisoned_gpu(dbeta);
            ge::ops::batchnorm_backward(gpu(x), gpu(dy), gpu(gamma), gpu(mean), gpu(invstd), dx2, dgamma2, dbeta2);
            expect_identical("bn dx, second run", dx2, dxg);
            expect_identical("bn dgamma, second run", dgamma2, dgammag);
            expect_identical("bn dbeta, second run", dbeta2, dbetag);
          }

          // dx written over dy (in place), as a fused backward may do
          Tensor dyg = gpu(dy);
          ge::ops::batchnorm_backward(gpu(x), dyg, gpu(gamma), gpu(mean), gpu(invstd), dyg, dgammag, dbetag);
          expect_close("bn dx in place", dyg, dx, 2 * ge::test::tolerance_for(dt));
        }
}

TEST_CASE("gpu ops: batchnorm running statistics skip a channel whose batch is not finite") {
  GE_REQUIRE_GPU();
  for (DType dt : kDTypes)
    for (MemoryFormat f : kFormats) {
      CAPTURE(tag(dt, f));
      const Shape s{4, 3, 5, 5}, cs{3};
      Values xv = random_cpu(s, DType::F32).to_doubles();
      xv[1 * 25 + 7] = std::numeric_limits<double>::infinity();  // sample 0, channel 1
      const Tensor x = Tensor::from_doubles(xv, s, dt, kCpu, f);
      const Tensor gamma = random_cpu(cs, DType::F32, f, 0.5, 1.5), beta = random_cpu(cs, DType::F32);
      const Tensor rm0 = values_cpu({0.1, 0.2, 0.3}, cs), rv0 = values_cpu({1.0, 2.0, 3.0}, cs);
      Tensor rm = rm0.clone(), rv = rv0.clone();
      Tensor y = zeros_cpu(s, dt, f), mean = zeros_cpu(cs, DType::F32), invstd = zeros_cpu(cs, DType::F32);
      ge::ops::batchnorm_forward_train(x, gamma, beta, rm, rv, 0.1f, 1e-5f, y, mean, invstd);
      Tensor rmg = gpu(rm0), rvg = gpu(rv0);
      Tensor yg = poisoned_gpu(y), meang = poisoned_gpu(mean), invstdg = poisoned_gpu(invstd);
      ge::ops::batchnorm_forward_train(gpu(x), gpu(gamma), gpu(beta), rmg, rvg, 0.1f, 1e-5f, yg, meang, invstdg);
      const Values rmv = rmg.to(kCpu).to_doubles(), rvv = rvg.to(kCpu).to_doubles();
      CHECK(rmv[1] == static_cast<double>(0.2f));  // untouched
      CHECK(rvv[1] == 2.0);
      CHECK(rmv[0] != static_cast<double>(0.1f));  // the finite channels did update
      expect_close("running_mean", rmg, rm);
      expect_close("running_var", rvg, rv);
    }
}

// ----------------------------------------------------------------------------- activations

TEST_CASE("gpu ops: ReLU LeakyReLU Tanh forward and backward (from the output) match the CPU") {
  GE_REQUIRE_GPU();
  const Shape shapes[] = {{3, 8, 16, 16}, {5, 3, 7, 9}};
  for (Activation a : {Activation::ReLU, Activation::LeakyReLU, Activation::Tanh})
    for (DType dt : kDTypes)
      for (MemoryFormat f : kFormats)
        for (const Shape& s : shapes) {
          CAPTURE(ge::ops::activation_name(a));
          CAPTURE(tag(dt, f));
          CAPTURE(ge::shape_str(s));
          const Tensor x = random_cpu(s, dt, f, -3.0, 3.0);
          Tensor y = zeros_cpu(s, dt, f);
          ge::ops::activation_forward(a, x, y, 0.2f);
          Tensor yg = poisoned_gpu(y);
          ge::ops::activation_forward(a, gpu(x), yg, 0.2f);
          expect_close("forward", yg, y);
          Tensor xg = gpu(x);  // in place, as ReLU(True)
          ge::ops::activation_forward(a, xg, xg, 0.2f);
          expect_close("forward in place", xg, y);

          const Tensor dy = random_cpu(s, dt, f);
          Tensor dx = zeros_cpu(s, dt, f);
          ge::ops::activation_backward(a, y, dy, dx, 0.2f);
          Tensor dxg = poisoned_gpu(dx);
          ge::ops::activation_backward(a, gpu(y), gpu(dy), dxg, 0.2f);
          expect_close("backward", dxg, dx);
          Tensor dyg = gpu(dy);
          ge::ops::activation_backward(a, gpu(y), dyg, dyg, 0.2f);
          expect_close("backward in place", dyg, dx);
        }
}

// LeakyReLU's backward on 16-bit values picks dy or dy * slope by a mask made from y's halves
// (activation_math.cuh's leaky_relu_grad_pair): every pair of special values (infinities, the
// largest finite values, subnormals, signed zeros, NaN) in y and dy, against the CPU's op.
TEST_CASE("gpu ops: LeakyReLU's 16-bit backward gives the CPU's values for every pair of special values") {
  GE_REQUIRE_GPU();
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (const DType dt : {DType::F16, DType::BF16}) {
    const double big = dt == DType::F16 ? 65504.0 : 3.3e38, tiny = dt == DType::F16 ? 6e-8 : 1e-39;
    const Values special{-inf, -big, -1.5, -tiny, -0.0, 0.0, tiny, 1.5, big, inf, nan};
    Values y, dy;
    for (int copy = 0; copy < 8; ++copy)  // whole 8-value packs
      for (const double a : special)
        for (const double b : special) {
          y.push_back(a);
          dy.push_back(b);
        }
    const Shape shape{8, 1, 11, 11};
    for (const float slope : {0.2f, 1.f, 0.f}) {
      CAPTURE(tag(dt, MemoryFormat::NCHW));
      CAPTURE(slope);
      const Tensor yc = values_cpu(y, shape, dt), dyc = values_cpu(dy, shape, dt);
      Tensor dx = zeros_cpu(shape, dt);
      ge::ops::activation_backward(Activation::LeakyReLU, yc, dyc, dx, slope);
      Tensor dxg = poisoned_gpu(dx);
      ge::ops::activation_backward(Activation::LeakyReLU, gpu(yc), gpu(dyc), dxg, slope);
      const Values want = dx.to_doubles(), got = dxg.to(kCpu).to_doubles();
      size_t differ = 0;
      for (size_t i = 0; i < want.size(); ++i)
        differ += std::isnan(want[i]) ? !std::isnan(got[i])
                                      : !(got[i] == want[i] && std::signbit(got[i]) == std::signbit(want[i]));
      CHECK(differ == 0);
    }
  }
}

TEST_CASE("gpu ops: ReLU and LeakyReLU propagate NaN like the CPU") {
  GE_REQUIRE_GPU();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = values_cpu({-1.0, nan, 2.0}, {3});
  for (Activation a : {Activation::ReLU, Activation::LeakyReLU}) {
    CAPTURE(ge::ops::activation_name(a));
    Tensor yg = poisoned_gpu(x);
    ge::ops::activation_forward(a, gpu(x), yg, 0.2f);
    const Values y = yg.to(kCpu).to_doubles();
    CHECK(y[0] == doctest::Approx(a == Activation::ReLU ? 0.0 : -0.2));
    CHECK(std::isnan(y[1]));
    CHECK(y[2] == 2.0);
  }
}

// ------------------------------------------------------------------------------------ BCE

TEST_CASE("gpu ops: BCE with logits forward (loss mean sigmoid) and scaled backward match the CPU") {
  GE_REQUIRE_GPU();
  for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{64}, int64_t{1000}, int64_t{5000}})
    for (DType dt : kDTypes)
      for (float target : {1.f, 0.f})
        for (double range : {4.0, 100.0}) {  // 100: exp would overflow in a naive formula
          CAPTURE(n);
          CAPTURE(std::string(ge::dtype_name(dt)));
          CAPTURE(target);
          CAPTURE(range);
          const Shape s = n % 2 ? Shape{n, 1, 1, 1} : Shape{n};
          const Tensor logits = random_cpu(s, dt, MemoryFormat::NCHW, -range, range);

          Tensor loss = zeros_cpu({1}, DType::F32), prob = zeros_cpu({1}, DType::F32);
          ge::ops::bce_with_logits_forward(logits, target, loss, prob);
          Tensor lossg = poisoned_gpu(loss), probg = poisoned_gpu(prob);
          ge::ops::bce_with_logits_forward(gpu(logits), target, lossg, probg);
          // A loss or mean sigmoid among f32's subnormals (one logit below about -87, whose exp
          // is one) holds only the subnormal spacing's absolute accuracy: a few of those steps.
          auto tolerance = [](const Tensor& ref) {
            const double v = std::fabs(ref.to_doubles()[0]);
            return v > 0 ? std::max(1e-6, 4 * std::numeric_limits<float>::denorm_min() / v) : 1e-6;
          };
          expect_close("loss", lossg, loss, tolerance(loss));
          expect_close("mean sigmoid", probg, prob, tolerance(prob));
          Tensor no_prob;
          Tensor lossg2 = poisoned_gpu(loss);
          ge::ops::bce_with_logits_forward(gpu(logits), target, lossg2, no_prob);
          expect_identical("loss without mean sigmoid", lossg2, lossg.to(kCpu));

          // 65536 * |sigmoid - t| would overflow f16 (max 65504) once |x| is large: a real
          // overflow, the scaler's business, but inf - inf cannot be compared.
          for (double scale : {1.0, range < 10 ? 65536.0 : 1024.0}) {
            CAPTURE(scale);
            const Tensor scale_t = values_cpu({scale}, {1});
            Tensor d = zeros_cpu(s, dt);
            ge::ops::bce_with_logits_backward(logits, target, scale_t, d);
            Tensor dg = poisoned_gpu(d);
            ge::ops::bce_with_logits_backward(gpu(logits), target, gpu(scale_t), dg);
            expect_close("dlogits", dg, d);
          }
        }
}

// ------------------------------------------------------------------------------------- AMP

struct GradList {
  std::vector<Tensor> src, dst0;
};

// Grads of mixed dtypes and sizes: one spanning several chunks, tiny ones, an NHWC conv grad,
// and enough tensors (55) to need more than one multi-tensor launch.
GradList make_grad_list(double scale) {
  GradList g;
  const Shape big{40000}, conv{8, 3, 4, 4};
  int k = 0;
  for (const Shape& s : {big, conv, Shape{1}, Shape{7}}) {
    for (DType dt : kDTypes) {
      g.src.push_back(random_cpu(s, dt, (k++ % 2) ? MemoryFormat::NHWC : MemoryFormat::NCHW, -scale, scale));
      g.dst0.push_back(random_cpu(s, DType::F32, g.src.back().format()));
    }
  }
  while (g.src.size() < 55) {
    g.src.push_back(random_cpu({int64_t(1 + g.src.size())}, DType::F16, MemoryFormat::NCHW, -scale, scale));
    g.dst0.push_back(random_cpu(g.src.back().shape(), DType::F32));
  }
  return g;
}

std::vector<Tensor> clones(const std::vector<Tensor>& v, Device d) {
  std::vector<Tensor> out;
  for (const Tensor& t : v) out.push_back(t.to(d));
  return out;
}

TEST_CASE("gpu ops: unscale_grads over many tensors matches the CPU - found_inf stays 0 when clean") {
  GE_REQUIRE_GPU();
  const double scale = 1024.0;
  const GradList g = make_grad_list(scale);
  const Tensor scale_t = values_cpu({scale}, {1});
  for (bool accumulate : {false, true}) {
    CAPTURE(accumulate);
    std::vector<Tensor> dst = clones(g.dst0, kCpu);
    Tensor found = zeros_cpu({1}, DType::F32);
    ge::ops::unscale_grads(g.src, dst, scale_t, found, accumulate);

    std::vector<Tensor> dstg = clones(g.dst0, kGpu);
    if (!accumulate)
      for (Tensor& t : dstg) ge::test::poison(t);
    Tensor foundg = gpu(zeros_cpu({1}, DType::F32));
    ge::ops::unscale_grads(clones(g.src, kGpu), dstg, gpu(scale_t), foundg, accumulate);
    for (size_t i = 0; i < dst.size(); ++i) {
      CAPTURE(i);
      expect_close("unscaled grad", dstg[i], dst[i], 1e-6);
    }
    CHECK(found.item() == 0.0);
    CHECK(foundg.item() == 0.0);
  }
}

TEST_CASE("gpu ops: unscale_grads raises found_inf on inf or NaN and never clears it") {
  GE_REQUIRE_GPU();
  const Tensor scale_t = gpu(values_cpu({65536.0}, {1}));
  for (double bad : {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()})
    for (DType dt : kDTypes) {
      CAPTURE(bad);
      CAPTURE(ge::dtype_name(dt));
      GradList g = make_grad_list(1.0);
      // The bad value sits deep inside the big tensor (not in its first chunk) of this dtype, or
      // in the last element of its 7-element tensor (past the kernel's last four-element group).
      const bool in_tail = std::isnan(bad);  // the NaN goes to the tail
      const size_t dt_index = dt == DType::F32 ? 0 : (dt == DType::F16 ? 1 : 2);
      const size_t victim = in_tail ? 9 + dt_index : dt_index;
      Values v = g.src[victim].to_doubles();
      v[in_tail ? 6 : 33333] = bad;
      g.src[victim] = Tensor::from_doubles(v, g.src[victim].shape(), dt, kCpu, g.src[victim].format());

      std::vector<Tensor> dstg = clones(g.dst0, kGpu);
      Tensor foundg = gpu(zeros_cpu({1}, DType::F32));
      ge::ops::unscale_grads(clones(g.src, kGpu), dstg, scale_t, foundg, false);
      CHECK(foundg.item() == 1.0);
      // The other tensors are still unscaled correctly.
      std::vector<Tensor> dst = clones(g.dst0, kCpu);
      Tensor found = zeros_cpu({1}, DType::F32);
      ge::ops::unscale_grads(g.src, dst, scale_t.to(kCpu), found, false);
      for (size_t i = 0; i < dst.size(); ++i)
        if (i != victim) expect_close("unscaled grad", dstg[i], dst[i], 1e-6);

      // A later clean call (another loss of the same step) leaves the flag set.
      GradList clean = make_grad_list(1.0);
      std::vector<Tensor> dst2 = clones(clean.dst0, kGpu);
      ge::ops::unscale_grads(clones(clean.src, kGpu), dst2, scale_t, foundg, true);
      CHECK(foundg.item() == 1.0);
    }
}

TEST_CASE("gpu ops: scale_inplace matches the CPU in every dtype") {
  GE_REQUIRE_GPU();
  for (DType dt : kDTypes)
    for (MemoryFormat f : kFormats) {
      CAPTURE(tag(dt, f));
      const Tensor t = random_cpu({3, 5, 7, 9}, dt, f);
      for (float factor : {0.5f, 1.f / 3.f, 65536.f}) {
        CAPTURE(factor);
        Tensor c = t.clone();
        ge::ops::scale_inplace(c, factor);
        Tensor g = gpu(t);
        ge::ops::scale_inplace(g, factor);
        expect_identical("scale_inplace", g, c);
      }
    }
}

TEST_CASE("gpu ops: loss_scaler_update follows the CPU over overflow/clean sequences") {
  GE_REQUIRE_GPU();
  ge::ops::ScalerConfig quick;
  quick.growth_interval = 3;
  ge::ops::ScalerConfig fixed;
  fixed.dynamic = false;
  ge::ops::ScalerConfig apex;  // 2000 clean steps, 2^24 ceiling, 2^-16 floor

  struct Sequence {
    const char* name;
    ge::ops::ScalerConfig cfg;
    Values start;
    std::vector<int> overflows;
  };
  const std::vector<Sequence> sequences{
      {"growth and back-off", quick, {65536, 0}, {0, 0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0}},
      {"ceiling", quick, {16777216, 0}, {0, 0, 0, 0, 0, 0, 1, 0, 0, 0}},
      {"floor", quick, {1.52587890625e-05 * 2, 2}, {1, 1, 1, 0, 1}},
      {"static", fixed, {128, 5}, {1, 0, 0, 0, 1}},
      {"apex defaults", apex, {65536, 1998}, {0, 0, 0, 1, 0}},
  };
  for (const Sequence& seq : sequences) {
    CAPTURE(seq.name);
    Tensor state = values_cpu(seq.start, {2});
    Tensor stateg = gpu(state);
    for (size_t k = 0; k < seq.overflows.size(); ++k) {
      CAPTURE(k);
      const Tensor found = values_cpu({double(seq.overflows[k])}, {1});
      ge::ops::loss_scaler_update(state, found, seq.cfg);
      ge::ops::loss_scaler_update(stateg, gpu(found), seq.cfg);
      expect_identical("scaler state", stateg, state);
    }
  }
}

// ------------------------------------------------------------------------------------ Adam

struct AdamState {
  std::vector<Tensor> params, m, v, copies;
  Tensor step;
};

AdamState to_device(const AdamState& s, Device d) {
  return {clones(s.params, d), clones(s.m, d), clones(s.v, d), clones(s.copies, d), s.step.to(d)};
}

void expect_adam_close(const AdamState& g, const AdamState& c) {
  for (size_t i = 0; i < c.params.size(); ++i) {
    CAPTURE(i);
    expect_close("param", g.params[i], c.params[i]);
    expect_close("exp_avg", g.m[i], c.m[i]);
    expect_close("exp_avg_sq", g.v[i], c.v[i]);
    if (!c.copies.empty()) expect_close("half copy", g.copies[i], c.copies[i]);
  }
  expect_identical("step", g.step, c.step);
}

// Parameters of DCGAN-like shapes (conv weights in both layouts, BN vectors), one spanning
// several chunks and ending in a part of the kernel's four-element groups, others of odd sizes,
// and 40 in all so that one step needs two multi-tensor launches. state_dt: the parameters' and
// moments' dtype (f32 masters, or half at O3).
AdamState make_adam_state(DType half_dt, bool with_copies, DType state_dt = DType::F32) {
  AdamState s;
  std::vector<Shape> shapes{{8, 3, 4, 4}, {16, 8, 4, 4}, {16}, {16}, {50001}, {1, 16, 4, 4}};
  while (shapes.size() < 40) shapes.push_back({int64_t(3 + shapes.size())});
  for (size_t i = 0; i < shapes.size(); ++i) {
    const MemoryFormat f = i % 2 ? MemoryFormat::NHWC : MemoryFormat::NCHW;
    s.params.push_back(random_cpu(shapes[i], state_dt, f));
    s.m.push_back(random_cpu(shapes[i], state_dt, f, -0.01, 0.01));
    s.v.push_back(random_cpu(shapes[i], state_dt, f, 0.0, 1e-4));
    if (with_copies) {
      // One copy is laid out differently from its master (NCHW copy of an NHWC conv weight).
      const bool relaid = i == 1;
      s.copies.push_back(zeros_cpu(shapes[i], half_dt, relaid ? MemoryFormat::NCHW : f));
    }
  }
  s.step = values_cpu({0.0}, {1});
  return s;
}

TEST_CASE("gpu ops: Adam over three steps with and without skip and half copies matches the CPU") {
  GE_REQUIRE_GPU();
  ge::ops::AdamConfig cfg;
  cfg.lr = 1e-3f;
  for (DType state_dt : {DType::F32, DType::F16, DType::BF16})
    for (DType half_dt : {DType::F16, DType::BF16})
      for (bool with_copies : {false, true})
        for (int skip_at : {-1, 1}) {  // -1: no step skipped; 1: the second step overflowed
          if (state_dt != DType::F32 && (with_copies || half_dt != state_dt)) continue;  // O3: half states, no copies
          CAPTURE(ge::dtype_name(state_dt));
          CAPTURE(ge::dtype_name(half_dt));
          CAPTURE(with_copies);
          CAPTURE(skip_at);
          AdamState cpu_state = make_adam_state(half_dt, with_copies, state_dt);
          AdamState gpu_state = to_device(cpu_state, kGpu);
          // Parameter 4 (50001 elements) on the GPU as views one element into wider buffers: not
          // aligned for the kernel's four-element groups, so its elements go one at a time.
          auto misaligned = [](const Tensor& t) {
            Tensor view = Tensor::zeros({t.numel() + 1}, t.dtype(), t.device()).slice0(1, t.numel() + 1);
            view.copy_from(t);
            return view;
          };
          for (std::vector<Tensor>* buffers : {&gpu_state.params, &gpu_state.m, &gpu_state.v})
            (*buffers)[4] = misaligned((*buffers)[4]);
          for (int t = 0; t < 3; ++t) {
            CAPTURE(t);
            std::vector<Tensor> grads;
            for (const Tensor& p : cpu_state.params) grads.push_back(random_cpu(p.shape(), DType::F32, p.format()));
            const Tensor skip = values_cpu({t == skip_at ? 1.0 : 0.0}, {1});
            const AdamState before = to_device(gpu_state, kCpu);

            ge::ops::adam_step(cpu_state.params, grads, cpu_state.m, cpu_state.v, cpu_state.step, skip, cfg,
                               cpu_state.copies);
            std::vector<Tensor> gpu_grads = clones(grads, kGpu);
            gpu_grads[4] = misaligned(gpu_grads[4]);
            ge::ops::adam_step(gpu_state.params, gpu_grads, gpu_state.m, gpu_state.v, gpu_state.step, gpu(skip), cfg,
                               gpu_state.copies);
            expect_adam_close(gpu_state, cpu_state);
            if (t == skip_at) {  // nothing moved, the step count included
              const AdamState after = to_device(gpu_state, kCpu);
              for (size_t i = 0; i < before.params.size(); ++i) {
                expect_identical("skipped param", after.params[i], before.params[i]);
                expect_identical("skipped exp_avg", after.m[i], before.m[i]);
                expect_identical("skipped exp_avg_sq", after.v[i], before.v[i]);
              }
              expect_identical("skipped step", after.step, before.step);
            }
          }
          CHECK(gpu_state.step.item() == (skip_at < 0 ? 3.0 : 2.0));
          // Half copies are the fp32 masters rounded once.
          for (size_t i = 0; i < gpu_state.copies.size(); ++i) {
            const Values master = gpu_state.params[i].to_doubles(), copy = gpu_state.copies[i].to_doubles();
            for (size_t j = 0; j < master.size(); j += 97) {
              const float m32 = static_cast<float>(master[j]);
              const double rounded = half_dt == DType::F16 ? ge::half_bits_to_float(ge::float_to_half_bits(m32))
                                                           : ge::bf16_bits_to_float(ge::float_to_bf16_bits(m32));
              CHECK(copy[j] == rounded);
            }
          }
        }
}

// With a static loss scale the trainer leaves an optimizer's last loss's gradients to Adam, which
// unscales them as it reads them (ops::PendingGrads): bitwise unscale_grads, then adam_step; the
// overflow flag (and with store_grads the gradients) written also on a skipped step, the
// gradients left as they were without store_grads.
TEST_CASE("gpu ops: Adam taking pending gradients is bitwise unscale_grads then the update") {
  GE_REQUIRE_GPU();
  ge::ops::AdamConfig cfg;
  cfg.lr = 1e-3f;
  for (DType state_dt : {DType::F32, DType::F16, DType::BF16})
    for (bool accumulate : {false, true})
      for (bool skip_step : {false, true})
        for (bool non_finite : {false, true})
          for (bool store : {true, false}) {
            CAPTURE(std::string(ge::dtype_name(state_dt)));
            CAPTURE(store);
            CAPTURE(accumulate);
            CAPTURE(skip_step);
            CAPTURE(non_finite);
            const AdamState start = make_adam_state(DType::F16, false, state_dt);
            AdamState apart = to_device(start, kGpu), fused = to_device(start, kGpu);
            std::vector<Tensor> src, grads_apart, grads_fused;
            for (size_t i = 0; i < start.params.size(); ++i) {
              const Tensor& p = start.params[i];
              Tensor s = random_cpu(p.shape(), state_dt, p.format(), -1000.0, 1000.0);
              if (non_finite && i == 4) {  // a NaN in the gradients: the flag goes up
                if (state_dt == DType::F32)
                  static_cast<float*>(s.data())[7] = NAN;
                else
                  static_cast<uint16_t*>(s.data())[7] = state_dt == DType::F16 ? 0x7E00 : 0x7FC0;
              }
              src.push_back(gpu(s));
              const Tensor g = gpu(random_cpu(p.shape(), DType::F32, p.format()));
              grads_apart.push_back(g);
              grads_fused.push_back(g.clone());
            }
            // Parameter 4's buffers one element into wider ones: its elements go one at a time.
            auto misaligned = [](const Tensor& t) {
              Tensor view = Tensor::zeros({t.numel() + 1}, t.dtype(), t.device()).slice0(1, t.numel() + 1);
              view.copy_from(t);
              return view;
            };
            for (AdamState* st : {&apart, &fused})
              for (std::vector<Tensor>* buffers : {&st->params, &st->m, &st->v})
                (*buffers)[4] = misaligned((*buffers)[4]);
            grads_apart[4] = misaligned(grads_apart[4]);
            grads_fused[4] = misaligned(grads_fused[4]);
            src[4] = misaligned(src[4]);
            const Tensor scale = gpu(values_cpu({1024.0}, {1}));
            const Tensor skip = gpu(values_cpu({skip_step ? 1.0 : 0.0}, {1}));
            Tensor found_apart = gpu(values_cpu({0.0}, {1})), found_fused = gpu(values_cpu({0.0}, {1}));

            ge::ops::unscale_grads(src, grads_apart, scale, found_apart, accumulate);
            ge::ops::adam_step(apart.params, grads_apart, apart.m, apart.v, apart.step, skip, cfg);
            std::vector<Tensor> grads_before;
            for (const Tensor& g : grads_fused) grads_before.push_back(g.to(kCpu));
            const ge::ops::PendingGrads pending{src, scale, found_fused, accumulate, store};
            ge::ops::adam_step(fused.params, grads_fused, fused.m, fused.v, fused.step, skip, cfg, {}, &pending);

            auto same_bits = [](const std::string& what, const Tensor& a, const Tensor& b) {  // NaNs included
              INFO(what, ": ", a.str());
              CHECK(ge::test::same_tensor(a, b));
            };
            for (size_t i = 0; i < start.params.size(); ++i) {
              CAPTURE(i);
              same_bits("param", fused.params[i], apart.params[i]);
              same_bits("exp_avg", fused.m[i], apart.m[i]);
              same_bits("exp_avg_sq", fused.v[i], apart.v[i]);
              same_bits("grad", grads_fused[i], store ? grads_apart[i] : grads_before[i]);
            }
            same_bits("step", fused.step, apart.step);
            same_bits("found_inf", found_fused, found_apart);
            CHECK(found_fused.item() == (non_finite ? 1.0 : 0.0));
            CHECK(fused.step.item() == (skip_step ? 0.0 : 1.0));
          }
}

}  // namespace
