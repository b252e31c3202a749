// GPU memory for tensors. Blocks freed by tensors go to a per-device cache keyed by size and
// are handed out again in stream order (all work runs on the context's one stream, so a block
// freed by the host is safe to reuse for work enqueued later). After the first training step
// the cache holds everything the step needs: no cudaMalloc, no implicit device sync.
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "ganengine/allocator.h"
#include "ganengine/cuda_check.h"

namespace ge {
namespace gpu {
namespace {

size_t round_size(size_t bytes) {
  const size_t small = 512, large = size_t(1) << 20;
  if (bytes < large) return ((bytes + small - 1) / small) * small;
  return ((bytes + large - 1) / large) * large;
}

struct DeviceCache {
  std::mutex mu;
  std::multimap<size_t, void*> free_blocks;      // size class -> block
  std::unordered_map<void*, size_t> block_size;  // every live or cached block
  AllocatorStats stats;
};

DeviceCache& cache(int device) {
  // Leaked on purpose: tensors freed during static destruction must still find it.
  static auto* caches = new std::vector<DeviceCache>(64);
  if (device < 0 || device >= 64) fail("CUDA device index ", device, " out of range");
  return (*caches)[device];
}

void release_all(DeviceCache& c, int device) {
  int prev = 0;
  CUDA_CHECK(cudaGetDevice(&prev));
  CUDA_CHECK(cudaSetDevice(device));
  for (auto& kv : c.free_blocks) {
    CUDA_CHECK(cudaFree(kv.second));
    c.stats.bytes_reserved -= kv.first;
    c.block_size.erase(kv.second);
  }
  c.free_blocks.clear();
  CUDA_CHECK(cudaSetDevice(prev));
}

}  // namespace

void* caching_alloc(int device, size_t bytes) {
  DeviceCache& c = cache(device);
  std::lock_guard<std::mutex> lock(c.mu);
  size_t want = round_size(bytes == 0 ? 1 : bytes);
  // Exact size classes only: a training step asks for the same multiset of sizes every time,
  // so once one step has run, every request finds a block freed by the previous step. (Handing
  // out larger blocks would save memory but let sizes steal each other's blocks, and the cache
  // might then never settle.)
  auto it = c.free_blocks.find(want);
  if (it != c.free_blocks.end()) {
    void* p = it->second;
    c.stats.bytes_in_use += it->first;
    c.free_blocks.erase(it);
    if (c.stats.bytes_in_use > c.stats.peak_bytes_in_use) c.stats.peak_bytes_in_use = c.stats.bytes_in_use;
    return p;
  }
  int prev = 0;
  CUDA_CHECK(cudaGetDevice(&prev));
  CUDA_CHECK(cudaSetDevice(device));
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, want);
  if (err == cudaErrorMemoryAllocation) {  // give the cache back to the driver and try once more
    (void)cudaGetLastError();
    release_all(c, device);
    err = cudaMalloc(&p, want);
  }
  CUDA_CHECK(cudaSetDevice(prev));
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    fail("out of GPU memory on cuda:", device, " allocating ", want, " bytes (", c.stats.bytes_in_use,
         " bytes in use); try a smaller --batchSize");
  }
  c.block_size[p] = want;
  c.stats.cuda_malloc_calls++;
  c.stats.bytes_reserved += want;
  c.stats.bytes_in_use += want;
  if (c.stats.bytes_in_use > c.stats.peak_bytes_in_use) c.stats.peak_bytes_in_use = c.stats.bytes_in_use;
  return p;
}

void caching_free(int device, void* p, size_t) {
  DeviceCache& c = cache(device);
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.block_size.find(p);
  if (it == c.block_size.end()) return;  // not ours: nothing sensible to do
  c.stats.bytes_in_use -= it->second;
  c.free_blocks.emplace(it->second, p);
}

}  // namespace gpu

AllocatorStats cuda_allocator_stats(int device_index) {
  auto& c = gpu::cache(device_index);
  std::lock_guard<std::mutex> lock(c.mu);
  return c.stats;
}

void cuda_allocator_release_cached(int device_index) {
  auto& c = gpu::cache(device_index);
  std::lock_guard<std::mutex> lock(c.mu);
  gpu::release_all(c, device_index);
}

}  // namespace ge
