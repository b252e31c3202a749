#include <cstdlib>
#include <map>
#include <mutex>

#include "core/backend.h"
#include "runtime/cuda_check.h"
#include "runtime/pinned_memory.h"

namespace ge {
namespace {

struct PinnedCache {
  std::mutex mu;
  std::multimap<size_t, void*> free_blocks;
};

PinnedCache& cache() {
  static auto* c = new PinnedCache;  // leaked on purpose: tensors may die during static destruction
  return *c;
}

size_t rounded(size_t bytes) { return ((bytes + 4095) / 4096) * 4096; }

}  // namespace

void* pinned_alloc(size_t bytes) {
  const size_t want = rounded(bytes == 0 ? 1 : bytes);
  if (!cuda_available()) {
    void* p = std::aligned_alloc(4096, want);
    if (!p) fail("out of host memory allocating ", want, " bytes");
    return p;
  }
  {
    std::lock_guard<std::mutex> lock(cache().mu);
    auto it = cache().free_blocks.find(want);
    if (it != cache().free_blocks.end()) {
      void* p = it->second;
      cache().free_blocks.erase(it);
      return p;
    }
  }
  void* p = nullptr;
  CUDA_CHECK(cudaHostAlloc(&p, want, cudaHostAllocDefault));
  return p;
}

void pinned_free(void* p, size_t bytes) {
  if (!p) return;
  if (!cuda_available()) {
    std::free(p);
    return;
  }
  std::lock_guard<std::mutex> lock(cache().mu);
  cache().free_blocks.emplace(rounded(bytes == 0 ? 1 : bytes), p);
}

}  // namespace ge
