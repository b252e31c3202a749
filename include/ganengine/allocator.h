// Memory for tensors. The GPU allocator caches freed blocks by size, so once a training step
// has run once, later steps reuse memory and never call cudaMalloc (which would synchronise
// the device and break CUDA graph capture).
#pragma once
#include <cstddef>

#include "ganengine/dtype.h"

namespace ge {

void* device_alloc(Device d, size_t bytes);
void device_free(Device d, void* p, size_t bytes);

struct AllocatorStats {
  size_t cuda_malloc_calls = 0;   // cudaMalloc calls so far
  size_t bytes_reserved = 0;      // held from the driver, in use or cached
  size_t bytes_in_use = 0;
  size_t peak_bytes_in_use = 0;
};
AllocatorStats cuda_allocator_stats(int device_index = 0);
void cuda_allocator_release_cached(int device_index = 0);  // cudaFree every cached block

}  // namespace ge
