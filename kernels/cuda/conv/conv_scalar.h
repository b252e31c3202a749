// Hand-written passes for a convolution whose output is one value per image: one output
// channel, a kernel as large as the input, no padding (D's last layer, 512 x 4 x 4 -> 1). It is
// a dot product per image, and cuDNN reaches Tensor Cores for it only with the output padded to
// 8 channels, which would cost the layer a padding or trimming copy on every pass (11 of them per
// training step) besides the convolutions. Half precision (f16/bf16); x and w in one memory
// format, in which each image of x and the filter are then laid out alike.
#pragma once
#include "core/backend.h"
#include "cuda/conv/conv_paths.h"

namespace ge {
namespace gpu {

// Each returns true when it ran, false (having done nothing) when the shapes are not such a
// convolution's; the callers then run cuDNN. Every sum runs in fp32 in a fixed order.
bool conv_scalar_applies(ConvPass pass, const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p);
bool conv2d_forward_scalar(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p);
bool conv2d_backward_data_scalar(const Tensor& dy, const Tensor& w, Tensor& dx, const Conv2dParams& p);
bool conv2d_backward_filter_scalar(const Tensor& x, const Tensor& dy, Tensor& dw, const Conv2dParams& p, float beta);

}  // namespace gpu
}  // namespace ge
