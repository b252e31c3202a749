// Binary cross-entropy with logits (loss, mean sigmoid, scaled backward): gradient check,
// PyTorch goldens, the CPU reference on extreme logits, and the GPU against the CPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "ops/op_test_util.h"

namespace ge::test::goldens {

// Declared in op_test_util.h: "golden/gpu: activations and BCE match PyTorch" (test_activation.cpp)
// runs these cases too.
void bce_cases(Device d) {
  const auto& f = golden("golden_ops.safetensors");
  int cases = 0;
  for (int i = 0; i < 4; ++i)
    for (int t = 0; t < 2; ++t)
      for (int s : {1, 1024}) {
        const std::string pre = "bce" + std::to_string(i) + "_t" + std::to_string(t) + "_s" + std::to_string(s) + ".";
        Tensor logits = golden_on(f, pre + "logits", d);
        Tensor loss = Tensor::empty({1}, DType::F32, d), ms = Tensor::empty({1}, DType::F32, d), dl = like(logits);
        Tensor scale = Tensor::from_doubles({double(s)}, {1}, DType::F32, d);
        for (Tensor* p : {&loss, &ms, &dl}) poison(*p);
        ops::bce_with_logits_forward(logits, float(t), loss, ms);
        ops::bce_with_logits_backward(logits, float(t), scale, dl);
        expect_close(loss, f, pre + "loss");
        expect_close(ms, f, pre + "mean_sigmoid");
        expect_close(dl, f, pre + "dlogits");
        ++cases;
      }
  CHECK(cases == 16);
}

}  // namespace ge::test::goldens

namespace {

// ---------------------------------------------------------------------------------- gradient checks

namespace gradient_checks {

using namespace ge::test::gradcheck;

// BCE's loss is f32 in the op contract: the check calls the CPU reference directly (ge::cpu)
// with an f64 loss, so that no fp32 rounding hides in it.
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

}  // namespace gradient_checks

// ---------------------------------------------------------------------------------- PyTorch goldens

namespace golden_checks {

using namespace ge;
using namespace ge::test;
using namespace ge::test::goldens;

// The GPU's golden runs with the activations' (test_activation.cpp).
TEST_CASE("golden/cpu: BCE with logits matches PyTorch") { bce_cases(Device::cpu()); }

}  // namespace golden_checks

// ------------------------------------------------------------------------------------ CPU reference

namespace cpu_checks {

using namespace ge::test::cpu_ref;

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

}  // namespace cpu_checks

// ---------------------------------------------------------------------------------- GPU against CPU

namespace gpu_checks {

using namespace ge::test::gpu_ref;

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

}  // namespace gpu_checks

}  // namespace
