// The tuning policy: every performance threshold the engine chooses a code path by, resolved
// once per process. The precision policy (amp.h) decides what a step computes; this one only
// how fast: any value here gives the same results bit for bit (the GPU tests force each side of
// every cut-over and compare). docs/performance.md gives each default's measurements.
//
// GANENGINE_TUNING=key=value,... overrides fields for an experiment (`ganengine info` lists the
// keys); a key that is not listed, or a value that is not a non-negative integer, is an error
// naming the variable.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ge {

struct TuningPolicy {
  // ---- the captured step's lanes (concurrent_region.h). Cut-overs are in pixels of the real
  // batch: images x height x width; 0 turns the feature off.
  // G's forward beside D's pass on the real batch, and filter gradients beside their backward
  // pass; the fp32 bound serves O0's convolutions, the half bound O1-O4's.
  int64_t side_lane_max_pixels_fp32 = 0;
  int64_t side_lane_max_pixels_half = 0;
  // D's whole pass on the fake batch beside its pass on the real batch.
  int64_t fake_branch_max_pixels = 0;
  // What each side-lane filter gradient reads held until its backward pass ends.
  int64_t side_hold_max_pixels = 0;
  // The fake branch's side lane one stream priority below the branch lane.
  int64_t branch_side_below_max_pixels = 0;
  // ---- BatchNorm's one-launch cluster kernels (batchnorm_cluster.cu): taken for layers of at
  // most this many values (N x H x W x C) whose threads sum at most this many rows each.
  int64_t bn_cluster_max_values = 0;
  int64_t bn_cluster_max_rows_per_thread = 0;
  // ---- the narrow backward-data (conv_8ch_dgrad_narrow.h): a block carries its halo from band to
  // band when the layer has at least this many bands per resident block, else each band reloads it.
  int64_t narrow_carry_min_bands_per_block = 0;
  // ---- G's first layer (a transposed convolution of the 1x1 noise, one GEMM: conv_gemm.h) runs
  // with the noise's channels unpadded below this batch size, padded to a multiple of 8 from it.
  int64_t unpadded_gemm_below_batch = 0;

  // The side lane's bound for convolutions in compute_dtype_is_fp32 or half.
  int64_t side_lane_max_pixels(bool fp32) const { return fp32 ? side_lane_max_pixels_fp32 : side_lane_max_pixels_half; }
  // "key=value" per field, in declaration order: for `ganengine info` and run logs.
  std::vector<std::string> describe() const;
};

// The defaults, tuned on the H200 and the H100 (docs/performance.md says which, with the runs).
TuningPolicy default_tuning();
// The defaults with `overrides` ("key=value,..."; empty: none) applied; `source` names where
// they came from in errors.
TuningPolicy resolve_tuning(const std::string& overrides, const std::string& source);
// The process's policy: the defaults with GANENGINE_TUNING applied, resolved on first use.
const TuningPolicy& tuning();

}  // namespace ge
