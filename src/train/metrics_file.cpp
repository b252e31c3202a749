#include "train/metrics_file.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

namespace ge {

KeptMetrics keep_metrics_records(const std::string& text, int64_t keep_until_step) {
  KeptMetrics kept;
  std::istringstream in(text);
  std::string line;
  int64_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    // Records are written as {"step": N, ...}; the step must be a whole number followed by
    // the next member or the record's end.
    const auto at = line.find("\"step\": ");
    const char* digits = at == std::string::npos ? nullptr : line.c_str() + at + 8;
    char* end = nullptr;
    errno = 0;
    const long long step = digits ? std::strtoll(digits, &end, 10) : -1;
    if (step < 0 || errno == ERANGE || end == digits || (*end != ',' && *end != '}')) {
      kept.damaged_lines.push_back(line_number);
      continue;
    }
    if (step < keep_until_step) kept.text += line + "\n";
  }
  return kept;
}

std::string read_metrics_for_resume(const std::string& path, int64_t keep_until_step) {
  if (keep_until_step <= 0) return {};
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  KeptMetrics kept = keep_metrics_records(text, keep_until_step);
  if (!kept.damaged_lines.empty())
    std::fprintf(stderr, "ganengine train: warning: %s line %lld is not a metrics record; dropped\n", path.c_str(),
                 static_cast<long long>(kept.damaged_lines.front()));
  if (kept.damaged_lines.size() > 1)
    std::fprintf(stderr, "ganengine train: warning: %lld damaged lines of %s dropped in all\n",
                 static_cast<long long>(kept.damaged_lines.size()), path.c_str());
  return std::move(kept.text);
}

}  // namespace ge
