// Central-difference gradient checks of every CPU op's backward pass, in float64.
//
// Each check differentiates the scalar L = sum_i weights[i] * output[i] with random weights (a
// random linear functional of the op's output, so every output element contributes), and
// compares the analytic gradient (the op's backward with dy = weights) against
//   dL/dx_i ~ (L(x + h e_i) - L(x - h e_i)) / 2h,   h = 1e-6,
// with a tolerance of 1e-6 relative to the gradient's norm. Piecewise-linear activations skip
// points within 1e-3 of their kink, where the difference quotient straddles two slopes
// (the "kink window" of Caffe's GradientChecker).
//
// BatchNorm's saved statistics and BCE's loss are f32 in the op contract; these checks call the
// CPU reference directly (ge::cpu) with f64 tensors in those places so that no fp32 rounding
// hides in the loss. conv_transpose2d goes through ge::ops, where it is built from conv2d.
#include <cmath>
#include <functional>

#include "support/test_util.h"

namespace {

using ge::DType;
using ge::MemoryFormat;
using ge::Shape;
using ge::Tensor;
using Values = std::vector<double>;
using LossOf = std::function<double(const Values&)>;

constexpr double kStep = 1e-6;
constexpr double kTolerance = 1e-6;

Tensor f64(const Values& v, const Shape& shape, MemoryFormat format = MemoryFormat::NCHW) {
  return Tensor::from_doubles(v, shape, DType::F64, ge::Device::cpu(), format);
}

Tensor f64_zeros(const Shape& shape, MemoryFormat format = MemoryFormat::NCHW) {
  return Tensor::zeros(shape, DType::F64, ge::Device::cpu(), format);
}

double weighted_sum(const Tensor& out, const Values& weights) {
  const Values v = out.to_doubles();
  REQUIRE(v.size() == weights.size());
  double s = 0.0;
  for (size_t i = 0; i < v.size(); ++i) s += weights[i] * v[i];
  return s;
}

// (L(x + h e_i) - L(x - h e_i)) / 2h for every i.
Values numeric_gradient(Values x, const LossOf& loss) {
  Values g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double original = x[i];
    x[i] = original + kStep;
    const double up = loss(x);
    x[i] = original - kStep;
    const double down = loss(x);
    x[i] = original;
    g[i] = (up - down) / (2 * kStep);
  }
  return g;
}

// Compares the two gradients over the elements not skipped; fails with the relative error.
void expect_same_gradient(const std::string& what, const Values& analytic, const Values& numeric,
                          const std::vector<bool>& skip = {}) {
  REQUIRE(analytic.size() == numeric.size());
  Values a, n;
  for (size_t i = 0; i < analytic.size(); ++i) {
    if (!skip.empty() && skip[i]) continue;
    a.push_back(analytic[i]);
    n.push_back(numeric[i]);
  }
  REQUIRE(!a.empty());
  const double err = ge::test::rel_error(a, n);
  INFO(what, ": relative error ", err, " over ", a.size(), " elements");
  CHECK(err < kTolerance);
}

// ---------------------------------------------------------------------------- convolutions

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

// ------------------------------------------------------------------------------ batchnorm

