// The forwards from FP8 codes, on Hopper's warpgroup MMA, of the DCGAN's 64 -> 128-channel 4x4
// stride-2 layer on 32 x 32 inputs (D's second layer at 64x64 images, and so G's fourth layer's
// backward-data) with the phase kernels' structure (sm90a/conv_phase_fprop.cu), and of its
// 128 -> 256-channel layer on 16 x 16 inputs (D's third, G's third layer's backward-data) with the
// weights resident in registers (sm90a/conv_resident_fprop.cu).
#pragma once
#include "ganengine/fp8.h"
#include "ganengine/ops.h"
#include "ganengine/tensor.h"

namespace ge {
namespace gpu {

// y = conv2d_forward(x, w) * x.scale_inv * w.scale_inv rounded once to half: x E4M3 (or E5M2, as
// G's backward-data), w E4M3, u8 NHWC codes with their scale_invs on y's device, y f16 NHWC, all
// 16-byte aligned, at most 65535 images, on a compute capability 9.0 device; false (nothing run)
// for anything else.
bool fp8_conv2d_forward_phases(const Fp8Tensor& x, const Fp8Tensor& w, Tensor& y, const Conv2dParams& p);
// Whether fp8_conv2d_forward_phases runs operands of these shapes on `device` (the formats, dtypes,
// layouts and alignment above).
bool fp8_conv2d_forward_phases_takes(const Shape& x, const Shape& w, const Shape& y, const Conv2dParams& p,
                                     Device device);

// The 128 -> 256-channel layer's forward, under the same conditions as fp8_conv2d_forward_phases.
bool fp8_conv2d_forward_resident(const Fp8Tensor& x, const Fp8Tensor& w, Tensor& y, const Conv2dParams& p);
bool fp8_conv2d_forward_resident_takes(const Shape& x, const Shape& w, const Shape& y, const Conv2dParams& p,
                                       Device device);

}  // namespace gpu
}  // namespace ge
