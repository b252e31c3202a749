// MD5 as RFC 1321 specifies it: 64 steps per 64-byte block over four 32-bit words, message
// padded with 0x80, zeros and the bit length (little-endian). Written here rather than taken
// from a library so that the binaries need no libcrypto on the GPU hosts.
#include "data/md5.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "ganengine/error.h"

namespace ge {
namespace {

// Per-step left rotations, four per round, each repeated four times in its round.
constexpr int kShift[4][4] = {{7, 12, 17, 22}, {5, 9, 14, 20}, {4, 11, 16, 23}, {6, 10, 15, 21}};

// T[i] = floor(2^32 * |sin(i + 1)|), as the RFC defines the additive constants.
const uint32_t* sine_table() {
  static const auto table = [] {
    struct Table {
      uint32_t t[64];
    } r{};
    for (int i = 0; i < 64; ++i)
      r.t[i] = static_cast<uint32_t>(std::floor(std::fabs(std::sin(i + 1.0)) * 4294967296.0));
    return r;
  }();
  return table.t;
}

uint32_t rotate_left(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

}  // namespace

Md5::Md5() : state_{0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u}, pending_{} {}

void Md5::compress(const uint8_t block[64]) {
  uint32_t x[16];
  for (int i = 0; i < 16; ++i)
    x[i] = uint32_t(block[4 * i]) | (uint32_t(block[4 * i + 1]) << 8) | (uint32_t(block[4 * i + 2]) << 16) |
           (uint32_t(block[4 * i + 3]) << 24);
  const uint32_t* t = sine_table();
  uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
  for (int i = 0; i < 64; ++i) {
    const int round = i / 16;
    // Each round mixes b, c, d with its own function (the RFC's F, G, H, I) and reads the
    // message words in its own order.
    uint32_t f;
    int word;
    switch (round) {
      case 0:
        f = (b & c) | (~b & d);
        word = i;
        break;
      case 1:
        f = (b & d) | (c & ~d);
        word = (5 * i + 1) % 16;
        break;
      case 2:
        f = b ^ c ^ d;
        word = (3 * i + 5) % 16;
        break;
      default:
        f = c ^ (b | ~d);
        word = (7 * i) % 16;
        break;
    }
    const uint32_t rotated = rotate_left(a + f + x[word] + t[i], kShift[round][i % 4]);
    a = d;
    d = c;
    c = b;
    b = b + rotated;
  }
  state_[0] += a;
  state_[1] += b;
  state_[2] += c;
  state_[3] += d;
}

void Md5::update(const void* data, size_t bytes) {
  const auto* in = static_cast<const uint8_t*>(data);
  total_bytes_ += bytes;
  while (bytes > 0) {
    const size_t take = std::min(bytes, sizeof pending_ - pending_bytes_);
    std::memcpy(pending_ + pending_bytes_, in, take);
    pending_bytes_ += take;
    in += take;
    bytes -= take;
    if (pending_bytes_ == sizeof pending_) {
      compress(pending_);
      pending_bytes_ = 0;
    }
  }
}

std::string Md5::hex_digest() {
  const uint64_t bits = total_bytes_ * 8;
  const uint8_t one = 0x80, zero = 0;
  update(&one, 1);
  while (pending_bytes_ != 56) update(&zero, 1);
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(bits >> (8 * i));
  update(length, 8);
  std::string hex;
  char digits[3];
  for (uint32_t word : state_)
    for (int i = 0; i < 4; ++i) {
      std::snprintf(digits, sizeof digits, "%02x", (word >> (8 * i)) & 0xffu);
      hex += digits;
    }
  return hex;
}

std::string md5_hex(const std::string& bytes) {
  Md5 md5;
  md5.update(bytes.data(), bytes.size());
  return md5.hex_digest();
}

std::string md5_of_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) fail("cannot read ", path, " to check its MD5: ", std::strerror(errno));
  Md5 md5;
  std::string buffer(1 << 20, '\0');
  size_t got;
  while ((got = std::fread(buffer.data(), 1, buffer.size(), f)) > 0) md5.update(buffer.data(), got);
  const bool error = std::ferror(f);
  std::fclose(f);
  if (error) fail("cannot read ", path, " to check its MD5: read error");
  return md5.hex_digest();
}

}  // namespace ge
