// A hand-written forward convolution for the 8-channel layers of the DCGAN: D's first layer and
// the backward-data pass of G's last (both a 4x4, stride-2, pad-1 convolution of an NHWC half
// tensor whose 3 image channels are padded to 8, into 64 channels). cuDNN's choices for that
// shape ran at 17% Tensor Core activity on the H200 (159 us per call at batch 1024, ncu; moving
// its 192 MB once at about 4 TB/s would take some 50 us).
#pragma once
#include "ganengine/backend.h"

namespace ge {
namespace gpu {

// Runs y = conv2d(x, w) when the shapes are the ones it handles (f16/bf16 NHWC, 8 input
// channels, 4x4 kernel, stride 2, pad 1, output channels a multiple of 64, output pixels per
// image a multiple of 64 in whole rows or 64-wide row segments) and returns true; false leaves
// everything to cuDNN. GANENGINE_CONV_8CH=off always returns false.
bool conv2d_forward_8ch(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p);

}  // namespace gpu
}  // namespace ge
