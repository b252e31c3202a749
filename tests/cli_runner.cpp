#include "cli_runner.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>

#include "test_util.h"

namespace ge::test {

CommandResult run_ganengine(const std::string& args) {
  CommandResult r;
  const std::string cmd = ganengine_binary() + " " + args + " </dev/null 2>&1";
  std::FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace ge::test
