// CPU reference for BCEWithLogits (mean reduction) against a constant target t.
// Forward, in double:  loss = mean(max(x,0) - x*t + log1p(exp(-|x|))), the form that never
// overflows for large |x|; mean_sigmoid = mean(sigmoid(x)).
// Backward: dlogits = (sigmoid(x) - t) * (scale / N), evaluated in fp32 in exactly that order
// (PyTorch's kernel for f32/f16/bf16 logits), in double for f64 logits; rounded once to the
// logits' dtype. The loss tensors are f32 by contract; any floating dtype is accepted so that
// gradient checks can read the loss at full precision.
#include <cmath>

#include "core/backend.h"
#include "cpu/cpu_util.h"

namespace ge {
namespace cpu {
namespace {

// 1 / (1 + exp(-x)) without overflow for either sign of x.
template <class Real>
Real sigmoid(Real x) {
  if (x >= Real(0)) return Real(1) / (Real(1) + std::exp(-x));
  const Real e = std::exp(x);
  return e / (Real(1) + e);
}

template <class Real>
void backward_as(const Tensor& logits, float target, double scale, Tensor& dlogits) {
  const Real factor = static_cast<Real>(scale) / static_cast<Real>(logits.numel());
  const Real t = static_cast<Real>(target);
  for (int64_t i = 0; i < logits.numel(); ++i) {
    const Real x = static_cast<Real>(load_logical(logits, i));
    store_logical(dlogits, i, static_cast<double>((sigmoid(x) - t) * factor));
  }
}

}  // namespace

void bce_with_logits_forward(const Tensor& logits, float target, Tensor& loss, Tensor& mean_sigmoid) {
  require_cpu_floating(logits, "bce logits");
  require_cpu_floating(loss, "bce loss");
  GE_CHECK(loss.numel() == 1, "bce loss must hold one value, got ", loss.str());
  GE_CHECK(logits.numel() > 0, "bce logits are empty");
  const double t = target;
  double loss_sum = 0.0, sigmoid_sum = 0.0;
  for (int64_t i = 0; i < logits.numel(); ++i) {
    const double x = load_logical(logits, i);
    loss_sum += std::max(x, 0.0) - x * t + std::log1p(std::exp(-std::abs(x)));
    sigmoid_sum += sigmoid(x);
  }
  const double n = static_cast<double>(logits.numel());
  store_from_double(loss.data(), loss.dtype(), 0, loss_sum / n);
  if (mean_sigmoid.defined()) {
    require_cpu_floating(mean_sigmoid, "bce mean_sigmoid");
    GE_CHECK(mean_sigmoid.numel() == 1, "bce mean_sigmoid must hold one value, got ", mean_sigmoid.str());
    store_from_double(mean_sigmoid.data(), mean_sigmoid.dtype(), 0, sigmoid_sum / n);
  }
}

void bce_with_logits_backward(const Tensor& logits, float target, const Tensor& scale, Tensor& dlogits) {
  require_cpu_floating(logits, "bce logits");
  require_cpu_floating(scale, "bce scale");
  require_cpu_floating(dlogits, "bce dlogits");
  GE_CHECK(scale.numel() == 1, "bce scale must hold one value, got ", scale.str());
  GE_CHECK(dlogits.numel() == logits.numel(), "bce dlogits ", dlogits.str(), " does not match logits ", logits.str());
  const double s = load_as_double(scale.data(), scale.dtype(), 0);
  if (computes_in_double(logits.dtype()))
    backward_as<double>(logits, target, s, dlogits);
  else
    backward_as<float>(logits, target, s, dlogits);
}

}  // namespace cpu
}  // namespace ge
