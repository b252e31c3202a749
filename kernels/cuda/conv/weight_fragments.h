// The FP8 kernels that hold a weight in registers read its codes laid out as each thread's MMA
// fragments (sm90a/weight_fragments.cuh): which layout a pass reads, the launch that lays out
// several weights at once (ops::fp8_weight_fragments_all), and the fragments a pass runs on.
#pragma once
#include <vector>

#include "cuda/aligned.h"
#include "ganengine/fp8.h"
#include "ganengine/ops.h"
#include "ganengine/tensor.h"

namespace ge {
namespace gpu {

enum class FragmentLayout {
  None,
  PhaseForward,          // the 64 -> 128-channel forward (conv_phase_fprop.h)
  PhaseBackwardData,     // the 128 -> 64-channel backward-data (conv_phase_dgrad.h)
  ResidentForward,       // the 128 -> 256-channel forward (conv_phase_fprop.h)
  ResidentBackwardData,  // the 256 -> 128-channel backward-data (conv_phase_dgrad.h)
};

// The one weight a layout's kernel takes: out_channels x in_channels x 4 x 4, of a 4x4, stride-2,
// pad-1 convolution. The layouts (sm90a/weight_fragments.cuh), the kernels' channel counts and
// shape checks, and fragment_layout all read it here.
struct FragmentWeight {
  int out_channels, in_channels;
  Shape shape() const { return {out_channels, in_channels, 4, 4}; }
};

constexpr FragmentWeight fragment_weight(FragmentLayout layout) {
  switch (layout) {
    case FragmentLayout::PhaseForward:
    case FragmentLayout::PhaseBackwardData: return {128, 64};
    case FragmentLayout::ResidentForward:
    case FragmentLayout::ResidentBackwardData: return {256, 128};
    default: return {0, 0};
  }
}

// The layout in which the FP8 kernel of `pass` reads a weight of shape `w` on `device`; None where
// no kernel of that pass holds such a weight in registers. The shape alone decides: each of those
// kernels takes one weight shape (fragment_weight), and none of the other kernels of its pass
// reads fragments.
FragmentLayout fragment_layout(const Shape& w, ops::Fp8WeightPass pass, Device device);

// Whether `fragments` can take `codes` laid out on `device`: a u8 tensor of as many bytes there,
// 16-byte aligned (each thread writes and reads whole 16-byte fragments).
inline bool fragments_fit(const Tensor& fragments, const Tensor& codes, Device device) {
  return fragments.defined() && fragments.dtype() == DType::U8 && fragments.numel() == codes.numel() &&
         fragments.device() == device && aligned16(fragments.data());
}

// Lays out each job's codes into its fragments, up to eight a launch (the jobs checked by the
// caller: ops::fp8_weight_fragments_all).
void lay_out_weight_fragments(const std::vector<ops::Fp8WeightFragmentsOf>& jobs);

// The fragments a launch of `layout`'s kernel reads: w.fragments where they are given (a u8 tensor
// of w's bytes on `device`, 16-byte aligned: a clear error otherwise), else w's codes laid out now.
Tensor weight_fragments_for(FragmentLayout layout, const Fp8Tensor& w, Device device);

}  // namespace gpu
}  // namespace ge
