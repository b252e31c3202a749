// CachedDataset: use the cache file when its header matches the source, else decode the source
// once into a new one, then serve every read from a read-only memory mapping of it.
#include "data/dataset_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "data/cache_file_format.h"
#include "data/dataset_cache_build.h"
#include "data/md5.h"
#include "ganengine/error.h"
#include "io/atomic_file.h"

namespace ge {

// The whole file mapped read-only. A rebuild, by this process or another, renames a new file
// over the name and never writes into an existing one, so a mapping stays valid as long as
// it lives. (Truncating the file by hand while it is mapped would crash readers with SIGBUS.)
struct CachedDataset::Mapping {
  void* base = MAP_FAILED;
  size_t bytes = 0;
  const uint8_t* images = nullptr;
  const uint8_t* checksums = nullptr;  // u32 little-endian per image, after the images
  size_t image_bytes = 0;
  ~Mapping() {
    if (base != MAP_FAILED) ::munmap(base, bytes);
  }

  // Maps path and checks it for `expected`. Returns null and the reason when the file should
  // be (re)built; throws when it exists but cannot be read at all (a rebuild would not help).
  static std::unique_ptr<Mapping> open(const std::string& path, const CacheHeader& expected, std::string* why);
};

std::unique_ptr<CachedDataset::Mapping> CachedDataset::Mapping::open(const std::string& path,
                                                                     const CacheHeader& expected, std::string* why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      *why = "missing";
      return nullptr;
    }
    fail("cannot read dataset cache ", path, ": ", std::strerror(errno),
         " (check the permissions of the file and of --cache-dir)");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("dataset cache ", path, " is not a regular file: move it out of the way or choose another --cache-dir");
  }
  auto m = std::make_unique<Mapping>();
  m->bytes = static_cast<size_t>(st.st_size);
  if (m->bytes > 0) m->base = ::mmap(nullptr, m->bytes, PROT_READ, MAP_SHARED, fd, 0);
  const int map_errno = errno;
  ::close(fd);  // the mapping keeps the file open
  if (m->bytes > 0 && m->base == MAP_FAILED)
    fail("cannot map dataset cache ", path, " (", m->bytes, " bytes) into memory: ", std::strerror(map_errno));
  const uint8_t* file = m->bytes > 0 ? static_cast<const uint8_t*>(m->base) : nullptr;
  uint64_t offset = 0;
  *why = cache_file_problem(file, m->bytes, expected, &offset);
  if (!why->empty()) return nullptr;
  m->images = file + offset;
  m->image_bytes = static_cast<size_t>(expected.image_bytes());
  m->checksums = m->images + size_t(expected.count) * m->image_bytes;
  return m;
}

namespace {

std::string join(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : (dir.back() == '/' ? dir + name : dir + "/" + name);
}

// cache_dir must be a directory we can read (to reuse) or create and write (to build).
void check_cache_dir_kind(const std::string& dir) {
  struct stat st {};
  if (dir.empty()) return;
  const bool exists = ::stat(dir.c_str(), &st) == 0;
  if ((exists && !S_ISDIR(st.st_mode)) || (!exists && errno == ENOTDIR))
    fail("--cache-dir ", dir, exists ? "" : ": a component of it", " exists and is not a directory: expected a ",
         "directory (created if missing) for decoded-dataset caches");
}

// Fails before hours of decoding when the finished file could not fit.
void check_free_space(const std::string& dir, const std::string& path, uint64_t need) {
  struct statvfs vfs {};
  if (::statvfs(dir.empty() ? "." : dir.c_str(), &vfs) != 0) return;  // unknown: let the write tell
  const uint64_t avail = uint64_t(vfs.f_bavail) * vfs.f_frsize;
  if (avail < need)
    fail("cannot write dataset cache ", path, ": it needs ", need, " bytes and ", dir.empty() ? "." : dir, " has ",
         avail, " free; free some space or choose another --cache-dir");
}

// Other caches of this dataset and size (other sources, or older versions of this one) are
// only mentioned, never deleted: they may belong to another run or be wanted again.
void mention_other_caches(const std::string& dir, const std::string& ours, const std::string& prefix) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string others;
  for (fs::directory_iterator it(dir.empty() ? "." : dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (n != ours && n.compare(0, prefix.size(), prefix) == 0 && n.size() > 8 &&
        n.compare(n.size() - 8, 8, ".gecache") == 0)
      others += (others.empty() ? "" : ", ") + n;
  }
  if (!others.empty())
    std::fprintf(stderr,
                 "ganengine: dataset cache: building %s; %s in the same directory %s for another source or an older "
                 "version of it, left in place (delete when no longer needed)\n",
                 ours.c_str(), others.c_str(), others.find(',') == std::string::npos ? "is" : "are");
}

}  // namespace

