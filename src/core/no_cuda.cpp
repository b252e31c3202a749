// What a CPU-only build answers where the CUDA backend would be.
#ifndef GE_WITH_CUDA
#include <cstdlib>

#include "ganengine/backend.h"
#include "ganengine/error.h"
#include "ganengine/pinned_memory.h"

namespace ge {
void* pinned_alloc(size_t bytes) {
  void* p = std::aligned_alloc(4096, ((bytes + 4095) / 4096 + (bytes == 0)) * 4096);
  if (!p) fail("out of host memory allocating ", bytes, " bytes");
  return p;
}
void pinned_free(void* p, size_t) { std::free(p); }
bool built_with_cuda() { return false; }
bool cuda_available() { return false; }
int cuda_device_count() { return 0; }
void synchronize(Device) {}
}  // namespace ge
#endif
