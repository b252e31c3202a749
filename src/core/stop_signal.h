// SIGINT (Ctrl-C) and SIGTERM (what kill, docker stop and SLURM send before SIGKILL) ask a long
// run to stop at its next safe point instead of killing it: the handler only records the
// signal, and the loop checks stop_signal() between steps, saves where it was and exits with
// 128 + the signal's number, as a shell reports a process that a signal ended. A second
// signal of the same kind while the first is being honoured ends the process at once, if it
// comes at least a second after the first: one request can arrive twice (coreutils' timeout
// signals its child and then the child's whole process group), and that must not kill the save.
#pragma once

namespace ge {

// Installs the handlers for its lifetime and restores the previous ones after; clears any
// signal recorded before.
class StopSignalScope {
 public:
  StopSignalScope();
  ~StopSignalScope();
  StopSignalScope(const StopSignalScope&) = delete;
  StopSignalScope& operator=(const StopSignalScope&) = delete;
};

// The signal received (SIGINT or SIGTERM) since the scope began, or 0.
int stop_signal();

// "SIGINT", "SIGTERM", or "signal N".
const char* stop_signal_name(int signo);

}  // namespace ge
