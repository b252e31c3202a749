// The reference for ops::conv2d_activation_*: the two ops in sequence, which is what the fused
// GPU kernels must reproduce.
#include "core/backend.h"

namespace ge {
namespace cpu {

void conv2d_activation_forward(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p,
                               const ops::FusedActivation& act) {
  cpu::conv2d_forward(x, w, y, p);
  cpu::activation_forward(act.kind, y, y, act.negative_slope);
}

void conv2d_activation_backward_filter(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dw,
                                       const Conv2dParams& p, const ops::FusedActivation& act, float beta) {
  Tensor dpre = Tensor::empty(dy.shape(), dy.dtype(), dy.device(), dy.format());
  cpu::activation_backward(act.kind, y, dy, dpre, act.negative_slope);
  cpu::conv2d_backward_filter(x, dpre, dw, p, beta);
}

void conv2d_activation_backward_data(const Tensor& y, const Tensor& dy, const Tensor& w, Tensor& dx,
                                     const Conv2dParams& p, const ops::FusedActivation& act,
                                     const ops::InputActivation* input) {
  Tensor dpre = Tensor::empty(dy.shape(), dy.dtype(), dy.device(), dy.format());
  cpu::activation_backward(act.kind, y, dy, dpre, act.negative_slope);
  cpu::conv2d_backward_data(dpre, w, dx, p);
  if (input) cpu::activation_backward(input->act.kind, input->x, dx, dx, input->act.negative_slope);
}

// A transposed convolution's forward is conv2d's backward-data (ops.h).
void conv_transpose2d_activation_forward(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p,
                                         const ops::FusedActivation& act) {
  cpu::conv2d_backward_data(x, w, y, p);
  cpu::activation_forward(act.kind, y, y, act.negative_slope);
}

}  // namespace cpu
}  // namespace ge
