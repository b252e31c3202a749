// metrics.jsonl on resume: the records an interrupted run logged for the steps its training state
// holds. Records are numbered from 0 and the state counts the steps done, so a record is kept when
// its step is below that count. A damaged line (a crash mid-write of an older version, an edit) is
// dropped with a warning naming the file and line: the log never blocks a resume.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ge {

struct KeptMetrics {
  std::string text;                    // the kept lines, each ending in '\n'
  std::vector<int64_t> damaged_lines;  // 1-based numbers of the lines dropped as damaged
};

// Reads `text` (metrics.jsonl's contents).
KeptMetrics keep_metrics_records(const std::string& text, int64_t keep_until_step);

// Reads the file at `path` (none: nothing kept) and prints the warnings to stderr.
std::string read_metrics_for_resume(const std::string& path, int64_t keep_until_step);

}  // namespace ge
