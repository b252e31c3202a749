#include "train/run_flags.h"

#include <algorithm>
#include <set>

namespace ge {

bool is_recorded_flag(const std::string& name) {
  static const std::set<std::string> kPerInvocation = {"resume",
                                                       "overwrite",
                                                       "netG",
                                                       "netD",
                                                       "download",
                                                       "download-mirror",
                                                       "print-precision",
                                                       "debug-force-overflow",
                                                       "profile-steps",
                                                       "help"};
  return kPerInvocation.count(name) == 0;
}

bool may_change_on_resume(const std::string& name) {
  static const std::set<std::string> kSafe = {
      "niter", "max-steps", "log-interval", "sample-interval", "checkpoint-every", "workers",
      "outf",  "dataroot",  "cache-dir",    "no-progress",     "no-tensorboard"};
  return kSafe.count(name) > 0;
}

std::string encode_run_flags(const FlagValues& flags) {
  std::string text;
  for (const auto& [name, value] : flags) {
    if (!is_recorded_flag(name) || value.find('\n') != std::string::npos) continue;
    text += name + "=" + value + "\n";
  }
  return text;
}

FlagValues decode_run_flags(const std::string& text) {
  FlagValues out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    const size_t eq = line.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    out.emplace_back(line.substr(0, eq), line.substr(eq + 1));
  }
  return out;
}

}  // namespace ge
