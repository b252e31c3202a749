// The header of a .gecache file (layout in ganengine/dataset_cache.h): written before the
// images, and checked against what the current source expects before a cache is trusted.
#pragma once
#include <cstdint>
#include <string>

namespace ge {

struct CacheHeader {
  uint64_t count = 0;
  uint32_t image_size = 0;
  uint32_t channels = 0;
  std::string fingerprint_md5;  // 32 hex digits
  std::string name;

  uint64_t image_bytes() const { return uint64_t(image_size) * image_size * channels; }
};

// Version 2 added the table of per-image CRC-32s after the images.
constexpr uint32_t kCacheFormatVersion = 2;
constexpr uint64_t kCacheChecksumBytes = 4;  // per image, after all images

// The header's bytes, its own checksum included; the images follow directly.
std::string encode_cache_header(const CacheHeader& header);

// What is wrong with a cache file of `file_bytes` bytes starting at `file` for a source
// described by `expected`: "" when it can be used, else a short reason for the rebuild notice
// ("truncated", "corrupt header", "source changed", ...). On success *images_offset is where
// image 0 starts; the checksums follow the last image.
std::string cache_file_problem(const uint8_t* file, uint64_t file_bytes, const CacheHeader& expected,
                               uint64_t* images_offset);

}  // namespace ge
