// conv2d and conv_transpose2d: gradient checks, PyTorch goldens, the CPU reference's own cases,
// and the GPU against the CPU (with fused activations: test_fused_conv.cpp; x, w or dx holding
// fewer channels than the kernels take: test_pad.cpp).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "ops/op_test_util.h"

namespace {

// ---------------------------------------------------------------------------------- gradient checks

namespace gradient_checks {

using namespace ge::test::gradcheck;

struct ConvCase {
  int64_t N, C, H, W, K, R;
  int stride, pad;
};

const ConvCase kConvCases[] = {
    {2, 3, 8, 8, 4, 4, 2, 1},  // DCGAN's down-sampling block: 4x4, stride 2, pad 1
    {2, 3, 5, 5, 2, 3, 1, 0},  // stride 1, no padding
    {3, 4, 4, 4, 1, 4, 1, 0},  // the discriminator's last layer: 4x4 -> 1x1
    {1, 2, 7, 6, 3, 3, 2, 1},  // non-square input whose size stride 2 does not divide
    {2, 2, 5, 5, 2, 2, 1, 2},  // padding wider than the kernel reaches
};

TEST_CASE("gradcheck: conv2d input and weight gradients") {
  for (const ConvCase& cc : kConvCases) {
    for (MemoryFormat format : {MemoryFormat::NCHW, MemoryFormat::NHWC}) {
      CAPTURE(cc.H);
      CAPTURE(cc.R);
      CAPTURE(cc.stride);
      CAPTURE(cc.pad);
      CAPTURE(ge::format_name(format));
      const ge::Conv2dParams p{cc.stride, cc.pad};
      const Shape xs{cc.N, cc.C, cc.H, cc.W}, ws{cc.K, cc.C, cc.R, cc.R};
      const Shape ys{cc.N, cc.K, ge::conv_out_size(cc.H, cc.R, p.stride, p.pad),
                     ge::conv_out_size(cc.W, cc.R, p.stride, p.pad)};
      const Values x = ge::test::random_values(ge::shape_numel(xs));
      const Values w = ge::test::random_values(ge::shape_numel(ws));
      const Values weights = ge::test::random_values(ge::shape_numel(ys));

      auto loss = [&](const Values& xv, const Values& wv) {
        Tensor y = f64_zeros(ys, format);
        ge::ops::conv2d_forward(f64(xv, xs, format), f64(wv, ws, format), y, p);
        return weighted_sum(y, weights);
      };
      Tensor dy = f64(weights, ys, format);
      Tensor dx = f64_zeros(xs, format), dw = f64_zeros(ws, format);
      ge::ops::conv2d_backward_data(dy, f64(w, ws, format), dx, p);
      ge::ops::conv2d_backward_filter(f64(x, xs, format), dy, dw, p, 0.f);

      expect_same_gradient("conv2d dL/dx", dx.to_doubles(),
                           numeric_gradient(x, [&](const Values& v) { return loss(v, w); }));
      expect_same_gradient("conv2d dL/dw", dw.to_doubles(),
                           numeric_gradient(w, [&](const Values& v) { return loss(x, v); }));
    }
  }
}

// conv_transpose2d goes through ge::ops, where it is built from conv2d.
TEST_CASE("gradcheck: conv_transpose2d input and weight gradients") {
  struct Case {
    int64_t N, Cin, H, Cout, R;
    int stride, pad;
  };
  // The generator's first block (1x1 -> 4x4) and its up-sampling block (x2, 4x4 s2 p1).
  for (const Case& cc : {Case{3, 5, 1, 4, 4, 1, 0}, Case{2, 3, 3, 2, 4, 2, 1}, Case{1, 2, 4, 3, 3, 2, 1}}) {
    for (MemoryFormat format : {MemoryFormat::NCHW, MemoryFormat::NHWC}) {
      CAPTURE(cc.H);
      CAPTURE(cc.stride);
      CAPTURE(ge::format_name(format));
      const ge::Conv2dParams p{cc.stride, cc.pad};
      const int64_t out = ge::conv_transpose_out_size(cc.H, cc.R, p.stride, p.pad);
      const Shape xs{cc.N, cc.Cin, cc.H, cc.H}, ws{cc.Cin, cc.Cout, cc.R, cc.R}, ys{cc.N, cc.Cout, out, out};
      const Values x = ge::test::random_values(ge::shape_numel(xs));
      const Values w = ge::test::random_values(ge::shape_numel(ws));
      const Values weights = ge::test::random_values(ge::shape_numel(ys));

      auto loss = [&](const Values& xv, const Values& wv) {
        Tensor y = f64_zeros(ys, format);
        ge::ops::conv_transpose2d_forward(f64(xv, xs, format), f64(wv, ws, format), y, p);
        return weighted_sum(y, weights);
      };
      Tensor dy = f64(weights, ys, format);
      Tensor dx = f64_zeros(xs, format), dw = f64_zeros(ws, format);
      ge::ops::conv_transpose2d_backward_data(dy, f64(w, ws, format), dx, p);
      ge::ops::conv_transpose2d_backward_filter(f64(x, xs, format), dy, dw, p, 0.f);

      expect_same_gradient("conv_transpose2d dL/dx", dx.to_doubles(),
                           numeric_gradient(x, [&](const Values& v) { return loss(v, w); }));
      expect_same_gradient("conv_transpose2d dL/dw", dw.to_doubles(),
                           numeric_gradient(w, [&](const Values& v) { return loss(x, v); }));
    }
  }
}

}  // namespace gradient_checks

// ---------------------------------------------------------------------------------- PyTorch goldens

namespace golden_checks {

using namespace ge;
using namespace ge::test;
using namespace ge::test::goldens;

void conv_cases(Device d, MemoryFormat fmt, bool transposed) {
  const auto& f = golden("golden_ops.safetensors");
  const std::string kind = transposed ? "convt" : "conv";
  for (int i = 0;; ++i) {
    const std::string pre = kind + std::to_string(i) + ".";
    auto meta = f.metadata.find(kind + std::to_string(i));
    if (meta == f.metadata.end()) {
      CHECK(i >= 4);  // the golden holds at least four cases of each
      break;
    }
    Conv2dParams p;
    p.stride = std::atoi(meta->second.c_str());
    p.pad = std::atoi(meta->second.c_str() + meta->second.find(',') + 1);
    Tensor x = golden_on(f, pre + "x", d, fmt), w = golden_on(f, pre + "w", d, fmt),
           dy = golden_on(f, pre + "dy", d, fmt);
    Tensor y = Tensor::empty(dy.shape(), DType::F32, d, fmt), dx = like(x), dw = like(w);
    for (Tensor* t : {&y, &dx, &dw}) poison(*t);
    if (transposed) {
      ops::conv_transpose2d_forward(x, w, y, p);
      ops::conv_transpose2d_backward_data(dy, w, dx, p);
      ops::conv_transpose2d_backward_filter(x, dy, dw, p);
    } else {
      ops::conv2d_forward(x, w, y, p);
      ops::conv2d_backward_data(dy, w, dx, p);
      ops::conv2d_backward_filter(x, dy, dw, p);
    }
    expect_close(y, f, pre + "y");
    expect_close(dx, f, pre + "dx");
    expect_close(dw, f, pre + "dw");
  }
}

TEST_CASE("golden/cpu: conv2d and conv_transpose2d match PyTorch") {
  conv_cases(Device::cpu(), MemoryFormat::NCHW, false);
  conv_cases(Device::cpu(), MemoryFormat::NCHW, true);
  conv_cases(Device::cpu(), MemoryFormat::NHWC, false);
}

TEST_CASE("golden/gpu: conv2d and conv_transpose2d match PyTorch (fp32 no TF32)") {
  GE_REQUIRE_GPU();
  for (MemoryFormat fmt : {MemoryFormat::NCHW, MemoryFormat::NHWC}) {
    conv_cases(Device::cuda(0), fmt, false);
    conv_cases(Device::cuda(0), fmt, true);
  }
}

}  // namespace golden_checks

// ------------------------------------------------------------------------------------ CPU reference

namespace cpu_checks {

using namespace ge::test::cpu_ref;

TEST_CASE("cpu ops: conv2d passes on a hand-computed example") {
  // x = 1..9 as a 3x3 image, w = [[1, 2], [3, 4]].
  const Tensor x = make({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  const Tensor w = make({1, 2, 3, 4}, {1, 1, 2, 2});

  SUBCASE("forward, stride 1 pad 0: each output is the 2x2 window dotted with w") {
    Tensor y = zeros({1, 1, 2, 2});
    ge::ops::conv2d_forward(x, w, y, {1, 0});
    expect_values(y, {37, 47, 67, 77});
  }
  SUBCASE("forward, stride 2 pad 1: windows at rows/cols {-1,0} and {1,2}") {
    Tensor y = zeros({1, 1, 2, 2});
    ge::ops::conv2d_forward(x, w, y, {2, 1});
    expect_values(y, {4, 18, 36, 77});
  }
  SUBCASE("forward, two input and two output channels") {
    // channel 1 of x is all ones; filter 0 reads it with ones, filter 1 is w on channel 0 negated.
    Values xv{1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    Values wv{1, 2, 3, 4, 1, 1, 1, 1, -1, -2, -3, -4, 0, 0, 0, 0};
    Tensor y = zeros({1, 2, 2, 2});
    ge::ops::conv2d_forward(make(xv, {1, 2, 3, 3}), make(wv, {2, 2, 2, 2}), y, {1, 0});
    expect_values(y, {41, 51, 71, 81, -37, -47, -67, -77});
  }
  SUBCASE("backward data: dy = ones scatters w over every window") {
    Tensor dx = zeros({1, 1, 3, 3});
    ge::ops::conv2d_backward_data(make({1, 1, 1, 1}, {1, 1, 2, 2}), w, dx, {1, 0});
    expect_values(dx, {1, 3, 2, 4, 10, 6, 3, 7, 4});
  }
  SUBCASE("backward filter: overwrite (beta 0, even over NaN) and accumulate (beta 1)") {
    const Tensor dy = make({1, 1, 1, 1}, {1, 1, 2, 2});
    Tensor dw = zeros({1, 1, 2, 2});
    ge::test::poison(dw);
    ge::ops::conv2d_backward_filter(x, dy, dw, {1, 0}, 0.f);
    expect_values(dw, {12, 16, 24, 28});
    ge::ops::conv2d_backward_filter(x, dy, dw, {1, 0}, 1.f);
    expect_values(dw, {24, 32, 48, 56});
  }
}

TEST_CASE("cpu ops: conv2d passes are adjoint (<conv(x) dy> = <x dconv(dy)> = <w dw>)") {
  const ge::Conv2dParams p{2, 1};
  const Tensor x = ge::test::random_tensor({2, 3, 9, 8}, DType::F64);
  const Tensor w = ge::test::random_tensor({5, 3, 4, 4}, DType::F64);
  const Tensor dy = ge::test::random_tensor({2, 5, 4, 4}, DType::F64);
  Tensor y = zeros({2, 5, 4, 4}, DType::F64), dx = zeros(x.shape(), DType::F64), dw = zeros(w.shape(), DType::F64);
  ge::ops::conv2d_forward(x, w, y, p);
  ge::ops::conv2d_backward_data(dy, w, dx, p);
  ge::ops::conv2d_backward_filter(x, dy, dw, p, 0.f);
  auto dot = [](const Tensor& a, const Tensor& b) {
    const Values u = a.to_doubles(), v = b.to_doubles();
    double s = 0;
    for (size_t i = 0; i < u.size(); ++i) s += u[i] * v[i];
    return s;
  };
  const double ref = dot(y, dy);
  CHECK(dot(x, dx) == doctest::Approx(ref).epsilon(1e-12));
  CHECK(dot(w, dw) == doctest::Approx(ref).epsilon(1e-12));
}

}  // namespace cpu_checks

// ---------------------------------------------------------------------------------- GPU against CPU

namespace gpu_checks {

using namespace ge::test::gpu_ref;

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

}  // namespace gpu_checks

}  // namespace
