// The progress line `train` keeps at the bottom of a terminal: epoch, batch and step counts,
// images/s, and the time left in the epoch and in the run. A thread of its own redraws it in
// place every half second, whatever --log-interval is and however long a step or a wait for the
// data takes. Anything else printed while it is shown is printed under hold(), which erases the
// line first and keeps it away until the printing is done, so the two never share a line.
// Disabled (stderr is not a terminal, or --no-progress), it writes nothing at all: no escape
// codes reach a file or a pipe.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace ge {

class ProgressLine {
 public:
  // Where the run is, after a step.
  struct Position {
    int64_t epoch = 0, niter = 1;
    int64_t batch = 0, per_epoch = 1;  // batches of this epoch done
    int64_t step = 0, stop_at = 1;     // global steps done, and where the run stops
    int64_t steps_this_run = 0, images_this_run = 0;
  };

  explicit ProgressLine(bool enabled, std::FILE* out = stderr, double redraw_every_s = 0.5);
  ~ProgressLine();  // finish()
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  bool enabled() const { return enabled_; }
  // From the training thread after each step: only a copy under the lock.
  void update(const Position& p);
  // Erases the line; it stays away until the returned lock is released.
  [[nodiscard]] std::unique_lock<std::mutex> hold();
  // Erases the line and stops redrawing it, for good.
  void finish();

  // The line's text for a position reached after `elapsed_s` seconds of this run.
  static std::string format(const Position& p, double elapsed_s);

 private:
  void redraw_loop();
  void erase_locked();

  const bool enabled_;
  std::FILE* out_;
  const std::chrono::duration<double> every_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::mutex mutex_;
  std::condition_variable wake_;
  Position position_;
  bool have_position_ = false, shown_ = false, stopping_ = false;
  std::thread thread_;
};

}  // namespace ge
