// Backward-data of the 8-channel layers' convolution into a dx holding only an image's 1 or 3
// channels (conv_8ch_dgrad_narrow.cu): D's first layer's input gradient in G's pass through D and
// G's last layer's forward, as the layers run them.
#pragma once
#include "cuda/conv/conv_8ch.h"

namespace ge {
namespace gpu {

// How the kernel's blocks share the batch's bands of dy rows; the same bits either way.
//  - kCarry: each block a run of consecutive bands, keeping a band's last row's contributions
//    for the next band's first output row, so that a dy row is computed once (twice only where
//    a run begins).
//  - kHalo: bands dealt out in turn, each computing the dy rows just above and below it too.
//  - kAuto (the default): kCarry where the runs are at least the tuning policy's
//    narrow_carry_min_bands_per_block long (long runs at large batches), else kHalo.
enum class NarrowWalk { kAuto, kCarry, kHalo };

// Whether conv2d_backward_data_narrow takes these shapes (the rest checked by its caller).
bool conv2d_backward_data_narrow_applies(const Tensor& dy, const Tensor& dx);
bool conv2d_backward_data_narrow_takes(const Shape& dy, const Shape& dx);

// dx = backward_data(dy', w) as conv2d_backward_data_8ch describes it, for dx with 1 or 3
// channels, dy with 64 channels and a multiple of 8 up to 64 pixels wide. The caller has checked
// everything else conv2d_backward_data_8ch asks of the tensors. True when it ran, false when the
// shape is not one it takes.
bool conv2d_backward_data_narrow(const Tensor& dy, const Tensor& w, Tensor& dx, const ops::FusedActivation* act,
                                 const Tensor* y_act, const DxActivation* dx_act, NarrowWalk walk = NarrowWalk::kAuto);

}  // namespace gpu
}  // namespace ge
