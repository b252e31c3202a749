// Semantics of the CPU reference ops (through ge::ops on CPU tensors): hand-computed cases,
// layout independence, half precision against float64, BatchNorm's running statistics, BCE on
// extreme logits, the dynamic loss scaler, unscaling and Adam.
#include <cmath>
#include <limits>

#include "core/half_bits.h"
#include "support/test_util.h"

namespace {

using ge::DType;
using ge::MemoryFormat;
using ge::Shape;
using ge::Tensor;
using Values = std::vector<double>;
constexpr MemoryFormat kNCHW = MemoryFormat::NCHW;
constexpr MemoryFormat kNHWC = MemoryFormat::NHWC;

Tensor make(const Values& v, const Shape& shape, DType dtype = DType::F32, MemoryFormat format = kNCHW) {
  return Tensor::from_doubles(v, shape, dtype, ge::Device::cpu(), format);
}

Tensor zeros(const Shape& shape, DType dtype = DType::F32, MemoryFormat format = kNCHW) {
  return Tensor::zeros(shape, dtype, ge::Device::cpu(), format);
}

// The same logical values in another dtype and/or format (values already representable).
Tensor convert(const Tensor& t, DType dtype, MemoryFormat format) {
  return make(t.to_doubles(), t.shape(), dtype, t.rank() == 4 ? format : kNCHW);
}

void expect_values(const Tensor& t, const Values& expected, double tol = 0.0) {
  const Values got = t.to_doubles();
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(std::abs(got[i] - expected[i]) <= tol * std::max(1.0, std::abs(expected[i])));
  }
}

void expect_identical(const Tensor& a, const Tensor& b) {
  CHECK(ge::test::max_abs_diff(a.to_doubles(), b.to_doubles()) == 0.0);
}

// ---------------------------------------------------------------------------- convolution

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

// --------------------------------------------------------------------- layout independence

TEST_CASE("cpu ops: NHWC and NCHW give identical results") {
  for (DType dt : {DType::F32, DType::F16}) {
    CAPTURE(ge::dtype_name(dt));
    const ge::Conv2dParams p{2, 1};
    const Tensor x = ge::test::random_tensor({2, 3, 8, 8}, dt);
    const Tensor w = ge::test::random_tensor({4, 3, 4, 4}, dt);
    const Tensor dy = ge::test::random_tensor({2, 4, 4, 4}, dt);
    const Tensor xh = convert(x, dt, kNHWC), wh = convert(w, dt, kNHWC), dyh = convert(dy, dt, kNHWC);

    Tensor y = zeros(dy.shape(), dt), yh = zeros(dy.shape(), dt, kNHWC);
    ge::ops::conv2d_forward(x, w, y, p);
    ge::ops::conv2d_forward(xh, wh, yh, p);
    expect_identical(y, yh);

    Tensor dx = zeros(x.shape(), dt), dxh = zeros(x.shape(), dt, kNHWC);
    ge::ops::conv2d_backward_data(dy, w, dx, p);
    ge::ops::conv2d_backward_data(dyh, wh, dxh, p);
    expect_identical(dx, dxh);

    Tensor dw = zeros(w.shape(), dt), dwh = zeros(w.shape(), dt, kNHWC);
    ge::ops::conv2d_backward_filter(x, dy, dw, p, 0.f);
    ge::ops::conv2d_backward_filter(xh, dyh, dwh, p, 0.f);
    expect_identical(dw, dwh);

    // BatchNorm on the conv input shape, f32 parameters.
    const Shape cs{3};
    const Tensor gamma = ge::test::random_tensor(cs, DType::F32, ge::Device::cpu(), kNCHW, 0.5, 1.5);
    const Tensor beta = ge::test::random_tensor(cs, DType::F32);
    Tensor rm = zeros(cs), rv = make({1, 1, 1}, cs), rmh = zeros(cs), rvh = make({1, 1, 1}, cs);
    Tensor mean = zeros(cs), invstd = zeros(cs), meanh = zeros(cs), invstdh = zeros(cs);
    Tensor bn = zeros(x.shape(), dt), bnh = zeros(x.shape(), dt, kNHWC);
    ge::ops::batchnorm_forward_train(x, gamma, beta, rm, rv, 0.1f, 1e-5f, bn, mean, invstd);
    ge::ops::batchnorm_forward_train(xh, gamma, beta, rmh, rvh, 0.1f, 1e-5f, bnh, meanh, invstdh);
    expect_identical(bn, bnh);
    expect_identical(rv, rvh);
    expect_identical(invstd, invstdh);
    Tensor dgamma = zeros(cs), dbeta = zeros(cs), dgammah = zeros(cs), dbetah = zeros(cs);
    Tensor bdx = zeros(x.shape(), dt), bdxh = zeros(x.shape(), dt, kNHWC);
    ge::ops::batchnorm_backward(x, dx, gamma, mean, invstd, bdx, dgamma, dbeta);
    ge::ops::batchnorm_backward(xh, dxh, gamma, meanh, invstdh, bdxh, dgammah, dbetah);
    expect_identical(bdx, bdxh);
    expect_identical(dgamma, dgammah);
    expect_identical(dbeta, dbetah);

    Tensor act = zeros(x.shape(), dt), acth = zeros(x.shape(), dt, kNHWC);
    ge::ops::activation_forward(ge::ops::Activation::LeakyReLU, x, act, 0.2f);
    ge::ops::activation_forward(ge::ops::Activation::LeakyReLU, xh, acth, 0.2f);
    expect_identical(act, acth);
  }
}

