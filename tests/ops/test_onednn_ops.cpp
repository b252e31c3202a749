// The fast CPU backend (kernels/onednn) against the CPU reference (kernels/cpu), op by op: both
// read the same rounded inputs; the fast op writes into outputs poisoned with NaN (an element it
// forgot fails the comparison) and must say it ran (a silent fall-back would compare the
// reference with itself). Agreement: 1e-5 relative to the reference's norm in f32, the dtype's
// tolerance in f16 and bf16 (test_util.h: tolerance_for).
#ifdef GE_WITH_ONEDNN
#include <doctest/doctest.h>

#include "core/backend.h"
#include "core/cpu_backend.h"
#include "onednn/fast_ops.h"
#include "onednn/onednn_context.h"
#include "ops/op_test_util.h"
#include "support/test_util.h"

namespace ge::test {
namespace {

using gpu_ref::ConvCase;
using ops::Activation;

const Device kCpu = Device::cpu();
constexpr DType kDTypes[] = {DType::F32, DType::F16, DType::BF16};
constexpr MemoryFormat kFormats[] = {MemoryFormat::NCHW, MemoryFormat::NHWC};

std::string tag(DType dt, MemoryFormat f) { return std::string(dtype_name(dt)) + " " + format_name(f); }

Tensor random_like(const Shape& s, DType dt, MemoryFormat f = MemoryFormat::NCHW, double lo = -1, double hi = 1) {
  return random_tensor(s, dt, kCpu, s.size() == 4 ? f : MemoryFormat::NCHW, lo, hi);
}
Tensor poisoned(const Tensor& like) { return poisoned_like(like, kCpu); }
Tensor zeros_like(const Tensor& like) { return Tensor::zeros(like.shape(), like.dtype(), kCpu, like.format()); }

void expect_close(const std::string& what, const Tensor& fast, const Tensor& ref) {
  const double err = rel_error(fast, ref), tol = tolerance_for(ref.dtype());
  INFO(what, ": ", fast.str(), " relative error ", err, " vs tolerance ", tol);
  CHECK(err <= tol);
}

// DCGAN's convolutions (4x4, stride 2, pad 1 both ways; D's last 4x4 valid one), a 3x3 "same"
// one, and odd sizes whose right padding differs from the left.
const ConvCase kConvCases[] = {
    {2, 3, 16, 16, 8, 4, 4, 2, 1}, {2, 8, 8, 8, 16, 4, 4, 2, 1}, {3, 16, 4, 4, 1, 4, 4, 1, 0},
    {2, 5, 6, 6, 7, 3, 3, 1, 1},   {2, 5, 7, 9, 6, 3, 3, 2, 1},
};

// Runs body under each half-precision compute mode the CPU offers: bf16 widened to f32 always,
// and native bf16 where the CPU has it.
template <class Body>
void for_each_bf16_mode(const Body& body) {
  for (bool native : {false, true}) {
    if (native && !cpu_has_native_bf16()) continue;
    onednn::set_native_bf16(native);
    CAPTURE(native);
    body();
  }
  onednn::set_native_bf16(false);
}

}  // namespace

TEST_CASE("onednn ops: conv2d forward and backward-data and backward-filter match the reference") {
  for_each_bf16_mode([] {
    for (const ConvCase& c : kConvCases)
      for (DType dt : kDTypes)
        for (MemoryFormat f : kFormats) {
          CAPTURE(c.c);
          CAPTURE(c.h);
          CAPTURE(c.stride);
          const std::string t = tag(dt, f);
          const Conv2dParams p{c.stride, c.pad};
          const Tensor x = random_like({c.n, c.c, c.h, c.w}, dt, f);
          const Tensor w = random_like({c.k, c.c, c.r, c.s}, dt, f);
          const Tensor dy = random_like(c.y_shape(), dt, f);

          Tensor y_ref = zeros_like(dy);
          cpu::conv2d_forward(x, w, y_ref, p);
          Tensor y = poisoned(dy);
          REQUIRE(onednn::conv2d_forward(x, w, y, p));
          expect_close("forward " + t, y, y_ref);

          Tensor dx_ref = zeros_like(x);
          cpu::conv2d_backward_data(dy, w, dx_ref, p);
          Tensor dx = poisoned(x);
          REQUIRE(onednn::conv2d_backward_data(dy, w, dx, p));
          expect_close("backward-data " + t, dx, dx_ref);

          // beta 0 overwrites (NaN in dw is never read); beta 1 accumulates into dw.
          Tensor dw_ref = zeros_like(w);
          cpu::conv2d_backward_filter(x, dy, dw_ref, p, 0.f);
          Tensor dw = poisoned(w);
          REQUIRE(onednn::conv2d_backward_filter(x, dy, dw, p, 0.f));
          expect_close("backward-filter " + t, dw, dw_ref);

          const Tensor before = random_like(w.shape(), dt, f);
          Tensor acc_ref = before.clone();
          cpu::conv2d_backward_filter(x, dy, acc_ref, p, 1.f);
          Tensor acc = before.clone();
          REQUIRE(onednn::conv2d_backward_filter(x, dy, acc, p, 1.f));
          expect_close("backward-filter beta 1 " + t, acc, acc_ref);
        }
  });
}

TEST_CASE("onednn ops: fused convolutions and the transposed forward match the reference") {
  const ConvCase c{2, 8, 8, 8, 16, 4, 4, 2, 1};
  const Conv2dParams p{c.stride, c.pad};
  for (DType dt : kDTypes)
    for (Activation a : {Activation::ReLU, Activation::LeakyReLU, Activation::Tanh}) {
      const std::string t = std::string(dtype_name(dt)) + " " + ops::activation_name(a);
      const ops::FusedActivation act{a, 0.2f};
      const Tensor x = random_like({c.n, c.c, c.h, c.w}, dt);
      const Tensor w = random_like({c.k, c.c, c.r, c.s}, dt);
      const Tensor dy = random_like(c.y_shape(), dt);

      Tensor y_ref = zeros_like(dy);
      cpu::conv2d_activation_forward(x, w, y_ref, p, act);
      Tensor y = poisoned(dy);
      REQUIRE(onednn::conv2d_activation_forward(x, w, y, p, act));
      expect_close("conv+act forward " + t, y, y_ref);

      Tensor dw_ref = zeros_like(w);
      cpu::conv2d_activation_backward_filter(x, y_ref, dy, dw_ref, p, act, 0.f);
      Tensor dw = poisoned(w);
      REQUIRE(onednn::conv2d_activation_backward_filter(x, y_ref, dy, dw, p, act, 0.f));
      expect_close("conv+act backward-filter " + t, dw, dw_ref);

      // The input's own activation (LeakyReLU) folded into backward-data.
      const ops::InputActivation input{{Activation::LeakyReLU, 0.2f}, random_like(x.shape(), dt)};
      Tensor dx_ref = zeros_like(x);
      cpu::conv2d_activation_backward_data(y_ref, dy, w, dx_ref, p, act, &input);
      Tensor dx = poisoned(x);
      REQUIRE(onednn::conv2d_activation_backward_data(y_ref, dy, w, dx, p, act, &input));
      expect_close("conv+act backward-data " + t, dx, dx_ref);

      // G's layers: the transposed convolution (weight (Cin, Cout, R, S)) and its activation.
      const Tensor tw = random_like({c.k, c.c, c.r, c.s}, dt);
      Tensor ty_ref = zeros_like(x);
      cpu::conv_transpose2d_activation_forward(dy, tw, ty_ref, p, act);
      Tensor ty = poisoned(x);
      REQUIRE(onednn::conv_transpose2d_activation_forward(dy, tw, ty, p, act));
      expect_close("convT+act forward " + t, ty, ty_ref);
    }
}

TEST_CASE("onednn ops: batchnorm training and eval and backward match the reference") {
  const Shape s{4, 6, 5, 7};
  for (DType dt : kDTypes)
    for (int fused = 0; fused < 3; ++fused) {
      const ops::FusedActivation act{fused == 1 ? Activation::ReLU : Activation::LeakyReLU, 0.2f};
      const ops::FusedActivation* a = fused == 0 ? nullptr : &act;
      const std::string t =
          std::string(dtype_name(dt)) + (a ? std::string(" + ") + ops::activation_name(act.kind) : "");
      const DType pdt = DType::F32;  // BatchNorm keeps its parameters in f32 at every opt level
      const Tensor x = random_like(s, dt, MemoryFormat::NCHW, -2.0, 3.0);
      const Tensor gamma = random_like({6}, pdt, MemoryFormat::NCHW, 0.5, 1.5);
      const Tensor beta = random_like({6}, pdt);
      const Tensor rm0 = random_like({6}, pdt), rv0 = random_like({6}, pdt, MemoryFormat::NCHW, 0.5, 2.0);

      Tensor rm_ref = rm0.clone(), rv_ref = rv0.clone(), y_ref = zeros_like(x);
      Tensor mean_ref = Tensor::zeros({6}, DType::F32), invstd_ref = Tensor::zeros({6}, DType::F32);
      cpu::batchnorm_forward_train(x, gamma, beta, rm_ref, rv_ref, 0.1f, 1e-5f, y_ref, mean_ref, invstd_ref, a,
                                   nullptr);
      Tensor rm = rm0.clone(), rv = rv0.clone(), y = poisoned(x);
      Tensor mean = poisoned(mean_ref), invstd = poisoned(invstd_ref);
      REQUIRE(onednn::batchnorm_forward_train(x, gamma, beta, rm, rv, 0.1f, 1e-5f, y, mean, invstd, a, nullptr));
      expect_close("train y " + t, y, y_ref);
      expect_close("save_mean " + t, mean, mean_ref);
      expect_close("save_invstd " + t, invstd, invstd_ref);
      expect_close("running_mean " + t, rm, rm_ref);
      expect_close("running_var " + t, rv, rv_ref);

      Tensor ye_ref = zeros_like(x);
      cpu::batchnorm_forward_eval(x, gamma, beta, rv0, rv0, 1e-5f, ye_ref, a);
      Tensor ye = poisoned(x);
      REQUIRE(onednn::batchnorm_forward_eval(x, gamma, beta, rv0, rv0, 1e-5f, ye, a));
      expect_close("eval y " + t, ye, ye_ref);

      const Tensor dy = random_like(s, dt);
      Tensor dx_ref = zeros_like(x), dg_ref = zeros_like(gamma), db_ref = zeros_like(gamma);
      cpu::batchnorm_backward(x, dy, gamma, mean_ref, invstd_ref, dx_ref, dg_ref, db_ref, a, &y_ref, &beta, nullptr,
                              nullptr);
      Tensor dx = poisoned(x), dg = poisoned(gamma), db = poisoned(gamma);
      REQUIRE(onednn::batchnorm_backward(x, dy, gamma, mean_ref, invstd_ref, dx, dg, db, a, &y_ref, &beta, nullptr,
                                         nullptr));
      expect_close("backward dx " + t, dx, dx_ref);
      expect_close("backward dgamma " + t, dg, dg_ref);
      expect_close("backward dbeta " + t, db, db_ref);
    }
}

TEST_CASE("onednn ops: activations and casts and scaling match the reference") {
  for (DType dt : kDTypes)
    for (Activation a : {Activation::ReLU, Activation::LeakyReLU, Activation::Tanh}) {
      const std::string t = std::string(dtype_name(dt)) + " " + ops::activation_name(a);
      const Tensor x = random_like({3, 4, 5, 6}, dt, MemoryFormat::NCHW, -3, 3);
      Tensor y_ref = zeros_like(x);
      cpu::activation_forward(a, x, y_ref, 0.2f);
      Tensor y = poisoned(x);
      REQUIRE(onednn::activation_forward(a, x, y, 0.2f));
      expect_close("forward " + t, y, y_ref);

      const Tensor dy = random_like(x.shape(), dt);
      Tensor dx_ref = zeros_like(x);
      cpu::activation_backward(a, y_ref, dy, dx_ref, 0.2f);
      Tensor dx = poisoned(x);
      REQUIRE(onednn::activation_backward(a, y_ref, dy, dx, 0.2f));
      expect_close("backward " + t, dx, dx_ref);
    }
  for (DType from : kDTypes)
    for (DType to : kDTypes)
      for (MemoryFormat f : kFormats) {
        const std::string t = std::string(dtype_name(from)) + " to " + tag(to, f);
        const Tensor src = random_like({2, 3, 4, 5}, from, MemoryFormat::NCHW, -100, 100);
        Tensor ref = Tensor::zeros(src.shape(), to, kCpu, f);
        cpu::cast(src, ref);
        Tensor out = poisoned(ref);
        REQUIRE(onednn::cast(src, out));
        INFO("cast ", t);
        CHECK(same_bytes(out, ref));  // one correctly rounded conversion: bitwise
      }
  for (DType dt : kDTypes) {
    const Tensor t = random_like({1000}, dt);
    Tensor ref = t.clone(), out = t.clone();
    cpu::scale_inplace(ref, 0.375f);
    REQUIRE(onednn::scale_inplace(out, 0.375f));
    INFO("scale_inplace ", dtype_name(dt));
    CHECK(same_bytes(out, ref));
  }
}

TEST_CASE("onednn ops: unscale_grads and adam_step are bitwise the reference") {
  for (DType half : {DType::F16, DType::BF16})
    for (bool accumulate : {false, true})
      for (bool overflow : {false, true}) {
        CAPTURE(accumulate);
        CAPTURE(overflow);
        std::vector<Tensor> src{random_like({8, 3, 4, 4}, half, MemoryFormat::NCHW, -1000, 1000),
                                random_like({77}, half)};
        if (overflow) store_from_double(src[1].data(), half, 5, std::numeric_limits<double>::infinity());
        const std::vector<Tensor> dst0{random_like(src[0].shape(), DType::F32), random_like({77}, DType::F32)};
        const Tensor scale = Tensor::from_doubles({1024.0}, {1}, DType::F32);
        std::vector<Tensor> ref{dst0[0].clone(), dst0[1].clone()}, out{dst0[0].clone(), dst0[1].clone()};
        Tensor found_ref = Tensor::zeros({1}, DType::F32), found = Tensor::zeros({1}, DType::F32);
        cpu::unscale_grads(src, ref, scale, found_ref, accumulate);
        REQUIRE(onednn::unscale_grads(src, out, scale, found, accumulate));
        CHECK(found.item() == found_ref.item());
        CHECK(found.item() == (overflow ? 1.0 : 0.0));
        for (size_t i = 0; i < ref.size(); ++i) CHECK(same_bytes(out[i], ref[i]));
      }

  for (DType state : kDTypes)
    for (bool with_half_copy : {false, true}) {
      if (with_half_copy && state != DType::F32) continue;
      CAPTURE(dtype_name(state));
      CAPTURE(with_half_copy);
      const Shape shapes[] = {{16, 8, 4, 4}, {16}, {1001}};
      std::vector<Tensor> p, g, m, v, h;
      for (const Shape& s : shapes) {
        p.push_back(random_like(s, state));
        g.push_back(random_like(s, DType::F32));
        m.push_back(random_like(s, state, MemoryFormat::NCHW, -0.1, 0.1));
        v.push_back(random_like(s, state, MemoryFormat::NCHW, 0.0, 0.01));
        if (with_half_copy) h.push_back(Tensor::zeros(s, DType::F16));
      }
      auto clones = [](const std::vector<Tensor>& ts) { return gpu_ref::clones(ts, kCpu); };
      std::vector<Tensor> p2 = clones(p), m2 = clones(m), v2 = clones(v), h2 = clones(h);
      Tensor step = Tensor::from_doubles({3.0}, {1}, DType::F32), step2 = step.clone();
      const Tensor skip = Tensor::zeros({1}, DType::F32);
      const ops::AdamConfig cfg;
      for (int k = 0; k < 2; ++k) {
        cpu::adam_step(p, g, m, v, step, skip, cfg, h, nullptr);
        REQUIRE(onednn::adam_step(p2, g, m2, v2, step2, skip, cfg, h2, nullptr));
      }
      CHECK(step2.item() == step.item());
      for (size_t i = 0; i < p.size(); ++i) {
        CHECK(same_bytes(p2[i], p[i]));
        CHECK(same_bytes(m2[i], m[i]));
        CHECK(same_bytes(v2[i], v[i]));
        if (with_half_copy) CHECK(same_bytes(h2[i], h[i]));
      }
    }
}

TEST_CASE("onednn ops: what the fast backend does not take is left to the reference") {
  // f64 (the gradient checks' dtype) and synchronised BatchNorm: false, nothing written.
  const Tensor x = random_like({2, 3, 6, 6}, DType::F64), w = random_like({4, 3, 3, 3}, DType::F64);
  Tensor y = poisoned(Tensor::zeros({2, 4, 4, 4}, DType::F64));
  CHECK_FALSE(onednn::conv2d_forward(x, w, y, {1, 0}));
  CHECK(std::isnan(y.to_doubles()[0]));
  const Tensor xf = random_like({2, 3, 6, 6}, DType::F32), c = random_like({3}, DType::F32);
  Tensor rm = c.clone(), rv = c.clone(), yf = poisoned(xf), sm = poisoned(c), si = poisoned(c);
  ops::BatchNormSync sync;
  CHECK_FALSE(onednn::batchnorm_forward_train(xf, c, c, rm, rv, 0.1f, 1e-5f, yf, sm, si, nullptr, &sync));
  CHECK(std::isnan(yf.to_doubles()[0]));
}

}  // namespace ge::test
#endif  // GE_WITH_ONEDNN
