// Where the kernels that hold a weight as register A fragments (phase_mma::a_fragment: 16 bytes a
// thread an MMA step) take each fragment from: fragment i of a layout, from w in [output
// channel][kh][kw][input channel] order (its NHWC bytes). One function a layout, so that a pass
// laying out its own weight and weight_fragments.cu, which lays out several weights in one launch
// (ops::fp8_weight_fragments_all), write the same bytes. Each layout is a permutation of w's
// elements, a fragment i at a time: w's elements / 16 bytes fragments of FP8 codes.
#pragma once
#include <cstdint>

#include "cuda/conv/sm90a/phase_mma.cuh"
#include "cuda/conv/weight_fragments.h"

namespace ge {
namespace gpu {
namespace weight_fragments {

using phase_mma::a_fragment;
using phase_mma::Fp8Operands;
using phase_mma::kChannels;
using phase_mma::kWarpgroup;
using Fp8Weights = Fp8Operands<Fp8Format::E4M3>;  // the fragments' bytes whatever the other operand's format

// Kernel row (or column) of tap t of output phase p of a 4x4, stride-2, pad-1 backward-data: output
// row 2a + p reads dy row a + p + t - 1 with this kernel row (conv_phase_dgrad.cu).
__host__ __device__ constexpr int tap_kernel_index(int p, int t) { return 3 - p - 2 * t; }

// The 64 -> 128-channel forward (conv_phase_fprop.cu), w 128 x 4 x 4 x 64:
// frag[(warpgroup * 32 + s) * 128 + thread], step s of the warpgroup's 64 output channels,
// A[m][k] = w[64 warpgroup + m][tap][32 slice + k], tap = s / 2, slice = s % 2.
__device__ __forceinline__ uint4 phase_forward(const uint8_t* w, int i) {
  constexpr int kIn = fragment_weight(FragmentLayout::PhaseForward).in_channels, kSlices = kIn / 32,
                kSteps = 16 * kSlices;
  const int thread = i % kWarpgroup, s = (i / kWarpgroup) % kSteps, warpgroup = i / kWarpgroup / kSteps;
  const int tap = s / kSlices, slice = s % kSlices;
  return a_fragment<Fp8Weights>(
      thread, [&](int row, int col) { return w[((kChannels * warpgroup + row) * 16 + tap) * kIn + 32 * slice + col]; });
}

// The backward-data of a K -> 64-channel layer phase by phase (conv_phase_dgrad.cu, in half or
// FP8), w K x 4 x 4 x 64: frag[((phase * 4 + tap) * slices + slice) * 128 + thread], A (64 x
// kSliceChannels) [c][k] = w[kSliceChannels slice + k][kh][kw][c].
template <class Op, int K>
__device__ __forceinline__ uint4 phase_backward_data(const typename Op::Element* w, int i) {
  static_assert(fragment_weight(FragmentLayout::PhaseBackwardData).in_channels == kChannels, "dx's channels: the M");
  constexpr int kSlices = K / Op::kSliceChannels;
  const int thread = i % kWarpgroup, slice = (i / kWarpgroup) % kSlices, phase_tap = i / kWarpgroup / kSlices;
  const int phase = phase_tap / 4, tap = phase_tap % 4;
  const int kh = tap_kernel_index(phase / 2, tap / 2), kw = tap_kernel_index(phase % 2, tap % 2);
  return a_fragment<Op>(thread, [&](int row, int col) {
    return w[((Op::kSliceChannels * slice + col) * 16 + kh * 4 + kw) * kChannels + row];
  });
}

// The 128 -> 256-channel forward with resident weights (conv_resident_fprop.cu), w 256 x 4 x 4 x
// 128: frag[((quarter * 2 + h) * 32 + s) * 128 + thread], warpgroup h's step s for the quarter's 64
// output channels, A[m][k] = w[64 quarter + m][tap][32 slice + k], tap = 8 h + s / 4, slice = s % 4.
__device__ __forceinline__ uint4 resident_forward(const uint8_t* w, int i) {
  constexpr int kIn = fragment_weight(FragmentLayout::ResidentForward).in_channels, kSlices = kIn / 32,
                kHalfSteps = 8 * kSlices;
  const int thread = i % kWarpgroup, s = (i / kWarpgroup) % kHalfSteps, h = (i / kWarpgroup / kHalfSteps) % 2;
  const int quarter = i / kWarpgroup / kHalfSteps / 2;
  const int tap = 8 * h + s / kSlices, slice = s % kSlices;
  return a_fragment<Fp8Weights>(
      thread, [&](int row, int col) { return w[((kChannels * quarter + row) * 16 + tap) * kIn + 32 * slice + col]; });
}

// The 256 -> 128-channel backward-data with resident weights (conv_resident_dgrad.cu), w 256 x 4 x
// 4 x 128: frag[((half * 4 + phase) * 32 + s) * 128 + thread], step s of the phase for dx's
// channels 64 half .., A[c][k] = w[32 slice + k][kh][kw][64 half + c], tap = s / 8, slice = s % 8.
__device__ __forceinline__ uint4 resident_backward_data(const uint8_t* w, int i) {
  constexpr FragmentWeight kWeight = fragment_weight(FragmentLayout::ResidentBackwardData);
  constexpr int kDy = kWeight.out_channels, kDx = kWeight.in_channels, kSlices = kDy / 32, kSteps = 4 * kSlices;
  const int thread = i % kWarpgroup, s = (i / kWarpgroup) % kSteps, phase = (i / kWarpgroup / kSteps) % 4;
  const int half = i / kWarpgroup / kSteps / 4;
  const int tap = s / kSlices, slice = s % kSlices;
  const int kh = tap_kernel_index(phase / 2, tap / 2), kw = tap_kernel_index(phase % 2, tap % 2);
  return a_fragment<Fp8Weights>(thread, [&](int row, int col) {
    return w[(((32 * slice + col) * 4 + kh) * 4 + kw) * kDx + kChannels * half + row];
  });
}

// Fragment i of `layout` from w's E4M3 codes.
__device__ __forceinline__ uint4 fp8_fragment(FragmentLayout layout, const uint8_t* w, int i) {
  switch (layout) {
    case FragmentLayout::PhaseForward: return phase_forward(w, i);
    case FragmentLayout::PhaseBackwardData:
      return phase_backward_data<Fp8Weights, fragment_weight(FragmentLayout::PhaseBackwardData).out_channels>(w, i);
    case FragmentLayout::ResidentForward: return resident_forward(w, i);
    case FragmentLayout::ResidentBackwardData: return resident_backward_data(w, i);
    default: return make_uint4(0, 0, 0, 0);
  }
}

}  // namespace weight_fragments
}  // namespace gpu
}  // namespace ge
