// The reference for ops::conv2d_activation_*: the two ops in sequence, which is what the fused
// GPU kernels must reproduce.
#include <cstdint>

#include "core/backend.h"
#include "cpu/cpu_util.h"

namespace ge {
namespace cpu {
namespace {

// y as activation_backward takes it: the output itself, or its signs where y came as codes
// (conv2d_activation_forward's codes_only; ReLU's and LeakyReLU's gradients look only at y > 0).
Tensor activation_output(const Tensor& y, const Tensor& dy) {
  return y.dtype() == DType::U8 ? activation_signs_of_codes(y, dy.dtype()) : y;
}

}  // namespace

void mark_activation_codes(const Tensor& y, Tensor& codes) {
  uint8_t* c = codes.data_as<uint8_t>();
  for (int64_t i = 0; i < y.numel(); ++i)
    if (!(load_as_double(y.data(), y.dtype(), i) > 0.0)) c[i] |= 0x80u;
}

Tensor activation_signs_of_codes(const Tensor& codes, DType dtype) {
  Tensor y = Tensor::empty(codes.shape(), dtype, codes.device(), codes.format());
  const uint8_t* c = codes.data_as<uint8_t>();
  for (int64_t i = 0; i < codes.numel(); ++i) store_from_double(y.data(), dtype, i, (c[i] & 0x80u) ? -1.0 : 1.0);
  return y;
}

void conv2d_activation_forward(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p,
                               const ops::FusedActivation& act) {
  cpu::conv2d_forward(x, w, y, p);
  cpu::activation_forward(act.kind, y, y, act.negative_slope);
}

void conv2d_activation_backward_filter(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dw,
                                       const Conv2dParams& p, const ops::FusedActivation& act, float beta) {
  Tensor dpre = Tensor::empty(dy.shape(), dy.dtype(), dy.device(), dy.format());
  cpu::activation_backward(act.kind, activation_output(y, dy), dy, dpre, act.negative_slope);
  cpu::conv2d_backward_filter(x, dpre, dw, p, beta);
}

void conv2d_activation_backward_data(const Tensor& y, const Tensor& dy, const Tensor& w, Tensor& dx,
                                     const Conv2dParams& p, const ops::FusedActivation& act,
                                     const ops::InputActivation* input) {
  Tensor dpre = Tensor::empty(dy.shape(), dy.dtype(), dy.device(), dy.format());
  cpu::activation_backward(act.kind, activation_output(y, dy), dy, dpre, act.negative_slope);
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
