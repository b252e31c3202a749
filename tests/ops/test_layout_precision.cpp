// The CPU reference ops (convolution, BatchNorm, activations, BCE) across layouts and precisions:
// NHWC gives NCHW's results bit for bit, and f16 and bf16 match f64 on the same rounded inputs.
#include <string>
#include <utility>

#include "ops/op_test_util.h"

namespace {

// ------------------------------------------------------------------------------------ CPU reference

namespace cpu_checks {

using namespace ge::test::cpu_ref;

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

// Half precision vs f64.

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
      ge::ops::batchnorm_forward_eval(xb64, gamma64, beta64, convert(rm, wide, kNCHW), convert(rv, wide, kNCHW), 1e-5f,
                                      ye64);
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

}  // namespace cpu_checks

}  // namespace
