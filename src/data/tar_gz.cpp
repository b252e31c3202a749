// extract_tar_gz: 512-byte headers (name, octal size, checksum, type, ustar prefix), each
// followed by its data padded to 512 bytes; two zero blocks end the archive. GNU long names
// ('L' entries) are honoured, pax headers ('x', 'g') skipped: the release needs neither, but
// tar programs emit them for long paths.
#include "data/tar_gz.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "ganengine/error.h"

namespace ge {
namespace {

constexpr size_t kBlock = 512;
constexpr uint64_t kMaxLongName = 1 << 16;

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

class TarStream {
 public:
  explicit TarStream(const std::string& path) : path_(path) {
    errno = 0;
    file_.reset(gzopen(path.c_str(), "rb"));
    if (!file_) fail("cannot open ", path, ": ", errno ? std::strerror(errno) : "out of memory");
    gzbuffer(file_.get(), 1 << 17);
  }

  // Reads up to `bytes`, returning how many came (fewer only at the end of the stream).
  size_t read(void* out, size_t bytes) {
    size_t done = 0;
    while (done < bytes) {
      const int got = gzread(file_.get(), static_cast<char*>(out) + done, static_cast<unsigned>(bytes - done));
      if (got < 0 || (got == 0 && !gzeof(file_.get()))) gzip_failed();
      if (got == 0) break;
      done += static_cast<size_t>(got);
    }
    // A gzip stream cut short ends like a complete one; only zlib's error state tells them apart.
    int code = Z_OK;
    gzerror(file_.get(), &code);
    if (code != Z_OK) gzip_failed();
    return done;
  }

  void read_exactly(void* out, size_t bytes, const std::string& what) {
    if (read(out, bytes) != bytes)
      fail("cannot extract ", path_, ": the archive ends inside ", what, " (is it truncated?)");
  }

 private:
  [[noreturn]] void gzip_failed() {
    int code = Z_OK;
    const char* message = gzerror(file_.get(), &code);
    fail("cannot extract ", path_, ": the gzip data is corrupt or truncated (", message ? message : "zlib error",
         "); expected a .tar.gz archive");
  }

  std::string path_;
  std::unique_ptr<gzFile_s, GzCloser> file_;
};

// A numeric header field: octal digits (space or NUL terminated), or GNU's base-256 form
// (first byte's high bit set) for sizes beyond 8 GiB.
bool parse_number(const char* field, size_t width, uint64_t* out) {
  const auto* f = reinterpret_cast<const unsigned char*>(field);
  uint64_t v = 0;
  if (f[0] & 0x80) {
    v = f[0] & 0x3f;
    for (size_t i = 1; i < width; ++i) v = (v << 8) | f[i];
    *out = v;
    return true;
  }
  size_t i = 0;
  while (i < width && f[i] == ' ') ++i;
  bool any = false;
  for (; i < width && f[i] >= '0' && f[i] <= '7'; ++i, any = true) v = v * 8 + (f[i] - '0');
  for (; i < width; ++i)
    if (f[i] != ' ' && f[i] != 0) return false;
  *out = v;
  return any;
}

std::string field(const char* f, size_t width) { return std::string(f, strnlen(f, width)); }

// Relative, and never above the extraction directory.
bool safe_name(const std::string& name) {
  if (name.empty() || name[0] == '/') return false;
  size_t start = 0;
  while (start <= name.size()) {
    const size_t slash = name.find('/', start);
    const std::string part = name.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part == "..") return false;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return true;
}

}  // namespace

void extract_tar_gz(const std::string& archive, const std::string& dest_dir) {
  namespace fs = std::filesystem;
  TarStream in(archive);
  std::string long_name;  // from a preceding GNU 'L' entry
  std::vector<char> chunk(1 << 20);
  int entries = 0;
  for (;;) {
    char header[kBlock];
    const size_t got = in.read(header, kBlock);
    if (got == 0 && entries > 0) return;  // some writers omit the two closing zero blocks
    if (got != kBlock) fail("cannot extract ", archive, ": the archive ends inside a header (is it truncated?)");
    if (std::all_of(header, header + kBlock, [](char c) { return c == 0; })) {
      if (entries == 0) fail("cannot extract ", archive, ": the archive is empty");
      return;
    }
    uint64_t stored_sum = 0, size = 0;
    unsigned sum = 0;
    for (size_t i = 0; i < kBlock; ++i) sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(header[i]);
    if (!parse_number(header + 148, 8, &stored_sum) || stored_sum != sum || !parse_number(header + 124, 12, &size))
      fail("cannot extract ", archive, ": entry ", entries + 1,
           " has a corrupt header (checksum or size field); expected a tar archive");
    ++entries;

    std::string name = field(header, 100);
    if (std::memcmp(header + 257, "ustar", 5) == 0 && header[345] != 0) name = field(header + 345, 155) + "/" + name;
    if (!long_name.empty()) {
      name = long_name;
      long_name.clear();
    }
    const char type = header[156];

    const uint64_t padded = (size + kBlock - 1) / kBlock * kBlock;
    const std::string what = "the data of '" + name + "'";
    if (type == 'L') {  // the next entry's name
      if (size > kMaxLongName) fail("cannot extract ", archive, ": a long name of ", size, " bytes");
      std::vector<char> text(static_cast<size_t>(padded));
      in.read_exactly(text.data(), text.size(), what);
      long_name = field(text.data(), static_cast<size_t>(size));
      continue;
    }
    const bool is_file = type == '0' || type == '\0' || type == '7';
    while (!name.empty() && name.back() == '/') name.pop_back();
    const bool wanted = (is_file || type == '5') && !name.empty() && name != ".";
    if (wanted && !safe_name(name))
      fail("cannot extract ", archive, ": refusing entry '", name, "', which points outside the target directory");

    const fs::path target = fs::path(dest_dir) / name;
    if (wanted) {
      std::error_code ec;
      fs::create_directories(type == '5' ? target : target.parent_path(), ec);
      if (ec) fail("cannot extract ", archive, ": cannot create directory for ", target.string(), ": ", ec.message());
    }
    // The data is streamed through in chunks, written only for regular files.
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> out(nullptr, &std::fclose);
    if (wanted && is_file) {
      out.reset(std::fopen(target.string().c_str(), "wb"));
      if (!out) fail("cannot extract ", archive, ": cannot create ", target.string(), ": ", std::strerror(errno));
    }
    for (uint64_t left = padded, payload = size; left > 0;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(left, chunk.size()));
      in.read_exactly(chunk.data(), n, what);
      const size_t keep = static_cast<size_t>(std::min<uint64_t>(payload, n));
      if (out && keep && std::fwrite(chunk.data(), 1, keep, out.get()) != keep)
        fail("cannot extract ", archive, ": cannot write ", target.string(), " (is the disk full?)");
      left -= n;
      payload -= keep;
    }
    if (out && std::fclose(out.release()) != 0)
      fail("cannot extract ", archive, ": cannot write ", target.string(), " (is the disk full?)");
  }
}

}  // namespace ge
