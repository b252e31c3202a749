// Small dataset files built by the tests themselves: IDX images, gzip streams, ustar archives.
#pragma once
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace ge::test {

// An IDX image file: magic 0x00000803, count, rows, cols (big-endian), then the pixels.
inline std::string idx_images(uint32_t count, uint32_t rows, uint32_t cols, const std::vector<uint8_t>& pixels,
                              uint32_t magic = 0x00000803) {
  std::string out;
  for (uint32_t v : {magic, count, rows, cols})
    for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((v >> shift) & 0xff);
  out.append(pixels.begin(), pixels.end());
  return out;
}

// The gzip (RFC 1952) stream of bytes, as gzip(1) would write it.
inline std::string gzip_bytes(const std::string& bytes) {
  z_stream z{};
  if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) throw std::runtime_error("deflateInit2");
  std::string out(deflateBound(&z, bytes.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("deflate");
  return out;
}

// A ustar archive in memory: add() entries, then bytes() ends it with two zero blocks.
class TarBuilder {
 public:
  void add_file(const std::string& name, const std::string& data) { add(name, data, '0'); }
  void add_directory(const std::string& name) { add(name, "", '5'); }
  void add_symlink(const std::string& name, const std::string& target) { add(name, "", '2', target); }

  std::string bytes() const { return archive_ + std::string(1024, '\0'); }

 private:
  void add(const std::string& name, const std::string& data, char type, const std::string& link = "") {
    char h[512] = {};
    std::snprintf(h, 100, "%s", name.c_str());
    std::snprintf(h + 100, 8, "%07o", 0644);
    std::snprintf(h + 108, 8, "%07o", 1000);
    std::snprintf(h + 116, 8, "%07o", 1000);
    std::snprintf(h + 124, 12, "%011llo", static_cast<unsigned long long>(data.size()));
    std::snprintf(h + 136, 12, "%011o", 1300000000);
    h[156] = type;
    std::snprintf(h + 157, 100, "%s", link.c_str());
    std::memcpy(h + 257, "ustar", 6);
    h[263] = h[264] = '0';  // the version field: the two bytes "00", no terminator
    std::memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (unsigned char c : h) sum += c;
    std::snprintf(h + 148, 8, "%06o", sum);
    archive_.append(h, 512);
    archive_ += data;
    archive_.append((512 - data.size() % 512) % 512, '\0');
  }
  std::string archive_;
};

}  // namespace ge::test
