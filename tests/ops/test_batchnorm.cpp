// BatchNorm (training and eval forward, backward, running statistics): gradient check, PyTorch
// goldens, the CPU reference's own cases, and the GPU against the CPU (fused with an
// activation: test_fused_batchnorm.cpp).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ops/op_test_util.h"

namespace {

// ---------------------------------------------------------------------------------- gradient checks

namespace gradient_checks {

using namespace ge::test::gradcheck;

// BatchNorm's saved statistics are f32 in the op contract: the check calls the CPU reference
// directly (ge::cpu) with f64 tensors there, so that no fp32 rounding hides in the loss.
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
      ge::cpu::batchnorm_forward_train(f64(xv, xs, format), f64(gv, cs), f64(bv, cs), rm, rv, 0.1f, 1e-5f, y, mean,
                                       invstd, nullptr, nullptr);
      return weighted_sum(y, weights);
    };

    Tensor xt = f64(x, xs, format), gt = f64(gamma, cs);
    Tensor rm = f64_zeros(cs), rv = f64_zeros(cs), mean = f64_zeros(cs), invstd = f64_zeros(cs);
    Tensor y = f64_zeros(xs, format);
    ge::cpu::batchnorm_forward_train(xt, gt, f64(beta, cs), rm, rv, 0.1f, 1e-5f, y, mean, invstd, nullptr, nullptr);
    Tensor dx = f64_zeros(xs, format), dgamma = f64_zeros(cs), dbeta = f64_zeros(cs);
    ge::cpu::batchnorm_backward(xt, f64(weights, xs, format), gt, mean, invstd, dx, dgamma, dbeta, nullptr, nullptr,
                                nullptr, nullptr, nullptr);

    expect_same_gradient("batchnorm dL/dx", dx.to_doubles(),
                         numeric_gradient(x, [&](const Values& v) { return loss(v, gamma, beta); }));
    expect_same_gradient("batchnorm dL/dgamma", dgamma.to_doubles(),
                         numeric_gradient(gamma, [&](const Values& v) { return loss(x, v, beta); }));
    expect_same_gradient("batchnorm dL/dbeta", dbeta.to_doubles(),
                         numeric_gradient(beta, [&](const Values& v) { return loss(x, gamma, v); }));
  }
}

}  // namespace gradient_checks

// ---------------------------------------------------------------------------------- PyTorch goldens

namespace golden_checks {

using namespace ge;
using namespace ge::test;
using namespace ge::test::goldens;

void batchnorm_cases(Device d, MemoryFormat fmt) {
  const auto& f = golden("golden_ops.safetensors");
  for (int i = 0; i < 3; ++i) {
    const std::string pre = "bn" + std::to_string(i) + ".";
    Tensor x = golden_on(f, pre + "x", d, fmt), dy = golden_on(f, pre + "dy", d, fmt);
    Tensor gamma = golden_on(f, pre + "gamma", d), beta = golden_on(f, pre + "beta", d);
    Tensor rm = golden_on(f, pre + "running_mean", d), rv = golden_on(f, pre + "running_var", d);
    const int64_t C = x.dim(1);
    Tensor y = like(x), dx = like(x), y_eval = like(x);
    Tensor mean = Tensor::empty({C}, DType::F32, d), invstd = Tensor::empty({C}, DType::F32, d);
    Tensor dgamma = like(gamma), dbeta = like(beta);
    for (Tensor* t : {&y, &dx, &y_eval, &mean, &invstd, &dgamma, &dbeta}) poison(*t);
    ops::batchnorm_forward_eval(x, gamma, beta, rm, rv, 1e-5f, y_eval);
    expect_close(y_eval, f, pre + "y_eval");
    ops::batchnorm_forward_train(x, gamma, beta, rm, rv, 0.1f, 1e-5f, y, mean, invstd);
    ops::batchnorm_backward(x, dy, gamma, mean, invstd, dx, dgamma, dbeta);
    expect_close(y, f, pre + "y");
    expect_close(rm, f, pre + "running_mean_after");
    expect_close(rv, f, pre + "running_var_after");
    expect_close(dx, f, pre + "dx");
    expect_close(dgamma, f, pre + "dgamma");
    expect_close(dbeta, f, pre + "dbeta");
  }
}

TEST_CASE("golden/cpu: batchnorm matches PyTorch") {
  batchnorm_cases(Device::cpu(), MemoryFormat::NCHW);
  batchnorm_cases(Device::cpu(), MemoryFormat::NHWC);
}

TEST_CASE("golden/gpu: batchnorm matches PyTorch") {
  GE_REQUIRE_GPU();
  batchnorm_cases(Device::cuda(0), MemoryFormat::NCHW);
  batchnorm_cases(Device::cuda(0), MemoryFormat::NHWC);
}

}  // namespace golden_checks

// ------------------------------------------------------------------------------------ CPU reference

namespace cpu_checks {

using namespace ge::test::cpu_ref;

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
  expect_values(
      y.slice0(0, 1),
      {2 * (1 - 2.5) * i0 + 0.5, 2 * (2 - 2.5) * i0 + 0.5, -1 / std::sqrt(3 + 1e-5), -1 / std::sqrt(3 + 1e-5)}, 1e-6);

  SUBCASE("evaluation normalises with the running statistics") {
    Tensor ye = zeros(x.shape());
    ge::ops::batchnorm_forward_eval(x, gamma, beta, rm, rv, 1e-5f, ye);
    const Values r_mean = rm.to_doubles(), r_var = rv.to_doubles();
    expect_values(
        ye.slice0(0, 1),
        {2 * (1 - r_mean[0]) / std::sqrt(r_var[0] + 1e-5) + 0.5, 2 * (2 - r_mean[0]) / std::sqrt(r_var[0] + 1e-5) + 0.5,
         (0 - r_mean[1]) / std::sqrt(r_var[1] + 1e-5), (0 - r_mean[1]) / std::sqrt(r_var[1] + 1e-5)},
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

}  // namespace cpu_checks

// ---------------------------------------------------------------------------------- GPU against CPU

namespace gpu_checks {

using namespace ge::test::gpu_ref;

// (5,16,8,8) is a plain case; (3,7,5,3) has odd sizes; (16,8,32,32) is big enough to be
// cut into several partial sums per channel (64); (64,40,4,4) has more channels than one NHWC
// tile; (37,128,16,16) two 64-channel tiles of 37 partial sums; (8,64,64,64) 128 partial sums
// and (150,64,16,16) 150: the merge takes four partials at a time, then the rest one by one.
const Shape kBatchNormShapes[] = {{5, 16, 8, 8},     {3, 7, 5, 3},    {16, 8, 32, 32},  {64, 40, 4, 4},
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
          ge::ops::batchnorm_forward_train(gpu(x), gpu(gamma), gpu(beta), rmg, rvg, momentum, eps, yg, meang, invstdg);
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

}  // namespace gpu_checks

}  // namespace
