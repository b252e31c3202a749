// What a dataset fingerprint records of a source file: its size and modification time. Like
// make and rsync, we trust these two instead of reading the contents: hashing a dataset of
// tens of gigabytes on every run would cost what the cache saves.
#pragma once
#include <cstdint>
#include <string>

namespace ge {

struct FileStamp {
  bool exists = false;  // false: stat failed (missing, unreadable); size and mtime are then 0
  int64_t size = 0;
  int64_t mtime_ns = 0;
};

// stat() of path, following symlinks (the datasets read through them).
FileStamp file_stamp(const std::string& path);

// "<path> size=<bytes> mtime_ns=<ns>", or "<path> missing": one line of a fingerprint.
std::string file_stamp_line(const std::string& path);

}  // namespace ge
