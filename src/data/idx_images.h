// IDX image files (MNIST and Fashion-MNIST: train-images-idx3-ubyte), plain or gzipped: a
// big-endian header (magic 0x00000803 = unsigned bytes, 3 dimensions; count; rows; cols),
// then count * rows * cols pixel bytes, row-major.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ge {

struct IdxImages {
  int64_t count = 0;
  int rows = 0;
  int cols = 0;
  std::vector<uint8_t> pixels;  // count * rows * cols
};

// Reads the whole file (through zlib, which passes plain files through unchanged). Throws
// ge::Error naming path and what was expected for a wrong magic number, impossible
// dimensions, a file that ends early (or a broken gzip stream), or bytes after the images.
IdxImages read_idx_images(const std::string& path);

}  // namespace ge
