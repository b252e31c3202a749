// FP8 training's vocabulary (opt level O4: PrecisionPolicy::fp8_convolutions, nn::Fp8ConvScaling):
// the two 8-bit formats, Transformer Engine's delayed-scaling recipe, the scaling state it keeps per
// quantized tensor, and a quantized tensor. The ops over them are in ops.h ("FP8").
#pragma once
#include <cstdint>

#include "ganengine/tensor.h"

namespace ge {

// The OCP 8-bit formats Hopper's Tensor Cores take: E4M3 (largest finite 448, no infinities:
// PyTorch's float8_e4m3fn) for forward tensors, E5M2 (largest finite 57344) for gradients, as
// Transformer Engine's HYBRID format assigns them. Exact conversions: core/fp8_bits.h.
enum class Fp8Format : uint8_t { E4M3, E5M2 };

// Which amax of a tensor's history a new scale is computed from.
enum class Fp8AmaxAlgo : uint8_t {
  Max,         // the largest amax in the window (Transformer Engine's default)
  MostRecent,  // the amax of the step just taken
};

// Transformer Engine's DelayedScaling recipe (transformer_engine.common.recipe): each step
// quantizes a tensor with the scale derived from the amaxes of earlier steps, and records its own.
//   amax  = the history's max (NaN if any entry is NaN), or its most recent entry;
//   scale = (fp8_max * 2^-margin) / amax, one rounded f32 division, which is (fp8_max / amax) /
//           2^margin wherever neither quotient leaves the normal range; kept when amax is 0, NaN
//           or infinite; the largest finite f32 where the quotient overflows (amax tiny);
//   scale_inv = 1 / scale;
//   the history rolls one place toward the front: the step just taken moves from entry 0 to the
//   end, the oldest amax drops out, and entry 0, which the next step's quantization writes, is 0.
// Transformer Engine's own history default is 1024 (1 in its early releases); 16 here, so that a
// scale follows an amax that has shrunk for good within 16 steps, not 1024. O4's training quality
// was measured with 16 (BENCHMARKS.md); no other length has been compared.
struct Fp8DelayedScaling {
  static constexpr int kDefaultAmaxHistoryLen = 16;
  static constexpr int kDefaultMargin = 0;
  int amax_history_len = kDefaultAmaxHistoryLen;  // H >= 1
  int margin = kDefaultMargin;                    // >= 0: scales sit 2^margin below the format's range
  Fp8AmaxAlgo amax_compute_algo = Fp8AmaxAlgo::Max;
};

// The delayed-scaling state of one quantized tensor, f32 on that tensor's device, updated there by
// ops::fp8_update_scales (nothing is read back to the host, so it can live in a captured graph).
struct Fp8Scaling {
  Fp8Format format = Fp8Format::E4M3;
  Tensor amax_history;  // (H); entry 0 is the step in progress, which quantizing writes (current_amax)
  Tensor scale;         // (1): multiplies values into the format's range
  Tensor scale_inv;     // (1): 1 / scale, multiplies FP8 values back
  // Entry 0 of the history, where this step's amax is written (a view: same storage).
  Tensor current_amax() const { return amax_history.slice0(0, 1); }
};

// A fresh state on `device`: the history zeros (recipe.amax_history_len entries), scale and
// scale_inv 1, as Transformer Engine starts one.
Fp8Scaling make_fp8_scaling(Fp8Format format, const Fp8DelayedScaling& recipe, Device device);

// A tensor quantized to FP8: its bytes (u8, the shape and memory format of the values it holds)
// and the scale_inv that turns them back into values. scale_inv is the state's own tensor, not a
// copy: the FP8 tensor is valid until that state's next ops::fp8_update_scales, which under the
// recipe runs once per step after every pass that reads it.
struct Fp8Tensor {
  Tensor data;
  Tensor scale_inv;  // f32 (1)
  Fp8Format format = Fp8Format::E4M3;
  // A weight's codes laid out ahead as the register fragments of the FP8 kernel of the pass it is
  // handed to (ops::fp8_weight_fragments_all, from these codes for that pass); undefined: a pass
  // whose kernel reads fragments lays them out itself. Every other pass ignores them.
  Tensor fragments = Tensor();
};

}  // namespace ge
