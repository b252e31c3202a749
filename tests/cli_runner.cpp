#include "cli_runner.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>

#include "test_util.h"

namespace ge::test {

namespace {
CommandResult run_shell(const std::string& cmd) {
  CommandResult r;
  std::FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}
}  // namespace

CommandResult run_ganengine(const std::string& args) {
  return run_shell(ganengine_binary() + " " + args + " </dev/null 2>&1");
}

CommandResult run_ganengine_with_interrupt(const std::string& args, int seconds) {
  // coreutils' timeout sends the signal; --preserve-status passes the program's exit code on.
  return run_shell("timeout --preserve-status --signal=INT " + std::to_string(seconds) + " " + ganengine_binary() +
                   " " + args + " </dev/null 2>&1");
}

}  // namespace ge::test
