// metrics.jsonl read back on resume (train/metrics_file.h): the records below the state's step
// count are kept in order, damaged lines are dropped and numbered, nothing throws.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "train/metrics_file.h"

TEST_CASE("metrics file: a resume keeps the records below the state's step and drops damaged lines") {
  const std::string text =
      "{\"step\": 0, \"Loss_D\": 1.5}\n"
      "{\"step\": 1, \"Loss_D\": 1.4}\n"
      "half a line {\"st\n"
      "{\"step\": 2}\n"
      "{\"step\": x}\n"
      "{\"step\": -4, \"Loss_D\": 1}\n"
      "{\"step\": 3, \"Loss_D\": 1.2}";  // the last line without its newline
  const ge::KeptMetrics kept = ge::keep_metrics_records(text, 3);
  CHECK(kept.text == "{\"step\": 0, \"Loss_D\": 1.5}\n{\"step\": 1, \"Loss_D\": 1.4}\n{\"step\": 2}\n");
  CHECK(kept.damaged_lines == std::vector<int64_t>{3, 5, 6});
  CHECK(ge::keep_metrics_records(text, 0).text.empty());
  CHECK(ge::keep_metrics_records("", 10).text.empty());
  CHECK(ge::keep_metrics_records("{\"step\": 99999999999999999999}\n", 10).damaged_lines.size() == 1);
}
