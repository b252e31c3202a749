// write_decoded_images: chunks of images decoded by a few threads, written by the caller.
// Writing a chunk takes milliseconds against seconds of decoding, so no overlap is needed.
#include "data/dataset_cache_build.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "ganengine/error.h"

namespace ge {
namespace {

using Clock = std::chrono::steady_clock;

// Chunks small enough to bound memory and to update the progress line often, large enough
// that starting threads per chunk costs nothing measurable.
constexpr size_t kMaxChunkBytes = size_t(64) << 20;
constexpr int64_t kMaxChunkImages = 1024;

std::string format_duration(double seconds) {
  const long long s = static_cast<long long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
  return buf;
}

// "<path>: 1234/50000 images, 850 img/s, ETA 0:57", silent for the first 2 s (small datasets
// finish before anyone waits). On a terminal the line is redrawn in place twice a second;
// into a log it is a new line every 30 s.
class Progress {
 public:
  Progress(const std::string& path, int64_t total) : path_(path), total_(total), tty_(::isatty(2) == 1) {}
  ~Progress() {
    if (shown_ && tty_) std::fputc('\n', stderr);  // also when an error ends the build early
  }

  void update(int64_t done) {
    const double elapsed = seconds_since(start_);
    if (elapsed < 2.0 || (shown_ && seconds_since(last_) < (tty_ ? 0.5 : 30.0))) return;
    const double rate = done / std::max(elapsed, 1e-9);
    const std::string eta = done > 0 ? format_duration((total_ - done) / rate) : "?";
    std::fprintf(stderr, "%sganengine: decoding into dataset cache %s: %lld/%lld images, %.0f img/s, ETA %s%s",
                 tty_ ? "\r\033[K" : "", path_.c_str(), static_cast<long long>(done), static_cast<long long>(total_),
                 rate, eta.c_str(), tty_ ? "" : "\n");
    std::fflush(stderr);
    shown_ = true;
    last_ = Clock::now();
  }

  void finish() {
    if (!shown_) return;
    std::fprintf(stderr, "%sganengine: dataset cache %s written: %lld images in %s\n", tty_ ? "\r\033[K" : "",
                 path_.c_str(), static_cast<long long>(total_), format_duration(seconds_since(start_)).c_str());
    shown_ = false;
  }

 private:
  static double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
  std::string path_;
  int64_t total_;
  bool tty_;
  bool shown_ = false;
  Clock::time_point start_ = Clock::now(), last_ = start_;
};

// Images [first, first + n) of source into out, on `threads` threads (the caller is one).
// After each image it decodes, the caller reports how many of the chunk are done, so the
// progress line moves even when a chunk takes long.
template <class OnProgress>
void decode_chunk(const Dataset& source, int64_t first, int64_t n, size_t image_bytes, int threads, uint8_t* out,
                  OnProgress on_progress) {
  std::atomic<int64_t> next{0}, done{0};
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::exception_ptr error;
  auto work = [&](bool caller) {
    for (int64_t i = next++; i < n && !failed; i = next++) {
      try {
        source.read(first + i, out + size_t(i) * image_bytes);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        failed = true;
      }
      const int64_t finished = ++done;
      if (caller) on_progress(finished);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads && t < n; ++t) pool.emplace_back(work, false);
  work(true);
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace

uint32_t image_checksum(const uint8_t* bytes, size_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (size > 0) {  // zlib takes 32-bit lengths
    const uInt n = static_cast<uInt>(std::min<size_t>(size, 1u << 30));
    crc = crc32(crc, bytes, n);
    bytes += n;
    size -= n;
  }
  return static_cast<uint32_t>(crc);
}

void write_decoded_images(const Dataset& source, int workers, const std::string& path, std::FILE* f) {
  const size_t image_bytes = size_t(source.image_size()) * source.image_size() * source.channels();
  const int64_t total = source.size();
  const int64_t chunk =
      std::clamp<int64_t>(int64_t(kMaxChunkBytes / std::max<size_t>(image_bytes, 1)), 1, kMaxChunkImages);
  std::vector<uint8_t> buffer(size_t(std::min(chunk, std::max<int64_t>(total, 1))) * image_bytes);
  Progress progress(path, total);
  std::string checksums;
  checksums.reserve(size_t(total) * 4);
  for (int64_t first = 0; first < total; first += chunk) {
    const int64_t n = std::min(chunk, total - first);
    decode_chunk(source, first, n, image_bytes, std::max(1, workers), buffer.data(),
                 [&](int64_t done) { progress.update(first + done); });
    const size_t bytes = size_t(n) * image_bytes;
    if (std::fwrite(buffer.data(), 1, bytes, f) != bytes)
      fail("cannot write dataset cache ", path, ": ", std::strerror(errno), " (is the disk full?)");
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t crc = image_checksum(buffer.data() + size_t(i) * image_bytes, image_bytes);
      for (int b = 0; b < 4; ++b) checksums += static_cast<char>((crc >> (8 * b)) & 0xff);
    }
    progress.update(first + n);
  }
  if (std::fwrite(checksums.data(), 1, checksums.size(), f) != checksums.size())
    fail("cannot write dataset cache ", path, ": ", std::strerror(errno), " (is the disk full?)");
  progress.finish();
}

}  // namespace ge
