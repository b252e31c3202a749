// The tuning policy (core/tuning_policy.h): its defaults, and GANENGINE_TUNING's overrides and
// errors.
#include "core/tuning_policy.h"
#include "ganengine/error.h"
#include "support/test_util.h"

using namespace ge;

TEST_CASE("tuning policy: the defaults are the documented cut-overs") {
  const TuningPolicy t = default_tuning();
  CHECK(t.side_lane_max_pixels(true) == 256 * 64 * 64);
  CHECK(t.side_lane_max_pixels(false) == 2048 * 64 * 64);
  CHECK(t.fake_branch_max_pixels == 256 * 64 * 64);
  CHECK(t.side_hold_max_pixels == 64 * 64 * 64);
  CHECK(t.branch_side_below_max_pixels == 64 * 64 * 64);
  CHECK(t.bn_cluster_max_values == (int64_t{1} << 20));
  CHECK(t.bn_cluster_max_rows_per_thread == 8);
  CHECK(t.narrow_carry_min_bands_per_block == 4);
  CHECK(t.unpadded_gemm_below_batch == 256);
  const std::vector<std::string> lines = t.describe();
  REQUIRE(lines.size() == 9);
  CHECK(lines[0] == "side_lane_max_pixels_fp32=1048576");
  CHECK(lines[8] == "unpadded_gemm_below_batch=256");
}

TEST_CASE("tuning policy: overrides set the named fields and leave the rest") {
  const TuningPolicy t = resolve_tuning("side_hold_max_pixels=0,,bn_cluster_max_rows_per_thread=16", "X");
  CHECK(t.side_hold_max_pixels == 0);
  CHECK(t.bn_cluster_max_rows_per_thread == 16);
  CHECK(t.fake_branch_max_pixels == default_tuning().fake_branch_max_pixels);
  CHECK(resolve_tuning("", "X").describe() == default_tuning().describe());
}

TEST_CASE("tuning policy: a bad override names the variable and the key and says what was expected") {
  CHECK_THROWS_WITH_AS(resolve_tuning("side_lane=1", "GANENGINE_TUNING"),
                       doctest::Contains("GANENGINE_TUNING: unknown key 'side_lane' (keys: side_lane_max_pixels_fp32"),
                       Error);
  CHECK_THROWS_WITH_AS(resolve_tuning("side_hold_max_pixels", "GANENGINE_TUNING"),
                       doctest::Contains("'side_hold_max_pixels' is not key=value"), Error);
  for (const char* bad : {"side_hold_max_pixels=-1", "side_hold_max_pixels=1x",
                          "side_hold_max_pixels=", "side_hold_max_pixels=99999999999999999999"})
    CHECK_THROWS_WITH_AS(resolve_tuning(bad, "GANENGINE_TUNING"), doctest::Contains("is not a non-negative integer"),
                         Error);
}
