// Convolutions whose kernel covers the whole unpadded input, so the output is one pixel per
// image: G's first layer, a transposed convolution of the 1x1 noise into 4x4 maps, whose
// forward is such a convolution's backward-data and whose weight gradient its backward-filter.
// Both are one GEMM over the batch (the weight's row for output channel k, C x R x S values,
// lies in memory as an image's input does, in either layout). cuDNN runs the forward with a
// dgrad kernel far slower than the GEMM (docs/performance.md).
#pragma once
#include "core/backend.h"
#include "cuda/conv/conv_paths.h"

namespace ge {
namespace gpu {

// Whether the shapes are such a convolution's (x the input or its gradient, y the output's).
bool conv_gemm_applies(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p);
// dx = backward_data(dy, w) with dy (N, K, 1, 1) and dx (N, C, R, S) shaped as w (K, C, R, S),
// pad 0, half dtypes; true when it ran (cuBLAS), false to leave it to cuDNN.
bool conv2d_backward_data_gemm(const Tensor& dy, const Tensor& w, Tensor& dx, const Conv2dParams& p);

// dw = beta * dw + backward_filter(x, dy) for the same shapes (x shaped as dw); true when it ran.
bool conv2d_backward_filter_gemm(const Tensor& x, const Tensor& dy, Tensor& dw, const Conv2dParams& p, float beta);

}  // namespace gpu
}  // namespace ge
