// Backward-data of the 8-channel layers' convolution into a dx holding only an image's 1 or 3
// channels (conv_8ch_dgrad_narrow.cu): D's first layer's input gradient in G's pass through D and
// G's last layer's forward, as the layers run them.
#pragma once
#include "conv_8ch.h"

namespace ge {
namespace gpu {

// dx = backward_data(dy', w) as conv2d_backward_data_8ch describes it, for dx with 1 or 3
// channels, dy with 64 channels and a multiple of 8 up to 64 pixels wide. The caller has checked
// everything else conv2d_backward_data_8ch asks of the tensors. True when it ran, false when the
// shape is not one it takes.
bool conv2d_backward_data_narrow(const Tensor& dy, const Tensor& w, Tensor& dx, const ops::FusedActivation* act,
                                 const Tensor* y_act, const DxActivation* dx_act);

}  // namespace gpu
}  // namespace ge
