// FP8 convolutions on Hopper's warpgroup MMA (sm90a/fp8_conv_wgmma.cu): the forward and the
// backward-data of ops::fp8_conv2d_forward / fp8_conv2d_backward_data as implicit GEMMs over the
// FP8 bytes themselves, f32 accumulation, the two scale_invs applied once to each sum.
#pragma once
#include "ganengine/fp8.h"
#include "ganengine/ops.h"

namespace ge {
namespace gpu {

// y = conv2d_forward(x, w) * x.scale_inv * w.scale_inv, f32 or f16 (rounded once), when the kernel
// takes the shapes; false (nothing run) otherwise. Taken: x E4M3 or E5M2 and w E4M3, u8 NHWC on a
// compute capability 9.0 device, 16-byte aligned; x's channels those of w, a multiple of 32; w's
// output channels a multiple of 64; y NHWC. The 64 -> 128-channel layer on 32 x 32 inputs into f16 y
// runs on the phase-structured kernel (conv_phase_fprop.h), every other shape as an implicit GEMM.
bool fp8_conv2d_forward_wgmma(const Fp8Tensor& x, const Fp8Tensor& w, Tensor& y, const Conv2dParams& p);

// dx = conv2d_backward_data(dy, w) * dy.scale_inv * w.scale_inv, as above, for the DCGAN's 4x4,
// stride-2, pad-1 convolutions (dx twice dy's height and width): four phases of four taps each.
// Taken: dy E5M2 or E4M3 and w E4M3, u8 NHWC; dy's channels a multiple of 32, dx's of 64. The
// 128 -> 64-channel layer on 16 x 16 dy into f16 dx runs as the half path's phase kernel does
// (conv_phase_dgrad.h), every other shape as four implicit GEMMs.
bool fp8_conv2d_backward_data_wgmma(const Fp8Tensor& dy, const Fp8Tensor& w, Tensor& dx, const Conv2dParams& p);

// d (64 x 64, f32) = a (64 x 32) times b (64 x 32)^T, E4M3 codes as u8 on a compute capability 9.0
// device, through one m64n64k32 MMA from shared memory laid out as the convolutions lay their
// stages out: the instruction, the descriptors and the accumulator layout on their own, for the
// GPU tests. False (nothing run) on another device or for other shapes.
bool fp8_mma_tile(const Tensor& a, const Tensor& b, Tensor& d);

}  // namespace gpu
}  // namespace ge
