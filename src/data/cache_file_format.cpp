// .gecache headers: fixed little-endian fields, the name, and an MD5 of all of it, so that a
// damaged header is told apart from one written for another source.
#include "data/cache_file_format.h"

#include <cstring>

#include "core/checked_size.h"
#include "data/md5.h"

namespace ge {
namespace {

constexpr char kMagic[8] = {'G', 'E', 'C', 'A', 'C', 'H', 'E', '1'};
// magic, version, header_bytes, count, image_size, channels, fingerprint MD5, name_length
constexpr uint64_t kFixedBytes = 8 + 4 + 4 + 8 + 4 + 4 + 32 + 4;
constexpr uint64_t kChecksumBytes = 32;
// Dataset names are short words; a longer one means the length field itself is damaged.
constexpr uint32_t kMaxNameBytes = 1024;

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

uint64_t get_le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

std::string encode_cache_header(const CacheHeader& h) {
  std::string out(kMagic, sizeof kMagic);
  put_le(out, kCacheFormatVersion, 4);
  put_le(out, kFixedBytes + h.name.size() + kChecksumBytes, 4);
  put_le(out, h.count, 8);
  put_le(out, h.image_size, 4);
  put_le(out, h.channels, 4);
  out += h.fingerprint_md5;
  put_le(out, h.name.size(), 4);
  out += h.name;
  return out + md5_hex(out);
}

std::string cache_file_problem(const uint8_t* file, uint64_t file_bytes, const CacheHeader& expected,
                               uint64_t* images_offset) {
  if (file_bytes == 0) return "truncated";
  const uint64_t magic_seen = file_bytes < sizeof kMagic ? file_bytes : sizeof kMagic;
  if (std::memcmp(file, kMagic, magic_seen) != 0) return "corrupt header (not a GECACHE1 file)";
  if (file_bytes < kFixedBytes) return "truncated";
  const uint32_t version = uint32_t(get_le(file + 8, 4));
  if (version != kCacheFormatVersion)
    return "cache format version " + std::to_string(version) + ", this build uses " +
           std::to_string(kCacheFormatVersion);
  const uint64_t header_bytes = get_le(file + 12, 4);
  const uint32_t name_bytes = uint32_t(get_le(file + kFixedBytes - 4, 4));
  if (name_bytes > kMaxNameBytes || header_bytes != kFixedBytes + name_bytes + kChecksumBytes) return "corrupt header";
  if (file_bytes < header_bytes) return "truncated";
  const char* text = reinterpret_cast<const char*>(file);
  const std::string before_checksum(text, header_bytes - kChecksumBytes);
  if (md5_hex(before_checksum) != std::string(text + before_checksum.size(), kChecksumBytes)) return "corrupt header";

  CacheHeader found;
  found.count = get_le(file + 16, 8);
  found.image_size = uint32_t(get_le(file + 24, 4));
  found.channels = uint32_t(get_le(file + 28, 4));
  found.fingerprint_md5.assign(reinterpret_cast<const char*>(file) + 32, 32);
  found.name.assign(reinterpret_cast<const char*>(file) + kFixedBytes, name_bytes);
  if (found.fingerprint_md5 != expected.fingerprint_md5 || found.count != expected.count ||
      found.image_size != expected.image_size || found.channels != expected.channels || found.name != expected.name)
    return "source changed";

  const uint64_t want = static_cast<uint64_t>(checked_add(
      static_cast<int64_t>(header_bytes),
      checked_mul(static_cast<int64_t>(expected.count),
                  checked_add(static_cast<int64_t>(expected.image_bytes()), kCacheChecksumBytes, "cache image bytes"),
                  "cache file size"),
      "cache file size"));
  if (file_bytes < want) return "truncated";
  if (file_bytes > want) return "corrupt (" + std::to_string(file_bytes - want) + " bytes longer than its header says)";
  *images_offset = header_bytes;
  return "";
}

}  // namespace ge
