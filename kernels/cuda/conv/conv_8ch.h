// Hand-written convolutions for the 8-channel layers of the DCGAN: D's first layer and G's last
// (a 4x4, stride-2, pad-1 convolution of an NHWC half tensor with 8 channels, or in the
// forward with an image batch's own 1 or 3 channels read as 8 with zeros, into 64 channels;
// G's transposed convolution is that convolution's adjoint, so its forward is this backward-data,
// its backward-data this forward and its backward-filter this backward-filter). cuDNN's choices
// for these shapes keep the Tensor Cores mostly idle and take far longer than moving their bytes
// once would; its backward-data uses 8 channels of 64-channel tiles (docs/performance.md).
#pragma once
#include "core/backend.h"

namespace ge {
namespace gpu {

// The kernels handle f16/bf16 NHWC convolutions (x the 8-channel side, y the 64k-channel side)
// with 8 input channels (the forward's x may hold 1 or 3 of them, the rest zeros), a 4x4
// kernel, stride 2, pad 1, output channels a multiple of 64 and output pixels per image a
// multiple of 64 in whole rows or 64-wide row segments. w (or dw) holds the 8 channels, or only
// the 1 or 3 that x (dx) holds: bitwise what its zero-padded copy gives, without the copy (the
// layers keep D's first and G's last weights with the image's channels: Conv2d).
//
// Each pass's *_applies says, without running anything, whether the pass takes these tensors
// (conv_paths.h's table asks it); the pass itself returns false, having run nothing, exactly
// where its *_applies is false.

// y = act(conv2d(x, w)) (act nullptr: no activation), the convolution rounded to the dtype
// before the activation, as the two ops in sequence; true when it ran, false to leave it to cuDNN.
// With round (no codes), also *rounded (y's shape, dtype and layout, 16-byte aligned) = y rounded
// to FP8 and back, its amax recorded, as ops::conv2d_activation_forward's round_copy; with round's
// codes (16-byte aligned) and no `rounded`, y's codes instead, and with round's codes_only those
// alone, y not written: for LeakyReLU with a slope in (0, 1] only (false for anything else).
bool conv2d_forward_8ch(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p,
                        const ops::FusedActivation* act = nullptr, const ops::Fp8RoundTrip* round = nullptr,
                        Tensor* rounded = nullptr);
bool conv2d_forward_8ch_applies(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p);

// dw = beta * dw + backward_filter(x, dy'), where dy' = dy, or with act the activation's
// gradient given its output y_act, rounded to the dtype (what activation_backward would store);
// for ReLU and LeakyReLU y_act may be that output's codes written with codes_only (u8, 8-byte
// aligned).
// x may hold 1 or 3 of w's 8 channels (the rest zeros). True when it ran; false leaves it to the
// caller.
bool conv2d_backward_filter_8ch(const Tensor& x, const Tensor& dy, Tensor& dw, const Conv2dParams& p, float beta,
                                const ops::FusedActivation* act = nullptr, const Tensor* y_act = nullptr);
bool conv2d_backward_filter_8ch_applies(const Tensor& x, const Tensor& dy, const Tensor& dw, const Conv2dParams& p,
                                        const ops::FusedActivation* act, const Tensor* y_act);

// Whether the forward with codes_only and both backward passes above reading those codes take a
// half convolution of these shapes (x with its 1 or 3 image channels, 64 output channels) and
// activation (LeakyReLU with a slope in (0, 1]): D's first layer.
bool conv2d_activation_codes_8ch_take(const Shape& x, const Shape& w, const Shape& y, const Conv2dParams& p,
                                      const ops::FusedActivation& act);
// An activation taken on a backward-data's dx as it is written, each value rounded to the dtype
// first: its forward (a transposed convolution followed by the activation), or with y its gradient
// given its output y (dx's shape, dtype and layout), as activation_backward(act, y, dx, dx) after.
struct DxActivation {
  ops::FusedActivation act;
  const Tensor* y = nullptr;
};

// dx = backward_data(dy', w) for a w with 8 input channels (or dx's 1 or 3) and 64 or 128
// output channels, dx holding 8 channels or the first 1 or 3 of them (conv_8ch_dgrad.cu, and
// conv_8ch_dgrad_narrow.cu for 1 or 3 with 64 output channels; dx twice dy's size, dy at least 8
// pixels wide), dy' = dy or with act (ReLU or LeakyReLU) the activation's gradient given its
// output y_act, rounded as activation_backward stores it (y_act as its codes written with
// codes_only: the narrow kernel's shapes only); then dx_act, if given, taken on dx.
// True when it ran, false to leave it all to the caller.
bool conv2d_backward_data_8ch(const Tensor& dy, const Tensor& w, Tensor& dx, const Conv2dParams& p,
                              const ops::FusedActivation* act = nullptr, const Tensor* y_act = nullptr,
                              const DxActivation* dx_act = nullptr);
bool conv2d_backward_data_8ch_applies(const Tensor& dy, const Tensor& w, const Tensor& dx, const Conv2dParams& p,
                                      const ops::FusedActivation* act, const Tensor* y_act, const DxActivation* dx_act);

}  // namespace gpu
}  // namespace ge
