// ReadOnlyFile: open + fstat once, then pread, which keeps no file position and so needs no lock.
#include "data/read_only_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ganengine/error.h"

namespace ge {

ReadOnlyFile::ReadOnlyFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail("cannot open ", path, ": ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    fail("cannot read ", path, ": ", S_ISREG(st.st_mode) ? std::strerror(err) : "not a regular file");
  }
  size_ = static_cast<int64_t>(st.st_size);
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

ReadOnlyFile::ReadOnlyFile(ReadOnlyFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_), size_(other.size_) {
  other.fd_ = -1;
}

void ReadOnlyFile::read_at(int64_t offset, void* out, int64_t bytes) const {
  auto* dst = static_cast<char*>(out);
  int64_t done = 0;
  while (done < bytes) {
    const ssize_t got = ::pread(fd_, dst + done, static_cast<size_t>(bytes - done), static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail("cannot read ", path_, " at byte ", offset + done, ": ", std::strerror(errno));
    if (got == 0)
      fail("cannot read ", path_, ": expected ", bytes, " bytes at byte ", offset, ", the file ends after ", done,
           " (was it truncated while in use?)");
    done += got;
  }
}

}  // namespace ge
