// Atomic file replacement: the AtomicFile class (used by the safetensors writer) and the
// write_file_atomically helpers (atomic_file.h) share one recipe:
// write "<path>.tmp.<pid>", fsync, rename over path, fsync the directory.
#include "io/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "ganengine/error.h"

namespace ge {
namespace {

// Hints appended to OS errors: what a user can check when the write fails at that stage.
constexpr const char* kCreateHint = " (does the directory exist and is it writable?)";
constexpr const char* kWriteHint = " (is the disk full?)";
constexpr const char* kRenameHint = " (is there a directory of that name?)";

std::string errno_text() { return std::strerror(errno); }

// The temporary lives beside its target so that the final rename never crosses file systems.
std::string temp_path_for(const std::string& path) { return path + ".tmp." + std::to_string(::getpid()); }

std::string directory_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Best effort: the data is complete either way; this only makes the new name survive a crash.
void sync_directory_of(const std::string& path) {
  const int dir = ::open(directory_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

// Owns a temporary FILE* until commit(); anything short of a commit closes and deletes it.
class TempStream {
 public:
  explicit TempStream(const std::string& path) : path_(path), temp_(temp_path_for(path)) {
    file_ = std::fopen(temp_.c_str(), "wb");
    if (!file_) fail("cannot write ", path_, ": cannot create ", temp_, ": ", errno_text(), kCreateHint);
  }
  ~TempStream() {
    if (committed_) return;
    if (file_) std::fclose(file_);
    ::unlink(temp_.c_str());
  }
  TempStream(const TempStream&) = delete;
  TempStream& operator=(const TempStream&) = delete;

  std::FILE* file() const { return file_; }

  void commit() {
    if (std::ferror(file_)) {
      // errno was cleared before the writer ran, so a nonzero value is the write's own error.
      const std::string why = errno != 0 ? errno_text() : "I/O error";
      fail("cannot write ", path_, ": writing ", temp_, " failed: ", why, kWriteHint);
    }
    if (std::fflush(file_) != 0 || ::fsync(::fileno(file_)) != 0)
      fail("cannot write ", path_, ": flushing ", temp_, " to disk failed: ", errno_text(), kWriteHint);
    std::FILE* f = file_;
    file_ = nullptr;
    if (std::fclose(f) != 0) fail("cannot write ", path_, ": closing ", temp_, " failed: ", errno_text(), kWriteHint);
    if (std::rename(temp_.c_str(), path_.c_str()) != 0)
      fail("cannot write ", path_, ": renaming ", temp_, " over it failed: ", errno_text(), kRenameHint);
    committed_ = true;
    sync_directory_of(path_);
  }

 private:
  std::string path_;
  std::string temp_;
  std::FILE* file_ = nullptr;
  bool committed_ = false;
};

}  // namespace

// ---- streaming writes through a FILE*

void write_file_atomically(const std::string& path, const std::function<void(std::FILE*)>& writer) {
  TempStream temp(path);
  errno = 0;
  writer(temp.file());  // an exception leaves through ~TempStream, which removes the temporary
  temp.commit();
}

void write_file_atomically(const std::string& path, const std::string& bytes) {
  write_file_atomically(path, [&](std::FILE* f) { std::fwrite(bytes.data(), 1, bytes.size(), f); });
}

std::string temporary_path_for(const std::string& path) { return temp_path_for(path); }

void rename_in_order(const std::vector<std::pair<std::string, std::string>>& from_to) {
  for (const auto& [from, to] : from_to)
    if (std::rename(from.c_str(), to.c_str()) != 0)
      fail("cannot write ", to, ": renaming ", from, " over it failed: ", errno_text(), kRenameHint);
  for (const auto& entry : from_to) sync_directory_of(entry.second);
}

namespace {

// The pid of a "<name>.tmp.<pid>" file name, or 0 when the name is not of that form.
long temporary_owner(const std::string& name) {
  const size_t at = name.rfind(".tmp.");
  if (at == std::string::npos || at == 0) return 0;
  const std::string digits = name.substr(at + 5);
  if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::stol(digits);
}

bool process_is_running(long pid) { return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM; }

}  // namespace

std::vector<std::string> remove_stale_temporaries(const std::string& dir) {
  std::vector<std::string> removed;
  DIR* d = ::opendir(dir.empty() ? "." : dir.c_str());
  if (!d) return removed;
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
  ::closedir(d);
  for (const std::string& name : names) {
    const long pid = temporary_owner(name);
    if (pid <= 0 || pid == ::getpid() || process_is_running(pid)) continue;
    const std::string path = dir.empty() || dir == "." ? name : (dir.back() == '/' ? dir : dir + "/") + name;
    if (::unlink(path.c_str()) == 0) removed.push_back(name);
  }
  return removed;
}

// ---- directories

void ensure_directory(const std::string& dir) {
  if (dir.empty()) return;
  // Create each prefix in turn, like mkdir -p; an existing directory is fine at every level.
  size_t end = 0;
  while (end != std::string::npos) {
    end = dir.find('/', end + 1);
    const std::string prefix = dir.substr(0, end);
    if (prefix.empty() || prefix.back() == '/') continue;  // "//" or a leading "/"
    if (::mkdir(prefix.c_str(), 0777) == 0) continue;      // the umask trims the mode
    const int mkdir_errno = errno;
    struct stat st;
    if (::stat(prefix.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) continue;
      fail("cannot create directory ", dir, ": ", prefix, " exists and is not a directory");
    }
    fail("cannot create directory ", dir, ": creating ", prefix, " failed: ", std::strerror(mkdir_errno),
         " (is its parent a writable directory?)");
  }
  // Checked now so that a run fails at start-up rather than at its first checkpoint.
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    fail("directory ", dir, " is not writable: ", errno_text(), " (check its permissions)");
}

// ---- AtomicFile: the same recipe over a raw descriptor

AtomicFile::AtomicFile(const std::string& path) : path_(path), temp_path_(temp_path_for(path)) {
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot write ", path_, ": cannot create ", temp_path_, ": ", errno_text(), kCreateHint);
}

AtomicFile::~AtomicFile() {
  if (!committed_) discard();
}

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(temp_path_.c_str());
}

void AtomicFile::write(const void* data, size_t bytes) {
  GE_CHECK(fd_ >= 0 && !committed_, "write to ", path_, " after commit");
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string why = errno_text();
      discard();
      fail("cannot write ", path_, ": writing ", temp_path_, " failed: ", why, kWriteHint);
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  GE_CHECK(fd_ >= 0 && !committed_, "commit of ", path_, " twice");
  if (::fsync(fd_) != 0) {
    const std::string why = errno_text();
    discard();
    fail("cannot write ", path_, ": flushing ", temp_path_, " to disk failed: ", why, kWriteHint);
  }
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const std::string why = errno_text();
    discard();
    fail("cannot write ", path_, ": closing ", temp_path_, " failed: ", why, kWriteHint);
  }
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const std::string why = errno_text();
    discard();
    fail("cannot write ", path_, ": renaming ", temp_path_, " over it failed: ", why, kRenameHint);
  }
  committed_ = true;
  sync_directory_of(path_);
}

}  // namespace ge
