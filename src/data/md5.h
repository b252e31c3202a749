// MD5 (RFC 1321), for checking downloads against the published checksums, the way torchvision
// does. Not for security: MD5 only tells a damaged or wrong file from the right one.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace ge {

class Md5 {
 public:
  Md5();
  void update(const void* data, size_t bytes);
  // The digest as 32 lowercase hex digits; the object is then spent.
  std::string hex_digest();

 private:
  void compress(const uint8_t block[64]);

  uint32_t state_[4];
  uint64_t total_bytes_ = 0;
  uint8_t pending_[64];
  size_t pending_bytes_ = 0;
};

std::string md5_hex(const std::string& bytes);
// Of a whole file; throws ge::Error naming path when it cannot be read.
std::string md5_of_file(const std::string& path);

}  // namespace ge
