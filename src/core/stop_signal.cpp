#include "core/stop_signal.h"

#include <time.h>

#include <csignal>
#include <cstdio>

namespace ge {

namespace {

volatile std::sig_atomic_t g_stop_signal = 0;
// When the first signal came, in whole seconds of the monotonic clock.
volatile std::sig_atomic_t g_first_signal_s = 0;

std::sig_atomic_t monotonic_seconds() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe (POSIX)
  return static_cast<std::sig_atomic_t>(now.tv_sec);
}

// Async-signal-safe: records the first signal; the same signal again, a second or more later,
// restores the default action and re-raises, so a user who presses Ctrl-C twice is never stuck
// behind a slow save. A copy of the first request arriving within the second is ignored.
void on_stop_signal(int signo) {
  if (g_stop_signal == signo) {
    if (monotonic_seconds() - g_first_signal_s < 2) return;
    std::signal(signo, SIG_DFL);
    std::raise(signo);
    return;
  }
  if (g_stop_signal == 0) {
    g_first_signal_s = monotonic_seconds();
    g_stop_signal = signo;
  }
}

struct sigaction g_previous[2];
constexpr int kSignals[2] = {SIGINT, SIGTERM};

}  // namespace

StopSignalScope::StopSignalScope() {
  g_stop_signal = 0;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // reads and writes in flight go on; the loop polls the flag
  for (int i = 0; i < 2; ++i) sigaction(kSignals[i], &action, &g_previous[i]);
}

StopSignalScope::~StopSignalScope() {
  for (int i = 0; i < 2; ++i) sigaction(kSignals[i], &g_previous[i], nullptr);
}

int stop_signal() { return g_stop_signal; }

const char* stop_signal_name(int signo) {
  if (signo == SIGINT) return "SIGINT";
  if (signo == SIGTERM) return "SIGTERM";
  static char buf[32];
  std::snprintf(buf, sizeof buf, "signal %d", signo);
  return buf;
}

}  // namespace ge
