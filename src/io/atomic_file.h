// Files that appear whole or not at all, and the directories they go into.
//
// Everything the engine writes for a user (image grids, checkpoints, weights) goes through
// here: the bytes are written to "<path>.tmp.<pid>" in the same directory, flushed and
// fsynced, then renamed over path. A crash or error mid-write therefore never leaves a
// truncated file where a good one was, and a failed write removes its temporary.
#pragma once
#include <cstddef>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

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

// Replaces (or creates) path with exactly these bytes. Throws ge::Error naming path, the OS
// error and a hint when that is impossible; path is then left as it was.
void write_file_atomically(const std::string& path, const std::string& bytes);

// The same for output produced piece by piece: writer streams into the temporary file. If
// writer throws, the temporary is removed, path is left as it was and the exception goes on
// unchanged. Write errors writer leaves on the stream (ferror) are detected and reported.
void write_file_atomically(const std::string& path, const std::function<void(std::FILE*)>& writer);

// The temporary a write of path goes through: "<path>.tmp.<pid>" beside it.
std::string temporary_path_for(const std::string& path);

// Renames each from over its to, in order, then makes the renames durable. Used to publish
// files written to temporaries together: the last one is the one whose presence tells that
// the others are complete. Throws ge::Error naming the file when a rename fails (the earlier
// ones stay done; the caller's manifest then tells the set is mixed).
void rename_in_order(const std::vector<std::pair<std::string, std::string>>& from_to);

// Removes the "<name>.tmp.<pid>" files in dir that a process no longer running left behind
// (killed mid-write, SIGKILL or a power loss); a live process's temporaries are left alone.
// Returns the names removed. A missing dir removes nothing.
std::vector<std::string> remove_stale_temporaries(const std::string& dir);

// mkdir -p: creates dir and any missing parents. Throws ge::Error when a component exists but
// is not a directory, when a directory cannot be created, or when dir ends up not writable.
// An empty dir means the current directory and does nothing.
void ensure_directory(const std::string& dir);

}  // namespace ge
