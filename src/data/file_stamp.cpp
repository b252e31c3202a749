// FileStamp: stat() in the form fingerprints use.
#include "data/file_stamp.h"

#include <sys/stat.h>

namespace ge {

FileStamp file_stamp(const std::string& path) {
  struct stat st {};
  FileStamp stamp;
  if (::stat(path.c_str(), &st) != 0) return stamp;
  stamp.exists = true;
  stamp.size = static_cast<int64_t>(st.st_size);
  stamp.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return stamp;
}

std::string file_stamp_line(const std::string& path) {
  const FileStamp s = file_stamp(path);
  if (!s.exists) return path + " missing\n";
  return path + " size=" + std::to_string(s.size) + " mtime_ns=" + std::to_string(s.mtime_ns) + "\n";
}

}  // namespace ge
