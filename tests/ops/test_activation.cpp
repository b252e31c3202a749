// Activations (ReLU, LeakyReLU, Tanh), forward and backward: gradient check, PyTorch goldens,
// and the GPU against the CPU, special values included.
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "ops/op_test_util.h"

namespace {

// ---------------------------------------------------------------------------------- gradient checks

namespace gradient_checks {

using namespace ge::test::gradcheck;

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

}  // namespace gradient_checks

// ---------------------------------------------------------------------------------- PyTorch goldens

namespace golden_checks {

using namespace ge;
using namespace ge::test;
using namespace ge::test::goldens;

void activation_cases(Device d, MemoryFormat fmt) {
  const auto& f = golden("golden_ops.safetensors");
  const std::pair<const char*, ops::Activation> acts[] = {
      {"relu", ops::Activation::ReLU}, {"leaky_relu", ops::Activation::LeakyReLU}, {"tanh", ops::Activation::Tanh}};
  for (auto& [name, a] : acts) {
    const std::string pre = std::string(name) + ".";
    Tensor x = golden_on(f, pre + "x", d, fmt), dy = golden_on(f, pre + "dy", d, fmt);
    Tensor y = like(x), dx = like(x);
    poison(y);
    poison(dx);
    ops::activation_forward(a, x, y, 0.2f);
    ops::activation_backward(a, y, dy, dx, 0.2f);
    expect_close(y, f, pre + "y");
    expect_close(dx, f, pre + "dx");
  }
}

TEST_CASE("golden/cpu: activations match PyTorch") { activation_cases(Device::cpu(), MemoryFormat::NCHW); }

// With BCE's GPU golden (bce_cases: test_bce.cpp).
TEST_CASE("golden/gpu: activations and BCE match PyTorch") {
  GE_REQUIRE_GPU();
  activation_cases(Device::cuda(0), MemoryFormat::NHWC);
  bce_cases(Device::cuda(0));
}

}  // namespace golden_checks

// ---------------------------------------------------------------------------------- GPU against CPU

namespace gpu_checks {

using namespace ge::test::gpu_ref;

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

}  // namespace gpu_checks

}  // namespace