// ------------------------------------------------------------------ half precision vs f64

// Runs op on half inputs and on the same (already rounded) values in f64; the half result must
// match within tol relative to the f64 result's norm.
void expect_close_to_f64(const std::string& what, const Tensor& half_out, const Tensor& f64_out, double tol) {
  const double err = ge::test::rel_error(half_out, f64_out);
  INFO(what, " (", half_out.str(), "): relative error ", err, " vs tolerance ", tol);
  CHECK(err <= tol);
}

TEST_CASE("cpu ops: f16 and bf16 ops match f64 on the same rounded inputs") {
  for (DType dt : {DType::F16, DType::BF16}) {
    CAPTURE(ge::dtype_name(dt));
    const double tol = dt == DType::F16 ? 1e-3 : 1e-2;
    const DType wide = DType::F64;
    auto half_and_wide = [&](const Shape& s, double lo = -1.0, double hi = 1.0) {
      Tensor h = ge::test::random_tensor(s, dt, ge::Device::cpu(), kNCHW, lo, hi);
      return std::make_pair(h, convert(h, wide, kNCHW));
    };

    // convolution, all three passes
    const ge::Conv2dParams p{2, 1};
    auto [x, x64] = half_and_wide({2, 6, 8, 8});
    auto [w, w64] = half_and_wide({5, 6, 4, 4});
    auto [dy, dy64] = half_and_wide({2, 5, 4, 4});
    Tensor y = zeros(dy.shape(), dt), y64 = zeros(dy.shape(), wide);
    ge::ops::conv2d_forward(x, w, y, p);
    ge::ops::conv2d_forward(x64, w64, y64, p);
    expect_close_to_f64("conv2d_forward", y, y64, tol);
    Tensor dx = zeros(x.shape(), dt), dx64 = zeros(x.shape(), wide);
    ge::ops::conv2d_backward_data(dy, w, dx, p);
    ge::ops::conv2d_backward_data(dy64, w64, dx64, p);
    expect_close_to_f64("conv2d_backward_data", dx, dx64, tol);
    Tensor dw = zeros(w.shape(), dt), dw64 = zeros(w.shape(), wide);
    ge::ops::conv2d_backward_filter(x, dy, dw, p, 0.f);
    ge::ops::conv2d_backward_filter(x64, dy64, dw64, p, 0.f);
    expect_close_to_f64("conv2d_backward_filter", dw, dw64, tol);

    // batchnorm with fp32 parameters (O1/O2) and with half parameters (O3)
    for (DType param_dt : {DType::F32, dt}) {
      CAPTURE(ge::dtype_name(param_dt));
      const Shape cs{6};
      auto [xb, xb64] = half_and_wide(x.shape(), -2.0, 3.0);
      const Tensor gamma = ge::test::random_tensor(cs, param_dt, ge::Device::cpu(), kNCHW, 0.5, 1.5);
      const Tensor beta = ge::test::random_tensor(cs, param_dt);
      const Tensor gamma64 = convert(gamma, wide, kNCHW), beta64 = convert(beta, wide, kNCHW);
      Tensor rm = zeros(cs, param_dt), rv = make(Values(6, 1.0), cs, param_dt);
      Tensor rm64 = zeros(cs, wide), rv64 = make(Values(6, 1.0), cs, wide);
      Tensor mean = zeros(cs), invstd = zeros(cs), mean64 = zeros(cs), invstd64 = zeros(cs);
      Tensor yb = zeros(x.shape(), dt), yb64 = zeros(x.shape(), wide);
      ge::ops::batchnorm_forward_train(xb, gamma, beta, rm, rv, 0.1f, 1e-5f, yb, mean, invstd);
      ge::ops::batchnorm_forward_train(xb64, gamma64, beta64, rm64, rv64, 0.1f, 1e-5f, yb64, mean64, invstd64);
      expect_close_to_f64("batchnorm_forward_train y", yb, yb64, tol);
      expect_close_to_f64("batchnorm running_mean", rm, rm64, tol);
      expect_close_to_f64("batchnorm running_var", rv, rv64, tol);

      Tensor ye = zeros(x.shape(), dt), ye64 = zeros(x.shape(), wide);
      ge::ops::batchnorm_forward_eval(xb, gamma, beta, rm, rv, 1e-5f, ye);
      ge::ops::batchnorm_forward_eval(xb64, gamma64, beta64, convert(rm, wide, kNCHW), convert(rv, wide, kNCHW),
                                      1e-5f, ye64);
      expect_close_to_f64("batchnorm_forward_eval", ye, ye64, tol);

      auto [dyb, dyb64] = half_and_wide(x.shape());
      Tensor dxb = zeros(x.shape(), dt), dxb64 = zeros(x.shape(), wide);
      Tensor dg = zeros(cs, param_dt), db = zeros(cs, param_dt), dg64 = zeros(cs, wide), db64 = zeros(cs, wide);
      ge::ops::batchnorm_backward(xb, dyb, gamma, mean, invstd, dxb, dg, db);
      ge::ops::batchnorm_backward(xb64, dyb64, gamma64, mean64, invstd64, dxb64, dg64, db64);
      expect_close_to_f64("batchnorm_backward dx", dxb, dxb64, tol);
      expect_close_to_f64("batchnorm_backward dgamma", dg, dg64, tol);
      expect_close_to_f64("batchnorm_backward dbeta", db, db64, tol);
    }

    // activations, forward and backward
    for (auto a : {ge::ops::Activation::ReLU, ge::ops::Activation::LeakyReLU, ge::ops::Activation::Tanh}) {
      CAPTURE(ge::ops::activation_name(a));
      auto [xa, xa64] = half_and_wide({2, 3, 5, 5}, -3.0, 3.0);
      auto [da, da64] = half_and_wide(xa.shape());
      Tensor ya = zeros(xa.shape(), dt), ya64 = zeros(xa.shape(), wide);
      ge::ops::activation_forward(a, xa, ya, 0.2f);
      ge::ops::activation_forward(a, xa64, ya64, 0.2f);
      expect_close_to_f64("activation_forward", ya, ya64, tol);
      // Backward from the same (half-rounded) output, so only the backward's arithmetic differs.
      const Tensor ya_wide = convert(ya, wide, kNCHW);
      Tensor ga = zeros(xa.shape(), dt), ga64 = zeros(xa.shape(), wide);
      ge::ops::activation_backward(a, ya, da, ga, 0.2f);
      ge::ops::activation_backward(a, ya_wide, da64, ga64, 0.2f);
      expect_close_to_f64("activation_backward", ga, ga64, tol);
    }

    // BCE: the loss is computed in double either way, so it is the same f32 number.
    auto [logits, logits64] = half_and_wide({8, 1, 1, 1}, -5.0, 5.0);
    Tensor loss = zeros({1}), loss64 = zeros({1}), ms = zeros({1}), ms64 = zeros({1});
    ge::ops::bce_with_logits_forward(logits, 1.f, loss, ms);
    ge::ops::bce_with_logits_forward(logits64, 1.f, loss64, ms64);
    expect_identical(loss, loss64);
    expect_identical(ms, ms64);
    const Tensor scale = make({1024}, {1});
    Tensor dl = zeros(logits.shape(), dt), dl64 = zeros(logits.shape(), wide);
    ge::ops::bce_with_logits_backward(logits, 0.f, scale, dl);
    ge::ops::bce_with_logits_backward(logits64, 0.f, scale, dl64);
    expect_close_to_f64("bce_with_logits_backward", dl, dl64, tol);
  }
}

