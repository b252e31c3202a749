// read_idx_images: one pass through gzread; gzip or not is zlib's business, the layout ours.
#include "data/idx_images.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "core/checked_size.h"
#include "ganengine/error.h"

namespace ge {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // unsigned byte elements, 3 dimensions
constexpr uint32_t kLabelsMagic = 0x00000801;  // the labels file beside it, a common mix-up
constexpr int64_t kMaxSide = 1 << 14;
constexpr int64_t kChunk = int64_t(1) << 26;
// Deflate cannot expand a byte of compressed data into more than 1032 bytes (a run of 258
// bytes costs at least two bits), so a gzip file of n bytes holds at most 1032 n bytes.
constexpr int64_t kMaxDeflateRatio = 1032;

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

uint32_t big_endian32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

// Reads up to `bytes`; returns how many came. A zlib error (corrupt or truncated gzip data)
// throws, so a short count means the file ended cleanly.
int64_t read_some(gzFile file, const std::string& path, uint8_t* out, int64_t bytes) {
  int64_t done = 0;
  while (done < bytes) {
    const unsigned chunk = static_cast<unsigned>(std::min<int64_t>(bytes - done, 1 << 30));
    const int got = gzread(file, out + done, chunk);
    if (got < 0 || (got == 0 && !gzeof(file))) {
      int code = Z_OK;
      const char* message = gzerror(file, &code);
      fail(path, ": cannot decompress: ", message ? message : "zlib error",
           " (is the gzip file truncated or corrupt?); expected an IDX image file, gzipped or not");
    }
    if (got == 0) break;
    done += got;
  }
  // zlib reports a gzip stream cut short as an error only once the caller asks again.
  int code = Z_OK;
  const char* message = gzerror(file, &code);
  if (code != Z_OK && code != Z_STREAM_END)
    fail(path, ": the gzip stream is broken or truncated (", message ? message : "zlib error", ")");
  return done;
}

}  // namespace

IdxImages read_idx_images(const std::string& path) {
  errno = 0;
  GzFile file(gzopen(path.c_str(), "rb"));
  if (!file) fail("cannot open ", path, ": ", errno ? std::strerror(errno) : "out of memory");
  gzbuffer(file.get(), 1 << 17);

  uint8_t header[16];
  const int64_t got = read_some(file.get(), path, header, sizeof header);
  if (got < int64_t(sizeof header))
    fail(path, ": ", got, " bytes, too short for an IDX header (16 bytes: magic 0x00000803, count, rows, cols)");
  const uint32_t magic = big_endian32(header);
  if (magic != kImagesMagic) {
    char text[16];
    std::snprintf(text, sizeof text, "0x%08x", magic);
    fail(path, ": magic number ", text, ", expected 0x00000803 (an IDX file of unsigned-byte images, 3 dimensions)",
         magic == kLabelsMagic ? "; this is a labels file (idx1), not the images (idx3)" : "");
  }
  IdxImages images;
  images.count = big_endian32(header + 4);
  const int64_t rows = big_endian32(header + 8), cols = big_endian32(header + 12);
  if (images.count < 1 || rows < 1 || cols < 1 || rows > kMaxSide || cols > kMaxSide)
    fail(path, ": header gives ", images.count, " images of ", rows, " x ", cols,
         ", expected at least one image of between 1 and ", kMaxSide, " pixels a side");
  images.rows = static_cast<int>(rows);
  images.cols = static_cast<int>(cols);

  // Grown as the data arrives, so a corrupt header announcing terabytes fails on the data's
  // end, not on an allocation; a gzip file whose header claims more than its compressed size
  // could ever inflate to fails before anything is inflated.
  const int64_t bytes = checked_product({images.count, rows, cols}, path + ": IDX image bytes");
  struct stat st {};
  if (!gzdirect(file.get()) && ::stat(path.c_str(), &st) == 0) {
    const int64_t most = checked_mul(static_cast<int64_t>(st.st_size), kMaxDeflateRatio, "gzip inflated size bound");
    if (bytes > most)
      fail(path, ": header gives ", images.count, " images of ", rows, " x ", cols, " (", bytes,
           " bytes), more than a gzip file of ", st.st_size, " bytes can hold (at most ", most,
           " bytes inflated); expected an IDX image file whose header matches its data");
  }
  int64_t pixels = 0;
  while (pixels < bytes) {
    const int64_t want = std::min<int64_t>(bytes - pixels, kChunk);
    images.pixels.resize(static_cast<size_t>(pixels + want));
    const int64_t got_now = read_some(file.get(), path, images.pixels.data() + pixels, want);
    pixels += got_now;
    if (got_now < want) break;
  }
  if (pixels < bytes)
    fail(path, ": the file ends after ", pixels, " pixel bytes, expected ", bytes, " (", images.count, " images of ",
         rows, " x ", cols, "); is it truncated?");
  uint8_t extra = 0;
  if (read_some(file.get(), path, &extra, 1) != 0)
    fail(path, ": more bytes follow the ", images.count, " images of ", rows, " x ", cols,
         " its header announces; expected exactly ", 16 + bytes, " bytes (uncompressed)");
  return images;
}

}  // namespace ge
