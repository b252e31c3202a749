// Runs the ganengine program the way a user would, for the end-to-end suites.
#pragma once
#include <string>
#include <vector>

namespace ge::test {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs a shell command line as given; output is its stdout only unless the line redirects stderr.
CommandResult run_command(const std::string& cmd);

// Runs `ganengine <args>` through the shell, with stdin closed.
CommandResult run_ganengine(const std::string& args);
// The same, sending SIGINT (as Ctrl-C does) after `seconds`; exit_code is the program's own.
CommandResult run_ganengine_with_interrupt(const std::string& args, int seconds);

// Several processes of one run at once, one per environment ("VAR=value VAR=value"), all with
// the same arguments: exit_code is the first failing rank's, output every rank's lines prefixed
// "[rank k] ".
CommandResult run_ganengine_ranks(const std::vector<std::string>& envs, const std::string& args);

// `mpirun -np <ranks> ganengine <args>` (Open MPI), passing on the library path and NCCL's
// settings, killed after `timeout_s` seconds.
CommandResult run_ganengine_mpirun(int ranks, const std::string& args, int timeout_s);

}  // namespace ge::test