// ------------------------------------------------------------------------------ batchnorm

TEST_CASE("cpu ops: batchnorm running statistics use the unbiased variance") {
  // x (N=2, C=2, H=1, W=2): channel 0 holds {1,2,3,4} (mean 2.5, biased var 1.25, unbiased 5/3),
  // channel 1 holds {0,0,0,4} (mean 1, biased var 3, unbiased 4).
  const Tensor x = make({1, 2, 0, 0, 3, 4, 0, 4}, {2, 2, 1, 2});
  const Tensor gamma = make({2, 1}, {2}), beta = make({0.5, 0}, {2});
  Tensor rm = make({0, 10}, {2}), rv = make({1, 1}, {2});
  Tensor mean = zeros({2}), invstd = zeros({2}), y = zeros(x.shape());
  ge::ops::batchnorm_forward_train(x, gamma, beta, rm, rv, 0.1f, 1e-5f, y, mean, invstd);

  const double m = 0.1f;  // the momentum as the op receives it
  expect_values(mean, {2.5, 1.0}, 1e-7);
  expect_values(invstd, {1 / std::sqrt(1.25 + 1e-5), 1 / std::sqrt(3 + 1e-5)}, 1e-6);
  expect_values(rm, {m * 2.5, (1 - m) * 10 + m * 1.0}, 1e-6);
  expect_values(rv, {(1 - m) + m * 5.0 / 3.0, (1 - m) + m * 4.0}, 1e-6);
  const double i0 = 1 / std::sqrt(1.25 + 1e-5);
  expect_values(y.slice0(0, 1), {2 * (1 - 2.5) * i0 + 0.5, 2 * (2 - 2.5) * i0 + 0.5, -1 / std::sqrt(3 + 1e-5),
                                 -1 / std::sqrt(3 + 1e-5)},
                1e-6);

  SUBCASE("evaluation normalises with the running statistics") {
    Tensor ye = zeros(x.shape());
    ge::ops::batchnorm_forward_eval(x, gamma, beta, rm, rv, 1e-5f, ye);
    const Values r_mean = rm.to_doubles(), r_var = rv.to_doubles();
    expect_values(ye.slice0(0, 1),
                  {2 * (1 - r_mean[0]) / std::sqrt(r_var[0] + 1e-5) + 0.5,
                   2 * (2 - r_mean[0]) / std::sqrt(r_var[0] + 1e-5) + 0.5, (0 - r_mean[1]) / std::sqrt(r_var[1] + 1e-5),
                   (0 - r_mean[1]) / std::sqrt(r_var[1] + 1e-5)},
                  1e-6);
  }
}

