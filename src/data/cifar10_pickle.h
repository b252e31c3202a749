// The python version of CIFAR-10 (cifar-10-batches-py/data_batch_N): each file is a pickled
// dict (Python 2 cPickle, protocol 2) whose b'data' is a numpy uint8 array of shape
// (10000, 3072). We read no Python objects: a small pickle interpreter walks the opcodes far
// enough to find where that array's raw bytes lie in the file, and checks its shape and dtype.
#pragma once
#include <cstdint>

#include "data/read_only_file.h"

namespace ge {

// The bytes of the array b'data': `rows` images of `row_bytes` bytes, row-major, starting at
// byte `offset` of the file.
struct PickledImageRows {
  int64_t offset = 0;
  int64_t rows = 0;
  int64_t row_bytes = 0;
};

// Throws ge::Error naming the file and what was expected when it is not such a pickle, when
// the array is not uint8 of shape (expected_rows, expected_row_bytes), or when the file ends early.
PickledImageRows locate_pickled_cifar_data(const ReadOnlyFile& file, int64_t expected_rows, int64_t expected_row_bytes);

}  // namespace ge
