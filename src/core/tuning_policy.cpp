#include "core/tuning_policy.h"

#include <cerrno>
#include <cstdlib>
#include <utility>

#include "ganengine/error.h"

namespace ge {
namespace {

// Every field by its key, in declaration order.
std::vector<std::pair<const char*, int64_t TuningPolicy::*>> fields() {
  return {
      {"side_lane_max_pixels_fp32", &TuningPolicy::side_lane_max_pixels_fp32},
      {"side_lane_max_pixels_half", &TuningPolicy::side_lane_max_pixels_half},
      {"fake_branch_max_pixels", &TuningPolicy::fake_branch_max_pixels},
      {"side_hold_max_pixels", &TuningPolicy::side_hold_max_pixels},
      {"branch_side_below_max_pixels", &TuningPolicy::branch_side_below_max_pixels},
      {"bn_cluster_max_values", &TuningPolicy::bn_cluster_max_values},
      {"bn_cluster_max_rows_per_thread", &TuningPolicy::bn_cluster_max_rows_per_thread},
      {"narrow_carry_min_bands_per_block", &TuningPolicy::narrow_carry_min_bands_per_block},
      {"unpadded_gemm_below_batch", &TuningPolicy::unpadded_gemm_below_batch},
  };
}

std::string known_keys() {
  std::string s;
  for (const auto& f : fields()) s += (s.empty() ? "" : ", ") + std::string(f.first);
  return s;
}

}  // namespace

TuningPolicy default_tuning() {
  TuningPolicy t;
  // The side lane pays while the step's kernels leave SMs idle: up to 256 64x64 images with
  // fp32 convolutions, above which it only raises the peak memory; with half ones at every batch
  // measured, up to 2048 images.
  t.side_lane_max_pixels_fp32 = 256 * 64 * 64;
  t.side_lane_max_pixels_half = 2048 * 64 * 64;
  t.fake_branch_max_pixels = 256 * 64 * 64;
  // Holding the filter gradients' inputs pays at batch 64 only (10 MiB more there).
  t.side_hold_max_pixels = 64 * 64 * 64;
  // Ranking the branch's side lane below it pays at batch 64 and costs at 128 and 256.
  t.branch_side_below_max_pixels = 64 * 64 * 64;
  // At 64x64 this takes D's and G's two narrowest BatchNorm layers at batch 64 (one each at 128);
  // taking the 2^21-value layers too was slower.
  t.bn_cluster_max_values = int64_t{1} << 20;
  t.bn_cluster_max_rows_per_thread = 8;
  // Carrying the halo pays once a block walks at least 4 bands.
  t.narrow_carry_min_bands_per_block = 4;
  // Four copy kernels less on G's chain pay at batch 64; cuBLAS's kernels for unaligned rows cost
  // more than that from 256 on.
  t.unpadded_gemm_below_batch = 256;
  return t;
}

std::vector<std::string> TuningPolicy::describe() const {
  std::vector<std::string> out;
  for (const auto& [key, member] : fields()) out.push_back(std::string(key) + "=" + std::to_string(this->*member));
  return out;
}

TuningPolicy resolve_tuning(const std::string& overrides, const std::string& source) {
  TuningPolicy t = default_tuning();
  size_t at = 0;
  while (at < overrides.size()) {
    size_t end = overrides.find(',', at);
    if (end == std::string::npos) end = overrides.size();
    const std::string item = overrides.substr(at, end - at);
    at = end + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    GE_CHECK(eq != std::string::npos, source, ": '", item, "' is not key=value (keys: ", known_keys(), ")");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    int64_t TuningPolicy::*member = nullptr;
    for (const auto& f : fields())
      if (key == f.first) member = f.second;
    GE_CHECK(member != nullptr, source, ": unknown key '", key, "' (keys: ", known_keys(), ")");
    char* rest = nullptr;
    errno = 0;
    const long long v = value.empty() ? -1 : std::strtoll(value.c_str(), &rest, 10);
    GE_CHECK(!value.empty() && errno == 0 && *rest == '\0' && v >= 0, source, ": ", key, "='", value,
             "' is not a non-negative integer");
    t.*member = v;
  }
  return t;
}

const TuningPolicy& tuning() {
  static const TuningPolicy policy = [] {
    const char* v = std::getenv("GANENGINE_TUNING");
    return resolve_tuning(v ? v : "", "GANENGINE_TUNING");
  }();
  return policy;
}

}  // namespace ge
