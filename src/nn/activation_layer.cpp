#include "ganengine/nn.h"

namespace ge::nn {

Tensor ActivationLayer::forward(const Tensor& x, bool) {
  if (fused_) return x;  // the BatchNorm2d before has applied it
  Tensor y = x;          // in place, like ReLU(True): the conv/BN output it overwrites is not needed again
  ops::activation_forward(kind_, x, y, slope_);
  saved_y_ = y;
  return y;
}

Tensor ActivationLayer::backward(Tensor dy, bool, bool) {
  if (fused_) return dy;
  GE_CHECK(saved_y_.defined(), "activation backward before forward");
  Tensor dx = dy;  // in place: the incoming gradient is not used again
  ops::activation_backward(kind_, saved_y_, dy, dx, slope_);
  saved_y_ = Tensor();  // released after use (Conv2d::backward says why)
  return dx;
}

std::unique_ptr<Layer> ActivationLayer::twin() const {
  auto t = std::make_unique<ActivationLayer>(*this);
  t->saved_y_ = Tensor();
  return t;
}

std::string ActivationLayer::describe() const {
  switch (kind_) {
    case ops::Activation::ReLU: return "ReLU(inplace=True)";
    case ops::Activation::LeakyReLU: return "LeakyReLU(negative_slope=0.2, inplace=True)";
    case ops::Activation::Tanh: return "Tanh()";
  }
  return "?";
}

}  // namespace ge::nn
