#include "support/cli_runner.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>

#include "support/test_util.h"

namespace ge::test {

CommandResult run_command(const std::string& cmd) {
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

CommandResult run_ganengine(const std::string& args) {
  return run_command(ganengine_binary() + " " + args + " </dev/null 2>&1");
}

CommandResult run_ganengine_with_interrupt(const std::string& args, int seconds) {
  // coreutils' timeout sends the signal; --preserve-status passes the program's exit code on.
  return run_command("timeout --preserve-status --signal=INT " + std::to_string(seconds) + " " + ganengine_binary() +
                     " " + args + " </dev/null 2>&1");
}

CommandResult run_ganengine_ranks(const std::vector<std::string>& envs, const std::string& args) {
  // Each rank in the background with its own environment, output prefixed with its rank; the
  // exit code is the first non-zero one.
  std::string cmd = "codes=0; ";
  for (size_t k = 0; k < envs.size(); ++k)
    cmd += "( env " + envs[k] + " " + ganengine_binary() + " " + args + " </dev/null 2>&1 | sed 's/^/[rank " +
           std::to_string(k) + "] /'; exit ${PIPESTATUS[0]} ) & pid" + std::to_string(k) + "=$!; ";
  for (size_t k = 0; k < envs.size(); ++k)
    cmd += "wait $pid" + std::to_string(k) + " || { c=$?; [ $codes -eq 0 ] && codes=$c; }; ";
  cmd += "exit $codes";
  return run_command("bash -c '" + [&] {
    std::string quoted;
    for (char c : cmd) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return quoted;
  }() + "'");
}

CommandResult run_ganengine_mpirun(int ranks, const std::string& args, int timeout_s) {
  // Open MPI starts the ranks with its own environment: only what -x names reaches them (and
  // naming an unset variable is an error).
  std::string exports;
  for (const char* var : {"LD_LIBRARY_PATH", "NCCL_NVLS_ENABLE", "NCCL_DEBUG"})
    if (std::getenv(var)) exports += std::string(" -x ") + var;
  return run_command("timeout " + std::to_string(timeout_s) + " mpirun --allow-run-as-root --oversubscribe -np " +
                     std::to_string(ranks) + exports + " " + ganengine_binary() + " " + args + " </dev/null 2>&1");
}

}  // namespace ge::test
