// Files that appear whole or not at all. Output is written to "<path>.tmp.<pid>", flushed to
// disk, and renamed over path only when complete: a crash or error mid-write never leaves a
// truncated checkpoint where a good one was, and a failed write removes its temporary.
#pragma once
#include <cstddef>
#include <string>

namespace ge {

class AtomicFile {
 public:
  // Creates the temporary; throws ge::Error naming path when that is impossible (missing
  // directory, no permission).
  explicit AtomicFile(const std::string& path);
  // Without commit(), the temporary is deleted and path is left as it was.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes);
  // fsync, close, rename over path, fsync the directory so the rename itself is durable.
  void commit();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }

 private:
  void discard() noexcept;

  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace ge