TEST_CASE("gradcheck: batchnorm training forward (x gamma beta)") {
  for (MemoryFormat format : {MemoryFormat::NCHW, MemoryFormat::NHWC}) {
    CAPTURE(ge::format_name(format));
    const int64_t C = 4;
    const Shape xs{3, C, 3, 5}, cs{C};
    const Values x = ge::test::random_values(ge::shape_numel(xs), -2.0, 3.0);
    const Values gamma = ge::test::random_values(C, 0.5, 1.5);
    const Values beta = ge::test::random_values(C);
    const Values weights = ge::test::random_values(ge::shape_numel(xs));

    auto loss = [&](const Values& xv, const Values& gv, const Values& bv) {
      Tensor rm = f64_zeros(cs), rv = f64_zeros(cs), mean = f64_zeros(cs), invstd = f64_zeros(cs);
      Tensor y = f64_zeros(xs, format);
      ge::cpu::batchnorm_forward_train(f64(xv, xs, format), f64(gv, cs), f64(bv, cs), rm, rv, 0.1f, 1e-5f, y,
                                       mean, invstd, nullptr, nullptr);
      return weighted_sum(y, weights);
    };

    Tensor xt = f64(x, xs, format), gt = f64(gamma, cs);
    Tensor rm = f64_zeros(cs), rv = f64_zeros(cs), mean = f64_zeros(cs), invstd = f64_zeros(cs);
    Tensor y = f64_zeros(xs, format);
    ge::cpu::batchnorm_forward_train(xt, gt, f64(beta, cs), rm, rv, 0.1f, 1e-5f, y, mean, invstd, nullptr, nullptr);
    Tensor dx = f64_zeros(xs, format), dgamma = f64_zeros(cs), dbeta = f64_zeros(cs);
    ge::cpu::batchnorm_backward(xt, f64(weights, xs, format), gt, mean, invstd, dx, dgamma, dbeta, nullptr, nullptr,
                                nullptr, nullptr);

    expect_same_gradient("batchnorm dL/dx", dx.to_doubles(),
                         numeric_gradient(x, [&](const Values& v) { return loss(v, gamma, beta); }));
    expect_same_gradient("batchnorm dL/dgamma", dgamma.to_doubles(),
                         numeric_gradient(gamma, [&](const Values& v) { return loss(x, v, beta); }));
    expect_same_gradient("batchnorm dL/dbeta", dbeta.to_doubles(),
                         numeric_gradient(beta, [&](const Values& v) { return loss(x, gamma, v); }));
  }
}

// ---------------------------------------------------------------------------- activations

TEST_CASE("gradcheck: activations (kink window 1e-3)") {
  using ge::ops::Activation;
  const float slope = 0.2f;
  const Shape xs{2, 3, 4, 5};
  for (Activation a : {Activation::ReLU, Activation::LeakyReLU, Activation::Tanh}) {
    CAPTURE(ge::ops::activation_name(a));
    const Values x = ge::test::random_values(ge::shape_numel(xs), -3.0, 3.0);
    const Values weights = ge::test::random_values(ge::shape_numel(xs));
    std::vector<bool> near_kink(x.size(), false);
    if (a != Activation::Tanh)
      for (size_t i = 0; i < x.size(); ++i) near_kink[i] = std::abs(x[i]) < 1e-3;

    auto loss = [&](const Values& xv) {
      Tensor y = f64_zeros(xs);
      ge::ops::activation_forward(a, f64(xv, xs), y, slope);
      return weighted_sum(y, weights);
    };
    Tensor y = f64_zeros(xs), dx = f64_zeros(xs);
    ge::ops::activation_forward(a, f64(x, xs), y, slope);
    ge::ops::activation_backward(a, y, f64(weights, xs), dx, slope);
    expect_same_gradient(std::string(ge::ops::activation_name(a)) + " dL/dx", dx.to_doubles(),
                         numeric_gradient(x, loss), near_kink);
  }
}

// ------------------------------------------------------------------------------------ BCE

TEST_CASE("gradcheck: BCE with logits unscaled and scaled") {
  const Shape xs{16, 1, 1, 1};
  for (float target : {1.f, 0.f}) {
    for (float scale : {1.f, 1024.f}) {
      CAPTURE(target);
      CAPTURE(scale);
      const Values x = ge::test::random_values(ge::shape_numel(xs), -4.0, 4.0);
      auto loss = [&](const Values& xv) {
        Tensor l = f64_zeros({1}), no_mean_sigmoid;
        ge::cpu::bce_with_logits_forward(f64(xv, xs), target, l, no_mean_sigmoid);
        return l.item();
      };
      Tensor dx = f64_zeros(xs);
      ge::cpu::bce_with_logits_backward(f64(x, xs), target, Tensor::from_floats({scale}, {1}, DType::F32), dx);
      // The backward returns the gradient of the SCALED loss.
      Values numeric = numeric_gradient(x, loss);
      for (double& g : numeric) g *= scale;
      expect_same_gradient("bce dL/dlogits", dx.to_doubles(), numeric);
    }
  }
}

}  // namespace
