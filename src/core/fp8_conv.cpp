// Emulated FP8 convolutions (ops.h): each FP8 operand dequantized to f32 (ops::fp8_dequantize),
// then the ordinary convolution pass on those values in f32 without TF32, whose inputs are then
// exact FP8 values times a scale_inv. What an FP8 Tensor Core convolution must agree with, up to
// the order of its fp32 sums and where it applies the descale.
#include "ganengine/fp8.h"
#include "ganengine/ops.h"

namespace ge {
namespace ops {
namespace {

const char* format_name(Fp8Format f) { return f == Fp8Format::E4M3 ? "E4M3" : "E5M2"; }

// Transformer Engine's HYBRID assignment: forward operands E4M3, output gradients E5M2.
void require_format(const char* op, const char* operand, const Fp8Tensor& t, Fp8Format want) {
  GE_CHECK(t.format == want, op, ": ", operand, " must be ", format_name(want), ", is ", format_name(t.format));
}

void require_f32(const char* op, const Tensor& out) {
  GE_CHECK(out.dtype() == DType::F32, op, ": the result must be f32, got ", out.str());
}

Conv2dParams without_tf32(const Conv2dParams& p) {
  Conv2dParams exact = p;
  exact.allow_tf32 = false;
  return exact;
}

}  // namespace

void fp8_conv2d_forward(const Fp8Tensor& x, const Fp8Tensor& w, Tensor& y, const Conv2dParams& p) {
  require_format("fp8_conv2d_forward", "x", x, Fp8Format::E4M3);
  require_format("fp8_conv2d_forward", "w", w, Fp8Format::E4M3);
  require_f32("fp8_conv2d_forward", y);
  conv2d_forward(fp8_dequantized(x), fp8_dequantized(w), y, without_tf32(p));
}

void fp8_conv2d_backward_data(const Fp8Tensor& dy, const Fp8Tensor& w, Tensor& dx, const Conv2dParams& p) {
  require_format("fp8_conv2d_backward_data", "dy", dy, Fp8Format::E5M2);
  require_format("fp8_conv2d_backward_data", "w", w, Fp8Format::E4M3);
  require_f32("fp8_conv2d_backward_data", dx);
  conv2d_backward_data(fp8_dequantized(dy), fp8_dequantized(w), dx, without_tf32(p));
}

void fp8_conv2d_backward_filter(const Fp8Tensor& x, const Fp8Tensor& dy, Tensor& dw, const Conv2dParams& p,
                                float beta) {
  require_format("fp8_conv2d_backward_filter", "x", x, Fp8Format::E4M3);
  require_format("fp8_conv2d_backward_filter", "dy", dy, Fp8Format::E5M2);
  require_f32("fp8_conv2d_backward_filter", dw);
  conv2d_backward_filter(fp8_dequantized(x), fp8_dequantized(dy), dw, without_tf32(p), beta);
}

}  // namespace ops
}  // namespace ge