TEST_CASE("cpu ops: batchnorm leaves a non-finite channel's running statistics untouched") {
  for (double bad : {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    CAPTURE(bad);
    // channel 1 contains a non-finite value; channel 0 is clean.
    const Tensor x = make({1, 2, 0, bad, 3, 4, 0, 4}, {2, 2, 1, 2});
    Tensor rm = make({0, 7}, {2}), rv = make({1, 3}, {2});
    Tensor mean = zeros({2}), invstd = zeros({2}), y = zeros(x.shape());
    ge::ops::batchnorm_forward_train(x, make({1, 1}, {2}), make({0, 0}, {2}), rm, rv, 0.1f, 1e-5f, y, mean, invstd);
    expect_values(rm.slice0(1, 2), {7});
    expect_values(rv.slice0(1, 2), {3});
    CHECK(rm.to_doubles()[0] == doctest::Approx(0.25).epsilon(1e-6));
    CHECK(std::isfinite(rv.to_doubles()[0]));
  }
}

// ------------------------------------------------------------------------------------ BCE

TEST_CASE("cpu ops: BCE on extreme logits stays finite and exact") {
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    CAPTURE(ge::dtype_name(dt));
    const Tensor logits = make({100, -100}, {2}, dt);
    Tensor loss = zeros({1}), ms = zeros({1});
    // target 1: terms log1p(e^-100) ~ 0 and 100; target 0: terms 100 and ~0. Mean 50 either way.
    for (float target : {1.f, 0.f}) {
      ge::ops::bce_with_logits_forward(logits, target, loss, ms);
      CHECK(loss.item() == doctest::Approx(50.0).epsilon(1e-7));
      CHECK(ms.item() == doctest::Approx(0.5).epsilon(1e-7));
      Tensor d = zeros(logits.shape(), dt);
      ge::ops::bce_with_logits_backward(logits, target, make({65536}, {1}), d);
      const Values g = d.to_doubles();
      for (double v : g) CHECK(std::isfinite(v));
      // (sigmoid(x) - t) * scale / N with sigmoid(100) = 1, sigmoid(-100) ~ 3.7e-44.
      if (target == 1.f) {
        CHECK(g[0] == 0.0);
        CHECK(g[1] == doctest::Approx(-32768.0));
      } else {
        CHECK(g[0] == doctest::Approx(32768.0));
        CHECK(std::abs(g[1]) < 1e-30);
      }
    }
  }
  SUBCASE("a zero logit costs log 2") {
    Tensor loss = zeros({1}), none;
    ge::ops::bce_with_logits_forward(make({0, 0, 0}, {3}), 1.f, loss, none);
    CHECK(loss.item() == doctest::Approx(std::log(2.0)).epsilon(1e-7));
  }
}

