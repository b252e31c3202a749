// The emulated FP8 convolutions (ops::fp8_conv2d_*), on the CPU reference, with scales set by the
// delayed-scaling recipe from the operands' own amaxes (one step recorded, then the scale it gives):
//  - bitwise the reference convolution of operands quantized and dequantized here, element by
//    element with core/fp8_bits.h;
//  - within the FP8 error bound of the f32 convolution of the unquantized operands. Each operand
//    element a is represented with an error e(a) <= u |a| + d / scale + 2^-21 |a| (u = 2^-4 for
//    E4M3, 2^-3 for E5M2: half a unit in the last place; d = half the smallest subnormal, 2^-10 and
//    2^-17, where values fall below the normal range; 2^-21 for the f32 products and scale_inv),
//    and a pass P is bilinear, so for operands a, b
//      |P(a^, b^) - P(a, b)| <= P(e(a), |b| + e(b)) + P(|a|, e(b)) + 2^-22 P(|a| + e(a), |b| + e(b)),
//    the last term for the two f32 roundings of the results; P of nonnegative tensors is formed in
//    float64 by the reference. That bound is checked element by element.
// Then the formats and result dtypes the ops take.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/fp8_bits.h"
#include "ganengine/fp8.h"
#include "ganengine/ops.h"
#include "support/test_util.h"

using namespace ge;
using namespace ge::test;

namespace {

const Device kCpu = Device::cpu();
using Pass = std::function<void(const Tensor& a, const Tensor& b, Tensor& out)>;

struct Operand {
  Tensor values;      // f32
  Fp8Scaling state;   // after one recorded step: its scale is fp8_max / max |values|
  Fp8Tensor encoded;  // values quantized with that scale
};

Operand operand(const Shape& shape, Fp8Format f, double magnitude, MemoryFormat format = MemoryFormat::NCHW) {
  Operand o;
  o.values = random_tensor(shape, DType::F32, kCpu, format, -magnitude, magnitude);
  const Fp8DelayedScaling recipe;
  o.state = make_fp8_scaling(f, recipe, kCpu);
  ops::fp8_quantized(o.values, o.state);  // records this step's amax
  ops::fp8_update_scales({o.state}, recipe);
  o.encoded = ops::fp8_quantized(o.values, o.state);
  return o;
}

float scale_of(const Operand& o) { return static_cast<float>(o.state.scale.item()); }

// The operand quantized and dequantized here: the f32 product, the exact cast, the code's value
// times scale_inv in f32.
Tensor explicitly_dequantized(const Operand& o) {
  const float scale = scale_of(o), scale_inv = static_cast<float>(o.state.scale_inv.item());
  std::vector<double> v = o.values.to_doubles();
  for (double& x : v) {
    volatile float product = static_cast<float>(x) * scale;
    volatile float back = fp8_bits_to_float(float_to_fp8_bits(product, o.state.format), o.state.format) * scale_inv;
    x = back;
  }
  return Tensor::from_doubles(v, o.values.shape(), DType::F32, kCpu, o.values.format());
}

Tensor f64_of(const std::vector<double>& v, const Shape& shape) { return Tensor::from_doubles(v, shape, DType::F64); }

Tensor magnitudes(const Operand& o) {
  std::vector<double> v = o.values.to_doubles();
  for (double& x : v) x = std::fabs(x);
  return f64_of(v, o.values.shape());
}

// e(a) of the header, element by element.
Tensor representation_error(const Operand& o) {
  const bool e4m3 = o.state.format == Fp8Format::E4M3;
  const double u = e4m3 ? 0x1p-4 : 0x1p-3, d = (e4m3 ? 0x1p-10 : 0x1p-17) / scale_of(o);
  std::vector<double> v = o.values.to_doubles();
  for (double& x : v) x = (u + 0x1p-21) * std::fabs(x) + d;
  return f64_of(v, o.values.shape());
}

Tensor sum(const Tensor& a, const Tensor& b) {
  std::vector<double> x = a.to_doubles();
  const std::vector<double> y = b.to_doubles();
  for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
  return f64_of(x, a.shape());
}

// The bound of the header for pass P over operands a, b, with out_shape the result's shape.
std::vector<double> error_bound(const Pass& pass, const Operand& a, const Operand& b, const Shape& out_shape) {
  const Tensor abs_a = magnitudes(a), abs_b = magnitudes(b);
  const Tensor err_a = representation_error(a), err_b = representation_error(b);
  const Tensor b_plus = sum(abs_b, err_b), a_plus = sum(abs_a, err_a);
  Tensor t1 = Tensor::zeros(out_shape, DType::F64), t2 = t1.clone(), t3 = t1.clone();
  pass(err_a, b_plus, t1);
  pass(abs_a, err_b, t2);
  pass(a_plus, b_plus, t3);
  std::vector<double> bound = t1.to_doubles();
  const std::vector<double> v2 = t2.to_doubles(), v3 = t3.to_doubles();
  for (size_t i = 0; i < bound.size(); ++i) bound[i] += v2[i] + 0x1p-22 * v3[i];
  return bound;
}

void expect_within_bound(const Tensor& fp8_result, const Tensor& f32_result, const std::vector<double>& bound) {
  const std::vector<double> got = fp8_result.to_doubles(), exact = f32_result.to_doubles();
  REQUIRE(got.size() == bound.size());
  // Shown with a failure only: a few percent is usual, more where outputs cancel to near zero.
  INFO("relative error against the f32 convolution: ", rel_error(got, exact));
  int64_t outside = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - exact[i]) <= bound[i]) && ++outside <= 3)
      FAIL_CHECK("element ", i, ": ", got[i], " against ", exact[i], ", bound ", bound[i]);
  CHECK(outside == 0);
}

