// The text of an error as the user sees it. Errors about input name the flag or file already;
// an internal check (GE_CHECK) that fires is a bug, and its source location means nothing to a
// user, so it is replaced by a sentence saying what happened and what to do.
#pragma once
#include <regex>
#include <string>

namespace ge::cli {

inline std::string error_text_for_user(const std::string& what) {
  // GE_CHECK's form: "<source file>:<line>: <message> [<condition>]", possibly over several lines.
  static const std::regex kInternal(R"(^[^\s:]+\.(cpp|cu|cuh|h|hpp):[0-9]+: ([\s\S]*))");
  std::smatch m;
  if (!std::regex_match(what, m, kInternal)) return what;
  return "internal check failed: " + m[2].str() +
         " (a bug in ganengine rather than in the input, as far as it checked; please report it with the command "
         "line)";
}

}  // namespace ge::cli
