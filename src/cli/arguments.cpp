#include "cli/arguments.h"

namespace ge::cli {

void Arguments::finish() {
  ptrs_.clear();
  for (auto& w : words) ptrs_.push_back(w.data());
}

Arguments normalise_arguments(int argc, char** argv, const std::map<std::string, std::string>& aliases,
                              const std::set<std::string>& boolean_flags) {
  Arguments a;
  for (int i = 0; i < argc; ++i) {
    std::string w = argv[i];
    if (i > 0 && w.rfind("--", 0) == 0) {
      const size_t eq = w.find('=');
      std::string name = w.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      const std::string rest = eq == std::string::npos ? "" : w.substr(eq);
      auto it = aliases.find(name);
      if (it != aliases.end()) name = it->second;
      w = "--" + name + rest;
      // Apex spells boolean overrides "--keep-batchnorm-fp32 False": glue the value on, since an
      // option with an implicit value would not take the next word.
      if (rest.empty() && boolean_flags.count(name) && i + 1 < argc) {
        const std::string next = argv[i + 1];
        if (next.rfind("-", 0) != 0) {  // a value, right or wrong: the flag's parser judges it
          w += "=" + next;
          ++i;
        }
      }
    }
    a.words.push_back(w);
  }
  a.finish();
  return a;
}

}  // namespace ge::cli