struct Case {
  Shape x, w;
  Conv2dParams p;
  MemoryFormat format;
};

// D's stride-2 layers at a small batch, and an odd stride-1 shape in NHWC.
const std::vector<Case> kCases = {{{4, 16, 16, 16}, {32, 16, 4, 4}, {2, 1}, MemoryFormat::NCHW},
                                  {{3, 5, 9, 7}, {6, 5, 3, 3}, {1, 1}, MemoryFormat::NHWC},
                                  {{2, 8, 4, 4}, {1, 8, 4, 4}, {1, 0}, MemoryFormat::NCHW}};

Shape output_shape(const Case& c) {
  return {c.x[0], c.w[0], conv_out_size(c.x[2], c.w[2], c.p.stride, c.p.pad),
          conv_out_size(c.x[3], c.w[3], c.p.stride, c.p.pad)};
}

}  // namespace

namespace cpu_checks {

TEST_CASE("cpu ops: fp8_conv2d_forward is the reference convolution of the quantized operands") {
  for (const Case& c : kCases) {
    CAPTURE(shape_str(c.x));
    CAPTURE(shape_str(c.w));
    const Operand x = operand(c.x, Fp8Format::E4M3, 2.0, c.format), w = operand(c.w, Fp8Format::E4M3, 0.05);
    const Shape ys = output_shape(c);
    Tensor y = poisoned_like(Tensor::empty(ys, DType::F32), kCpu);
    ops::fp8_conv2d_forward(x.encoded, w.encoded, y, c.p);
    Tensor want = Tensor::empty(ys, DType::F32);
    ops::conv2d_forward(explicitly_dequantized(x), explicitly_dequantized(w), want, c.p);
    CHECK(same_bytes(y, want));

    Tensor unquantized = Tensor::empty(ys, DType::F32);
    ops::conv2d_forward(x.values, w.values, unquantized, c.p);
    const Pass forward = [&](const Tensor& a, const Tensor& b, Tensor& out) { ops::conv2d_forward(a, b, out, c.p); };
    expect_within_bound(y, unquantized, error_bound(forward, x, w, ys));
  }
}

TEST_CASE("cpu ops: fp8_conv2d_backward_data is the reference backward of an E5M2 gradient") {
  for (const Case& c : kCases) {
    CAPTURE(shape_str(c.x));
    CAPTURE(shape_str(c.w));
    const Shape ys = output_shape(c);
    const Operand dy = operand(ys, Fp8Format::E5M2, 1e-3, c.format), w = operand(c.w, Fp8Format::E4M3, 0.05);
    Tensor dx = poisoned_like(Tensor::empty(c.x, DType::F32, kCpu, c.format), kCpu);
    ops::fp8_conv2d_backward_data(dy.encoded, w.encoded, dx, c.p);
    Tensor want = Tensor::empty(c.x, DType::F32, kCpu, c.format);
    ops::conv2d_backward_data(explicitly_dequantized(dy), explicitly_dequantized(w), want, c.p);
    CHECK(same_bytes(dx, want));

    Tensor unquantized = Tensor::empty(c.x, DType::F32, kCpu, c.format);
    ops::conv2d_backward_data(dy.values, w.values, unquantized, c.p);
    const Pass backward_data = [&](const Tensor& a, const Tensor& b, Tensor& out) {
      ops::conv2d_backward_data(a, b, out, c.p);
    };
    expect_within_bound(dx, unquantized, error_bound(backward_data, dy, w, c.x));
  }
}

TEST_CASE("cpu ops: fp8_conv2d_backward_filter is the reference filter gradient overwritten or accumulated") {
  for (const Case& c : kCases)
    for (float beta : {0.0f, 1.0f}) {
      CAPTURE(shape_str(c.x));
      CAPTURE(shape_str(c.w));
      CAPTURE(beta);
      const Shape ys = output_shape(c);
      const Operand x = operand(c.x, Fp8Format::E4M3, 2.0, c.format), dy = operand(ys, Fp8Format::E5M2, 1e-3);
      const Tensor start = random_tensor(c.w, DType::F32);
      Tensor dw = start.clone();
      ops::fp8_conv2d_backward_filter(x.encoded, dy.encoded, dw, c.p, beta);
      Tensor want = start.clone();
      ops::conv2d_backward_filter(explicitly_dequantized(x), explicitly_dequantized(dy), want, c.p, beta);
      CHECK(same_bytes(dw, want));

      if (beta != 0.0f) continue;
      Tensor unquantized = Tensor::empty(c.w, DType::F32);
      ops::conv2d_backward_filter(x.values, dy.values, unquantized, c.p);
      const Pass backward_filter = [&](const Tensor& a, const Tensor& b, Tensor& out) {
        ops::conv2d_backward_filter(a, b, out, c.p);
      };
      expect_within_bound(dw, unquantized, error_bound(backward_filter, x, dy, c.w));
    }
}

TEST_CASE("cpu ops: fp8 convolutions take E4M3 weights and f32 or f16 results") {
  const Case& c = kCases[0];
  const Shape ys = output_shape(c);
  const Operand x = operand(c.x, Fp8Format::E4M3, 1.0), w = operand(c.w, Fp8Format::E4M3, 0.05);
  const Operand x5 = operand(c.x, Fp8Format::E5M2, 1.0), w5 = operand(c.w, Fp8Format::E5M2, 0.05);
  const Operand y4 = operand(ys, Fp8Format::E4M3, 1.0);
  Tensor y = Tensor::empty(ys, DType::F32), dx = Tensor::empty(c.x, DType::F32), dw = Tensor::empty(c.w, DType::F32);
  CHECK_THROWS_WITH_AS(ops::fp8_conv2d_forward(x.encoded, w5.encoded, y, c.p),
                       doctest::Contains("fp8_conv2d_forward: w must be E4M3, is E5M2"), Error);
  CHECK_THROWS_WITH_AS(ops::fp8_conv2d_backward_data(x.encoded, w5.encoded, dx, c.p),
                       doctest::Contains("fp8_conv2d_backward_data: w must be E4M3"), Error);
  Tensor bf16_y = Tensor::empty(ys, DType::BF16);
  CHECK_THROWS_WITH_AS(ops::fp8_conv2d_forward(x.encoded, w.encoded, bf16_y, c.p),
                       doctest::Contains("the result must be f32 or f16"), Error);
  Tensor half_dw = Tensor::empty(c.w, DType::F16), bf16_dw = Tensor::empty(c.w, DType::BF16);
  CHECK_THROWS_WITH_AS(ops::fp8_conv2d_backward_filter(x5.encoded, y4.encoded, bf16_dw, c.p),
                       doctest::Contains("the result must be f32 or f16, got"), Error);
  CHECK_THROWS_WITH_AS(ops::fp8_conv2d_backward_filter(x5.encoded, y4.encoded, half_dw, c.p, 1.0f),
                       doctest::Contains("an f16 result is overwritten (beta 0)"), Error);
  // The other operand's format is the layer's choice: an E5M2 forward input is a transposed
  // convolution's backward-data, an E4M3 backward-data input its forward.
  ops::fp8_conv2d_forward(x5.encoded, w.encoded, y, c.p);
  ops::fp8_conv2d_backward_data(y4.encoded, w.encoded, dx, c.p);
  ops::fp8_conv2d_backward_filter(x5.encoded, y4.encoded, dw, c.p);
  // An f16 result is the f32 result rounded once.
  Tensor half_y = Tensor::empty(ys, DType::F16), rounded = Tensor::empty(ys, DType::F16);
  ops::fp8_conv2d_forward(x.encoded, w.encoded, y, c.p);
  ops::fp8_conv2d_forward(x.encoded, w.encoded, half_y, c.p);
  ops::cast(y, rounded);
  CHECK(same_bytes(half_y, rounded));
  Tensor rounded_dw = Tensor::empty(c.w, DType::F16);
  ops::fp8_conv2d_backward_filter(x.encoded, y4.encoded, dw, c.p);
  ops::fp8_conv2d_backward_filter(x.encoded, y4.encoded, half_dw, c.p);
  ops::cast(dw, rounded_dw);
  CHECK(same_bytes(half_dw, rounded_dw));
}

}  // namespace cpu_checks

