// The filter gradient of the DCGAN's 64 -> 128-channel 4x4 stride-2 layer on 32 x 32 inputs (D's
// second layer at 64x64 images, and G's fourth layer's with x and dy swapped) from FP8 codes, on Hopper's warpgroup MMA
// (sm90a/conv_fp8_wgrad.cu).
#pragma once
#include "ganengine/fp8.h"
#include "ganengine/ops.h"
#include "ganengine/tensor.h"

namespace ge {
namespace gpu {

// dw = beta * dw + backward_filter(x, dy), the sums of code products multiplied by both
// scale_invs: x and dy each E4M3 or E5M2, u8 NHWC codes with their scale_invs on dw's device, dw
// NHWC (128 x 64 x 4 x 4) f32 with beta 0 or 1 or f16 with beta 0 (the f32 result rounded once), on
// a compute capability 9.0 device; false (nothing run) for anything else.
bool fp8_conv2d_backward_filter_wgmma(const Fp8Tensor& x, const Fp8Tensor& dy, Tensor& dw, const Conv2dParams& p,
                                      float beta);
// Whether fp8_conv2d_backward_filter_wgmma runs operands of these shapes on `device` (the formats,
// dtypes, layouts and alignment above).
bool fp8_conv2d_backward_filter_takes(const Shape& x, const Shape& dy, const Shape& dw, const Conv2dParams& p,
                                      Device device);

}  // namespace gpu
}  // namespace ge
