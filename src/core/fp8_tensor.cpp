// FP8 scaling states and quantized tensors (ganengine/fp8.h), made from the ops of ops.h: nothing
// here computes an element itself.
#include "ganengine/fp8.h"
#include "ganengine/ops.h"

namespace ge {

Fp8Scaling make_fp8_scaling(Fp8Format format, const Fp8DelayedScaling& recipe, Device device) {
  GE_CHECK(recipe.amax_history_len >= 1, "make_fp8_scaling: amax_history_len ", recipe.amax_history_len,
           " (expected at least 1)");
  Fp8Scaling s;
  s.format = format;
  s.amax_history = Tensor::zeros({recipe.amax_history_len}, DType::F32, device);
  s.scale = Tensor::from_floats({1.0f}, {1}, DType::F32, device);
  s.scale_inv = Tensor::from_floats({1.0f}, {1}, DType::F32, device);
  return s;
}

namespace ops {

Fp8Tensor fp8_quantized(const Tensor& x, const Fp8Scaling& state) {
  Fp8Tensor q{Tensor::empty(x.shape(), DType::U8, x.device(), x.format()), state.scale_inv, state.format};
  Tensor amax = state.current_amax();
  fp8_quantize(x, state.scale, state.format, q.data, amax);
  return q;
}

Tensor fp8_dequantized(const Fp8Tensor& q) {
  Tensor y = Tensor::empty(q.data.shape(), DType::F32, q.data.device(), q.data.format());
  fp8_dequantize(q.data, q.scale_inv, q.format, y);
  return y;
}

}  // namespace ops
}  // namespace ge