// Weight fragments are what the GPU's register-resident FP8 kernels read; the CPU has none.
TEST_CASE("cpu ops: no FP8 pass reads weight fragments on the CPU - laying them out there is refused") {
  const Shape w{128, 64, 4, 4};
  for (ops::Fp8WeightPass pass : {ops::Fp8WeightPass::Forward, ops::Fp8WeightPass::BackwardData})
    CHECK_FALSE(ops::fp8_weight_pass_reads_fragments(w, pass, kCpu));
  const Tensor codes = Tensor::zeros(w, DType::U8, kCpu, MemoryFormat::NHWC);
  const Tensor fragments = Tensor::empty({codes.numel()}, DType::U8, kCpu);
  CHECK_THROWS_WITH_AS(ops::fp8_weight_fragments_all({{codes, ops::Fp8WeightPass::BackwardData, fragments}}),
                       doctest::Contains("no FP8 backward-data kernel reads a weight"), Error);
  CHECK_THROWS_WITH_AS(ops::fp8_weight_fragments_all({{Tensor::zeros(w, DType::F16, kCpu, MemoryFormat::NHWC),
                                                       ops::Fp8WeightPass::Forward, fragments}}),
                       doctest::Contains("the codes must be a weight's u8 NHWC codes"), Error);
  ops::fp8_weight_fragments_all({});  // nothing to lay out
  // The emulated passes ignore fragments: a pass handed some gives the bytes it gives without.
  const Case& c = kCases[0];
  const Operand x = operand(c.x, Fp8Format::E4M3, 1.0), wq = operand(c.w, Fp8Format::E4M3, 0.05);
  Fp8Tensor with = wq.encoded;
  with.fragments = Tensor::zeros({wq.encoded.data.numel()}, DType::U8, kCpu);
  Tensor y = Tensor::empty(output_shape(c), DType::F32), y_with = Tensor::empty(output_shape(c), DType::F32);
  ops::fp8_conv2d_forward(x.encoded, wq.encoded, y, c.p);
  ops::fp8_conv2d_forward(x.encoded, with, y_with, c.p);
  CHECK(same_bytes(y, y_with));
}
