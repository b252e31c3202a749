#include <string>
#include <vector>

#include "runtime/profiling.h"

namespace ge {

namespace {
std::vector<std::string>& phase_stack() {
  thread_local std::vector<std::string> stack;
  return stack;
}
}  // namespace

void push_profile_phase(const char* name) { phase_stack().emplace_back(name); }

void pop_profile_phase() {
  if (!phase_stack().empty()) phase_stack().pop_back();
}

std::string current_profile_phase() {
  std::string path;
  for (const std::string& name : phase_stack()) {
    if (!path.empty()) path += '/';
    path += name;
  }
  return path;
}

}  // namespace ge
