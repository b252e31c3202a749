// Page-locked host memory for batches on their way to the GPU: a copy from it runs at full
// PCIe/NVLink speed with no staging through a driver buffer. Blocks are cached by size, since
// pinning memory costs far more than a malloc. Without a CUDA build (or without a GPU) these
// fall back to ordinary aligned host memory.
#pragma once
#include <cstddef>

namespace ge {

void* pinned_alloc(size_t bytes);
void pinned_free(void* p, size_t bytes);

}  // namespace ge