// ---------------------------------------------------------------------------- loss scaler

Values scaler_after(Values state, bool overflow, const ge::ops::ScalerConfig& cfg, int steps = 1) {
  Tensor s = make(state, {2});
  const Tensor found_inf = make({overflow ? 1.0 : 0.0}, {1});
  for (int i = 0; i < steps; ++i) ge::ops::loss_scaler_update(s, found_inf, cfg);
  return s.to_doubles();
}

TEST_CASE("cpu ops: dynamic loss scaler follows Apex") {
  const ge::ops::ScalerConfig cfg;
  const double max_scale = 16777216.0, min_scale = 1.52587890625e-05;
  SUBCASE("an overflow halves the scale and restarts the clean-step count") {
    CHECK(scaler_after({65536, 1234}, true, cfg) == Values{32768, 0});
  }
  SUBCASE("2000 clean steps double the scale") {
    CHECK(scaler_after({65536, 0}, false, cfg, 1999) == Values{65536, 1999});
    CHECK(scaler_after({65536, 0}, false, cfg, 2000) == Values{131072, 0});
    CHECK(scaler_after({65536, 0}, false, cfg, 4000) == Values{262144, 0});
  }
  SUBCASE("the scale never grows past 2^24") {
    CHECK(scaler_after({max_scale, 1999}, false, cfg) == Values{max_scale, 0});
  }
  SUBCASE("the scale never falls below min_scale") {
    CHECK(scaler_after({min_scale, 5}, true, cfg) == Values{min_scale, 0});
    CHECK(scaler_after({min_scale * 1.5, 5}, true, cfg) == Values{min_scale, 0});
  }
  SUBCASE("a static scaler never changes") {
    ge::ops::ScalerConfig fixed;
    fixed.dynamic = false;
    CHECK(scaler_after({128, 0}, true, fixed) == Values{128, 0});
    CHECK(scaler_after({128, 1999}, false, fixed, 3) == Values{128, 1999});
  }
  SUBCASE("a custom growth interval") {
    ge::ops::ScalerConfig quick;
    quick.growth_interval = 3;
    CHECK(scaler_after({4, 0}, false, quick, 3) == Values{8, 0});
  }
}

