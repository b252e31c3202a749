#include "train/progress_line.h"

#include <algorithm>
#include <cmath>

namespace ge {

namespace {

// "1h02m", "4m05s", "?" while no rate is known yet.
std::string duration_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, s / 60 % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  return buf;
}

constexpr const char* kEraseLine = "\r\033[K";  // to the line's start, then clear to its end

}  // namespace

ProgressLine::ProgressLine(bool enabled, std::FILE* out, double redraw_every_s)
    : enabled_(enabled), out_(out), every_(redraw_every_s) {
  if (enabled_) thread_ = std::thread([this] { redraw_loop(); });
}

ProgressLine::~ProgressLine() { finish(); }

void ProgressLine::update(const Position& p) {
  if (!enabled_) return;
  const std::lock_guard<std::mutex> lock(mutex_);
  position_ = p;
  have_position_ = true;
}

std::unique_lock<std::mutex> ProgressLine::hold() {
  if (!enabled_) return {};
  std::unique_lock<std::mutex> lock(mutex_);
  erase_locked();
  return lock;
}

void ProgressLine::finish() {
  if (!thread_.joinable()) return;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    erase_locked();
  }
  wake_.notify_all();
  thread_.join();
}

std::string ProgressLine::format(const Position& p, double elapsed_s) {
  const double rate = p.steps_this_run > 0 && elapsed_s > 0 ? p.steps_this_run / elapsed_s : NAN;
  const double images_per_s = elapsed_s > 0 ? p.images_this_run / elapsed_s : 0;
  char buf[200];
  std::snprintf(buf, sizeof buf, "epoch %lld/%lld  batch %lld/%lld  step %lld/%lld  %.0f img/s  ETA epoch %s, run %s",
                static_cast<long long>(p.epoch), static_cast<long long>(p.niter), static_cast<long long>(p.batch),
                static_cast<long long>(p.per_epoch), static_cast<long long>(p.step), static_cast<long long>(p.stop_at),
                images_per_s, duration_text(std::min(p.per_epoch - p.batch, p.stop_at - p.step) / rate).c_str(),
                duration_text((p.stop_at - p.step) / rate).c_str());
  return buf;
}

void ProgressLine::redraw_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (have_position_) {
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      std::fprintf(out_, "%s%s", kEraseLine, format(position_, elapsed).c_str());
      std::fflush(out_);
      shown_ = true;
    }
    wake_.wait_for(lock, every_, [this] { return stopping_; });
  }
}

void ProgressLine::erase_locked() {
  if (!shown_) return;
  std::fprintf(out_, "%s", kEraseLine);
  std::fflush(out_);
  shown_ = false;
}

}  // namespace ge
