// The progress line's own clock and manners: redrawn in place at least once a second with no
// update in between, erased by hold() before anything else is printed and kept away until
// that is done, erased for good by finish(), and silent when disabled.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include <doctest/doctest.h>

#include "train/progress_line.h"

using namespace ge;

namespace {

std::string contents(std::FILE* f) {
  std::fflush(f);
  std::string out;
  std::rewind(f);
  for (int c; (c = std::fgetc(f)) != EOF;) out.push_back(static_cast<char>(c));
  std::fseek(f, 0, SEEK_END);
  return out;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

ProgressLine::Position position() {
  ProgressLine::Position p;
  p.epoch = 1;
  p.niter = 25;
  p.batch = 10;
  p.per_epoch = 100;
  p.step = 110;
  p.stop_at = 2500;
  p.steps_this_run = 110;
  p.images_this_run = 7040;
  return p;
}

}  // namespace

TEST_CASE("progress line: redrawn in place every half second without updates") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f != nullptr);
  {
    ProgressLine line(true, f);
    line.update(position());
    std::this_thread::sleep_for(std::chrono::milliseconds(1700));
    const std::string drawn = contents(f);
    CHECK(count(drawn, "\r\033[Kepoch 1/25  batch 10/100  step 110/2500") >= 2);
    CHECK(drawn.find('\n') == std::string::npos);  // in place: never a new line
    {
      const auto hold = line.hold();
      const std::string held = contents(f);
      CHECK(held.size() >= 4);
      CHECK(held.compare(held.size() - 4, 4, "\r\033[K") == 0);  // erased before anything is printed
      std::fputs("a log line\n", f);
      std::this_thread::sleep_for(std::chrono::milliseconds(700));
      const std::string after = contents(f);
      CHECK(after.compare(after.size() - 11, 11, "a log line\n") == 0);  // nothing drawn while held
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    const std::string redrawn = contents(f);
    CHECK(redrawn.find("\r\033[Kepoch", redrawn.find("a log line\n")) != std::string::npos);
    line.finish();
    const std::string finished = contents(f);
    CHECK(finished.compare(finished.size() - 4, 4, "\r\033[K") == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    CHECK(contents(f) == finished);  // finished for good
  }
  std::fclose(f);
}

TEST_CASE("progress line: disabled it writes nothing") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f != nullptr);
  {
    ProgressLine line(false, f);
    line.update(position());
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    { const auto hold = line.hold(); }
    line.finish();
  }
  CHECK(contents(f).empty());
  std::fclose(f);
}

TEST_CASE("progress line: the text gives epoch batch step images per second and both ETAs") {
  // 110 steps in 11 s: 10 steps/s; 90 batches left in the epoch, 2390 steps in the run.
  CHECK(ProgressLine::format(position(), 11.0) ==
        "epoch 1/25  batch 10/100  step 110/2500  640 img/s  ETA epoch 0m09s, run 3m59s");
  ProgressLine::Position start = position();
  start.steps_this_run = 0;
  start.images_this_run = 0;
  CHECK(ProgressLine::format(start, 0.0).find("ETA epoch ?, run ?") != std::string::npos);
  // The run ends inside the epoch: the epoch's ETA is the run's.
  ProgressLine::Position near_end = position();
  near_end.stop_at = 120;
  CHECK(ProgressLine::format(near_end, 11.0).find("ETA epoch 0m01s, run 0m01s") != std::string::npos);
  near_end.stop_at = 110 + 36000;
  near_end.per_epoch = 100000;
  CHECK(ProgressLine::format(near_end, 11.0).find("run 1h00m") != std::string::npos);
}