TEST_CASE("cpu ops: unscale_grads unscales accumulates and flags non-finite grads") {
  const Tensor scale = make({4}, {1});
  Tensor found_inf = zeros({1});
  const std::vector<Tensor> src{make({2, 4, -8, 0.5}, {4}, DType::F16), make({16, -1}, {2}, DType::BF16)};
  std::vector<Tensor> dst{make({1, 1, 1, 1}, {4}), make({0, 0}, {2})};

  ge::ops::unscale_grads(src, dst, scale, found_inf, /*accumulate=*/false);
  expect_values(dst[0], {0.5, 1, -2, 0.125});
  expect_values(dst[1], {4, -0.25});
  CHECK(found_inf.item() == 0.0);

  ge::ops::unscale_grads(src, dst, scale, found_inf, /*accumulate=*/true);
  expect_values(dst[0], {1, 2, -4, 0.25});
  expect_values(dst[1], {8, -0.5});
  CHECK(found_inf.item() == 0.0);

  for (double bad : {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    CAPTURE(bad);
    Tensor flag = zeros({1});
    std::vector<Tensor> out{zeros({3})};
    ge::ops::unscale_grads({make({1, bad, 2}, {3}, DType::F16)}, out, scale, flag, false);
    CHECK(flag.item() == 1.0);
    // A later clean call never clears the flag: it gathers all losses of one step.
    ge::ops::unscale_grads({make({1, 1, 1}, {3}, DType::F16)}, out, scale, flag, true);
    CHECK(flag.item() == 1.0);
  }
}

TEST_CASE("cpu ops: scale_inplace multiplies in fp32 and rounds once") {
  Tensor a = make({1, 2, 3}, {3});
  ge::ops::scale_inplace(a, 0.5f);
  expect_values(a, {0.5, 1, 1.5});
  Tensor h = make({3, 1000}, {2}, DType::F16);
  ge::ops::scale_inplace(h, 1.f / 3.f);
  const float f0 = 3.f * (1.f / 3.f), f1 = 1000.f * (1.f / 3.f);
  expect_values(h, {ge::half_bits_to_float(ge::float_to_half_bits(f0)),
                    ge::half_bits_to_float(ge::float_to_half_bits(f1))});
}

// ----------------------------------------------------------------------------------- Adam

TEST_CASE("cpu ops: Adam follows PyTorch over three steps") {
  ge::ops::AdamConfig cfg;
  cfg.lr = 0.01f;  // large enough that the updates dwarf fp32 rounding of the parameters
  const Values p0{1.0, -0.5, 0.25};
  const std::vector<Values> grads{{0.1, -0.2, 0.0}, {0.3, 0.05, 1e-3}, {-0.1, 0.4, -2.0}};

  std::vector<Tensor> params{make(p0, {3})}, m{zeros({3})}, v{zeros({3})};
  std::vector<Tensor> copies{zeros({3}, DType::F16)};
  Tensor step = zeros({1});
  const Tensor no_skip = zeros({1});

  // The reference: the documented formula in double, step by step.
  Values p = p0, mr(3, 0.0), vr(3, 0.0);
  const double b1 = cfg.beta1, b2 = cfg.beta2, lr = cfg.lr, eps = cfg.eps;
  for (int t = 1; t <= 3; ++t) {
    const Values& g = grads[static_cast<size_t>(t - 1)];
    for (size_t i = 0; i < 3; ++i) {
      mr[i] = b1 * mr[i] + (1 - b1) * g[i];
      vr[i] = b2 * vr[i] + (1 - b2) * g[i] * g[i];
      const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
      p[i] -= lr / bc1 * mr[i] / (std::sqrt(vr[i]) / std::sqrt(bc2) + eps);
    }
    ge::ops::adam_step(params, {make(g, {3})}, m, v, step, no_skip, cfg, copies);
    CAPTURE(t);
    CHECK(step.item() == t);
    expect_values(params[0], p, 1e-6);
    expect_values(m[0], mr, 1e-6);
    expect_values(v[0], vr, 1e-6);
    if (t == 1) {
      // The first step moves every parameter with a nonzero grad by lr against the grad's sign.
      expect_values(params[0], {1.0 - 0.01, -0.5 + 0.01, 0.25}, 1e-6);
    }
    // The half copy is the fp32 master rounded once to f16.
    const Values master = params[0].to_doubles(), copy = copies[0].to_doubles();
    for (size_t i = 0; i < 3; ++i)
      CHECK(copy[i] == ge::half_bits_to_float(ge::float_to_half_bits(static_cast<float>(master[i]))));
  }
}

TEST_CASE("cpu ops: Adam with skip set changes nothing - half copies are rounded (bf16)") {
  ge::ops::AdamConfig cfg;
  std::vector<Tensor> params{make({0.3, -0.7}, {2}), make({1.1, 2.2, 3.3, 4.4}, {1, 2, 1, 2})};
  std::vector<Tensor> grads{make({0.5, 0.5}, {2}), make({-1, 1, -1, 1}, {1, 2, 1, 2})};
  std::vector<Tensor> m{make({0.1, 0.2}, {2}), make({0, 0, 0, 0}, {4})};
  std::vector<Tensor> v{make({0.01, 0.02}, {2}), make({1, 1, 1, 1}, {4})};
  std::vector<Tensor> copies{zeros({2}, DType::BF16), zeros({1, 2, 1, 2}, DType::BF16, kNHWC)};
  Tensor step = make({7}, {1});

  auto snapshot = [&] {
    std::vector<Values> s;
    for (const auto* list : {&params, &m, &v, &copies})
      for (const Tensor& t : *list) s.push_back(t.to_doubles());
    s.push_back(step.to_doubles());
    return s;
  };
  const auto before = snapshot();
  ge::ops::adam_step(params, grads, m, v, step, make({1}, {1}), cfg, copies);
  CHECK(snapshot() == before);

  ge::ops::adam_step(params, grads, m, v, step, zeros({1}), cfg, copies);
  CHECK(step.item() == 8);
  for (size_t k = 0; k < params.size(); ++k) {
    const Values master = params[k].to_doubles(), copy = copies[k].to_doubles();
    CHECK(master != before[k]);
    for (size_t i = 0; i < master.size(); ++i)
      CHECK(copy[i] == ge::bf16_bits_to_float(ge::float_to_bf16_bits(static_cast<float>(master[i]))));
  }
}


}  // namespace
