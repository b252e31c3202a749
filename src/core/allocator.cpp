#include "ganengine/allocator.h"

#include <cstdlib>
#include <new>

#include "ganengine/error.h"

namespace ge {

#ifdef GE_WITH_CUDA
namespace gpu {
void* caching_alloc(int device, size_t bytes);
void caching_free(int device, void* p, size_t bytes);
}  // namespace gpu
#endif

void* device_alloc(Device d, size_t bytes) {
  if (d.is_cpu()) {
    // 64-byte alignment suits vector loads; zero-size tensors still get a valid pointer.
    size_t rounded = ((bytes + 63) / 64) * 64;
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (!p) fail("out of host memory allocating ", bytes, " bytes");
    return p;
  }
#ifdef GE_WITH_CUDA
  return gpu::caching_alloc(d.index, bytes);
#else
  fail("device ", d.str(), " requested, but this ganengine was built without CUDA");
#endif
}

void device_free(Device d, void* p, size_t bytes) {
  if (!p) return;
  if (d.is_cpu()) {
    std::free(p);
    return;
  }
#ifdef GE_WITH_CUDA
  gpu::caching_free(d.index, p, bytes);
#else
  (void)bytes;
#endif
}

#ifndef GE_WITH_CUDA
AllocatorStats cuda_allocator_stats(int) { return {}; }
void cuda_allocator_release_cached(int) {}
void cuda_allocator_reset_peak(int) {}
void cuda_allocator_trace_peak(int, bool) {}
std::string cuda_allocator_peak_breakdown(int) { return ""; }
size_t cuda_workspace_bytes(int) { return 0; }
void cuda_release_workspace(int) {}
#endif

}  // namespace ge
