// Runs the ganengine program the way a user would, for the end-to-end suites.
#pragma once
#include <string>

namespace ge::test {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs `ganengine <args>` through the shell, with stdin closed.
CommandResult run_ganengine(const std::string& args);

}  // namespace ge::test
