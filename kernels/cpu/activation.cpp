// CPU reference for ReLU, LeakyReLU and Tanh. Element-wise: values are computed in fp32 from
// f32/f16/bf16 inputs (PyTorch's opmath), in fp64 for f64, and rounded once on store.
// The backward passes read the OUTPUT y (all an in-place activation keeps):
//   relu  dx = y > 0 ? dy : 0        leaky  dx = y > 0 ? dy : dy * slope
//   tanh  dx = dy * (1 - y * y)
// For LeakyReLU with a positive slope, y > 0 exactly when x > 0, so reading y is exact.
// Every element is read before it is written, so y may alias x and dx may alias dy.
#include <cmath>

#include "core/backend.h"
#include "cpu/cpu_util.h"

namespace ge {
namespace cpu {
namespace {

template <class Real>
Real forward_one(ops::Activation a, Real x, Real slope) {
  switch (a) {
    case ops::Activation::ReLU: return std::isnan(x) ? x : (x > Real(0) ? x : Real(0));  // NaN propagates, as clamp_min
    case ops::Activation::LeakyReLU: return x > Real(0) ? x : x * slope;
    case ops::Activation::Tanh: return std::tanh(x);
  }
  return x;
}

template <class Real>
Real backward_one(ops::Activation a, Real y, Real dy, Real slope) {
  switch (a) {
    case ops::Activation::ReLU: return y > Real(0) ? dy : Real(0);
    case ops::Activation::LeakyReLU: return y > Real(0) ? dy : dy * slope;
    case ops::Activation::Tanh: return dy * (Real(1) - y * y);
  }
  return dy;
}

// Applies fn(i) over all logical indices, split into contiguous chunks across threads.
template <class Fn>
void for_all_elements(int64_t n, const Fn& fn) {
  const int64_t chunk = 1 << 14;
  parallel_for((n + chunk - 1) / chunk, [&](int64_t b) {
    for (int64_t i = b * chunk; i < std::min(n, (b + 1) * chunk); ++i) fn(i);
  });
}

template <class Real>
void forward_as(ops::Activation a, const Tensor& x, Tensor& y, float slope) {
  for_all_elements(x.numel(), [&](int64_t i) {
    const Real v = static_cast<Real>(load_logical(x, i));
    store_logical(y, i, static_cast<double>(forward_one<Real>(a, v, static_cast<Real>(slope))));
  });
}

template <class Real>
void backward_as(ops::Activation a, const Tensor& y, const Tensor& dy, Tensor& dx, float slope) {
  for_all_elements(y.numel(), [&](int64_t i) {
    const Real yv = static_cast<Real>(load_logical(y, i));
    const Real g = static_cast<Real>(load_logical(dy, i));
    store_logical(dx, i, static_cast<double>(backward_one<Real>(a, yv, g, static_cast<Real>(slope))));
  });
}

}  // namespace

void activation_forward(ops::Activation a, const Tensor& x, Tensor& y, float negative_slope) {
  require_cpu_floating(x, "activation x");
  require_cpu_floating(y, "activation y");
  require_same_shape(x, y, "x", "y");
  if (computes_in_double(x.dtype()))
    forward_as<double>(a, x, y, negative_slope);
  else
    forward_as<float>(a, x, y, negative_slope);
}

void activation_backward(ops::Activation a, const Tensor& y, const Tensor& dy, Tensor& dx, float negative_slope) {
  require_cpu_floating(y, "activation y");
  require_cpu_floating(dy, "activation dy");
  require_cpu_floating(dx, "activation dx");
  require_same_shape(y, dy, "y", "dy");
  require_same_shape(y, dx, "y", "dx");
  if (computes_in_double(dy.dtype()))
    backward_as<double>(a, y, dy, dx, negative_slope);
  else
    backward_as<float>(a, y, dy, dx, negative_slope);
}

}  // namespace cpu
}  // namespace ge
