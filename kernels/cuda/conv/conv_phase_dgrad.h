// The backward-data of the DCGAN's 128 -> 64-channel 4x4 stride-2 layer on 16 x 16 dy (D's
// second layer at 64x64 images, and so G's fourth layer's forward), phase by phase on Hopper's
// warpgroup MMA (sm90a/conv_phase_dgrad.cu).
#pragma once
#include <initializer_list>

#include "ganengine/fp8.h"
#include "ganengine/ops.h"
#include "ganengine/tensor.h"

namespace ge {
namespace gpu {

// dx = backward_data(dy, w) when the shapes are exactly those (f16 NHWC, 16-byte aligned) on a
// compute capability 9.0 device; false (nothing run) otherwise. With `moments`, also dx's
// per-channel moments as the BatchNorm after G's layer takes them
// (ops::conv_transpose2d_forward_moments): a (3, splits, 64) f32 tensor of each part's count,
// mean and sum of squared deviations, of the values as rounded to half.
bool conv2d_backward_data_phases_applies(const Tensor& dy, const Tensor& w, const Tensor& dx, const Conv2dParams& p);
bool conv2d_backward_data_phases(const Tensor& dy, const Tensor& w, Tensor& dx, const Conv2dParams& p,
                                 Tensor* moments = nullptr);

// The same with FP8 operands (O4): dy E5M2 (or E4M3, as G's forward), w E4M3, u8 codes with their
// scale_invs on dx's device, dx f16: each sum of code products multiplied by both scale_invs, then
// rounded once to half; `moments` as above. False (nothing run) for any other shapes, formats or
// dtypes.
bool fp8_conv2d_backward_data_phases(const Fp8Tensor& dy, const Fp8Tensor& w, Tensor& dx, const Conv2dParams& p,
                                     Tensor* moments = nullptr);
// Whether fp8_conv2d_backward_data_phases runs operands of these shapes on `device` (codes and dx
// NHWC and 16-byte aligned, as every allocation is; the formats and dtypes above).
bool fp8_conv2d_backward_data_phases_takes(const Shape& dy, const Shape& w, const Shape& dx, const Conv2dParams& p,
                                           Device device);

// Whether `device` has compute capability 9.0, where the kernel's sm_90a code runs.
bool device_is_sm90(int device);

// Whether every tensor is NHWC, 16-byte aligned and on `device`, and every scale_inv an f32 (1)
// tensor there: the operands the phase kernels and the FP8 backward-filter read as they are.
bool phase_operands_on(std::initializer_list<const Tensor*> tensors, std::initializer_list<const Tensor*> scale_invs,
                       Device device);
// What the FP8 kernels into f16 read as it is: u8 codes a (any format) and w (E4M3), an f16
// result, all of them as phase_operands_on says, with their scale_invs.
bool fp8_operands_into_f16(const Fp8Tensor& a, const Fp8Tensor& w, const Tensor& out);

// The backward-data of the 128 -> 256-channel layer on 8 x 8 dy (D's third layer's input gradient
// at 64x64 images, G's third layer's forward) from FP8 codes, with the weights resident in
// registers (sm90a/conv_resident_dgrad.cu), under fp8_conv2d_backward_data_phases' conditions.
bool fp8_conv2d_backward_data_resident(const Fp8Tensor& dy, const Fp8Tensor& w, Tensor& dx, const Conv2dParams& p);
bool fp8_conv2d_backward_data_resident_takes(const Shape& dy, const Shape& w, const Shape& dx, const Conv2dParams& p,
                                             Device device);

}  // namespace gpu
}  // namespace ge
