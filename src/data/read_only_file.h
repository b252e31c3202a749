// A file opened once and read at any offset from any thread (pread), for datasets whose
// records are fixed-size slices of large files: nothing is loaded until it is asked for.
#pragma once
#include <cstdint>
#include <string>

namespace ge {

class ReadOnlyFile {
 public:
  // Throws ge::Error naming path when it cannot be opened.
  explicit ReadOnlyFile(const std::string& path);
  ~ReadOnlyFile();
  ReadOnlyFile(ReadOnlyFile&& other) noexcept;
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(ReadOnlyFile&&) = delete;

  const std::string& path() const { return path_; }
  int64_t size() const { return size_; }

  // Exactly `bytes` bytes at `offset`; a short read (the file shrank since it was opened)
  // or an I/O error throws ge::Error naming the file and the offset.
  void read_at(int64_t offset, void* out, int64_t bytes) const;

 private:
  std::string path_;
  int fd_ = -1;
  int64_t size_ = 0;
};

}  // namespace ge
