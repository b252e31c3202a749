#include "core/conv_algo_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "ganengine/error.h"
#include "io/atomic_file.h"

namespace ge {

namespace {

constexpr const char* kHeader =
    "# ganengine cuDNN algorithm cache 1: <key> <algo> <math type> <workspace bytes> [<engine>]";

// Holds an exclusive flock on "<path>.lock" for the scope (or nothing if it cannot be opened):
// two processes writing at once would otherwise each drop the other's new lines.
class FileLock {
 public:
  explicit FileLock(const std::string& path) : fd_(::open((path + ".lock").c_str(), O_CREAT | O_RDWR, 0666)) {
    if (fd_ >= 0) (void)::flock(fd_, LOCK_EX);
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

}  // namespace

ConvAlgoCache::ConvAlgoCache(std::string path) : path_(std::move(path)) {}

void ConvAlgoCache::warn_once_locked(const std::string& message) {
  if (warned_) return;
  warned_ = true;
  std::fprintf(stderr, "ganengine: cuDNN algorithm cache %s: %s\n", path_.c_str(), message.c_str());
}

void ConvAlgoCache::merge_file_locked(std::map<std::string, ConvAlgoChoice>& into, int* bad_lines) const {
  std::ifstream in(path_);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string key, rest;
    ConvAlgoChoice c;
    long long ws = -1;
    const bool read = static_cast<bool>(fields >> key >> c.algo >> c.math >> ws);
    if (read) fields >> c.engine;  // optional
    const bool engine_ok = c.engine.empty() || c.engine[0] == 'e';
    if (!read || !engine_ok || (fields >> rest) || c.algo < 0 || c.math < 0 || ws < 0) {
      ++*bad_lines;
      continue;
    }
    c.workspace_bytes = static_cast<uint64_t>(ws);
    into[key] = c;
  }
}

void ConvAlgoCache::load_locked() {
  if (loaded_) return;
  loaded_ = true;
  if (path_.empty()) return;
  int bad = 0;
  merge_file_locked(choices_, &bad);
  if (bad > 0)
    warn_once_locked("ignoring " + std::to_string(bad) +
                     " line(s) it cannot read (they are dropped when it is next written)");
}

std::optional<ConvAlgoChoice> ConvAlgoCache::find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  load_locked();
  auto it = choices_.find(key);
  if (it == choices_.end()) return std::nullopt;
  ++hits_;
  return it->second;
}

void ConvAlgoCache::store(const std::string& key, const ConvAlgoChoice& choice) {
  GE_CHECK(key.find_first_of(" \t\n") == std::string::npos, "conv algorithm cache key with blanks: '", key, "'");
  std::lock_guard<std::mutex> lock(mu_);
  load_locked();
  ++searches_;
  choices_[key] = choice;
  if (path_.empty()) return;
  try {
    ensure_directory(directory_of(path_));
    FileLock file_lock(path_);
    std::map<std::string, ConvAlgoChoice> merged;
    int bad = 0;
    merge_file_locked(merged, &bad);  // what other processes wrote since we read it
    for (auto& [k, c] : choices_) merged[k] = c;
    std::ostringstream out;
    out << kHeader << "\n";
    for (auto& [k, c] : merged)
      out << k << ' ' << c.algo << ' ' << c.math << ' ' << c.workspace_bytes << (c.engine.empty() ? "" : " ")
          << c.engine << '\n';
    write_file_atomically(path_, out.str());
  } catch (const Error& e) {
    warn_once_locked(std::string("not saved (") + e.what() +
                     "); set GANENGINE_CUDNN_CACHE to a writable file, or to off");
  }
}

int ConvAlgoCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

int ConvAlgoCache::searches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return searches_;
}

std::string default_conv_algo_cache_path() {
  if (const char* v = std::getenv("GANENGINE_CUDNN_CACHE"); v && *v)
    return std::string(v) == "off" ? std::string() : std::string(v);
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/ganengine/cudnn_algos.txt";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/ganengine/cudnn_algos.txt";
  return std::string();
}

ConvAlgoCache& process_conv_algo_cache() {
  static ConvAlgoCache cache(default_conv_algo_cache_path());
  return cache;
}

}  // namespace ge