std::string CachedDataset::file_name(const std::string& name, int image_size, const std::string& fingerprint) {
  std::string safe = name;
  for (char& c : safe)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
  return safe + "-" + std::to_string(image_size) + "px-" + md5_hex(fingerprint).substr(0, 16) + ".gecache";
}

CachedDataset::CachedDataset(std::unique_ptr<Dataset> source, const std::string& cache_dir, int workers)
    : source_(std::move(source)) {
  GE_CHECK(source_ != nullptr, "CachedDataset needs a source dataset");
  fingerprint_ = source_->fingerprint();
  check_cache_dir_kind(cache_dir);
  const std::string name = file_name(source_->name(), source_->image_size(), fingerprint_);
  path_ = join(cache_dir, name);

  CacheHeader header;
  header.count = static_cast<uint64_t>(source_->size());
  header.image_size = static_cast<uint32_t>(source_->image_size());
  header.channels = static_cast<uint32_t>(source_->channels());
  header.fingerprint_md5 = md5_hex(fingerprint_);
  header.name = source_->name();

  std::string why;
  mapping_ = Mapping::open(path_, header, &why);
  if (mapping_) return;
  rebuild_reason_ = why;
  if (why == "missing")
    mention_other_caches(cache_dir, name, name.substr(0, name.rfind('-') + 1));  // "<name>-<size>px-"
  else
    std::fprintf(stderr, "ganengine: dataset cache %s: %s; rebuilding it\n", path_.c_str(), why.c_str());

  ensure_directory(cache_dir);  // throws naming the directory when it cannot be created or written
  const std::string encoded = encode_cache_header(header);
  check_free_space(cache_dir, path_, encoded.size() + header.count * (header.image_bytes() + kCacheChecksumBytes));
  write_file_atomically(path_, [&](std::FILE* f) {
    if (std::fwrite(encoded.data(), 1, encoded.size(), f) != encoded.size())
      fail("cannot write dataset cache ", path_, ": ", std::strerror(errno), " (is the disk full?)");
    write_decoded_images(*source_, workers, path_, f);
  });
  mapping_ = Mapping::open(path_, header, &why);
  if (!mapping_) fail("dataset cache ", path_, " is unusable right after it was written: ", why);
}

CachedDataset::~CachedDataset() = default;

void CachedDataset::read(int64_t index, uint8_t* hwc_out) const {
  GE_CHECK(index >= 0 && index < size(), "dataset cache ", path_, ": index ", index, " out of range [0, ", size(), ")");
  std::memcpy(hwc_out, mapping_->images + size_t(index) * mapping_->image_bytes, mapping_->image_bytes);
  const uint8_t* stored = mapping_->checksums + size_t(index) * kCacheChecksumBytes;
  const uint32_t want =
      uint32_t(stored[0]) | uint32_t(stored[1]) << 8 | uint32_t(stored[2]) << 16 | uint32_t(stored[3]) << 24;
  if (image_checksum(hwc_out, mapping_->image_bytes) != want)
    fail("dataset cache ", path_, ": image ", index, " does not match its checksum (the file is damaged); ",
         "delete the file and it is rebuilt from the source on the next run");
}

}  // namespace ge
