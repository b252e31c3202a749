// GPU memory for tensors. Blocks freed by tensors go to a per-device cache keyed by size and
// are handed out again in stream order (all work runs on the context's one stream, so a block
// freed by the host is safe to reuse for work enqueued later). After the first training step
// the cache holds everything the step needs: no cudaMalloc, no implicit device sync.
#include <map>
#include <mutex>
#include <thread>
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
  // CUDA graph pools (allocator.h): which blocks a pool owns, each pool's own free list, and
  // the pool serving one thread's allocations during a capture.
  struct GraphPool {
    std::multimap<size_t, void*> free_blocks;
    size_t bytes = 0;  // every block the pool owns, in use or free
  };
  std::unordered_map<void*, GraphPoolId> pool_of;
  std::map<GraphPoolId, GraphPool> pools;
  GraphPoolId active_pool = 0;  // 0: none
  std::thread::id active_thread;
  GraphPoolId next_pool = 1;
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

// An allocation while a graph pool is active on the calling thread (a CUDA graph capture):
// never cudaMalloc. The pool's own free blocks first, then the general cache; a block taken from
// the general cache joins the pool.
void* pool_alloc(DeviceCache& c, int device, size_t want) {
  DeviceCache::GraphPool& pool = c.pools.at(c.active_pool);
  void* p = nullptr;
  auto own = pool.free_blocks.find(want);
  if (own != pool.free_blocks.end()) {
    p = own->second;
    pool.free_blocks.erase(own);
  } else {
    auto general = c.free_blocks.find(want);
    if (general == c.free_blocks.end())
      fail("allocation of ", want, " bytes on cuda:", device,
           " during CUDA graph capture, and no cached block of that size is free (a capture must not call "
           "cudaMalloc): run more warm-up steps with the same shapes before capturing");
    p = general->second;
    c.free_blocks.erase(general);
    c.pool_of[p] = c.active_pool;
    pool.bytes += want;
  }
  c.stats.bytes_in_use += want;
  if (c.stats.bytes_in_use > c.stats.peak_bytes_in_use) c.stats.peak_bytes_in_use = c.stats.bytes_in_use;
  return p;
}

}  // namespace

void* caching_alloc(int device, size_t bytes) {
  DeviceCache& c = cache(device);
  std::lock_guard<std::mutex> lock(c.mu);
  size_t want = round_size(bytes == 0 ? 1 : bytes);
  if (c.active_pool != 0 && c.active_thread == std::this_thread::get_id()) return pool_alloc(c, device, want);
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
  // A graph pool's block stays reserved for the graph: back to the pool, not to the cache.
  auto owner = c.pool_of.find(p);
  if (owner != c.pool_of.end()) {
    c.pools.at(owner->second).free_blocks.emplace(it->second, p);
    return;
  }
  // Freed by the capturing thread during a capture: the captured work may have used the block
  // (allocated before the capture), so the pool adopts it rather than let eager work reuse it.
  if (c.active_pool != 0 && c.active_thread == std::this_thread::get_id()) {
    DeviceCache::GraphPool& pool = c.pools.at(c.active_pool);
    c.pool_of[p] = c.active_pool;
    pool.bytes += it->second;
    pool.free_blocks.emplace(it->second, p);
    return;
  }
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

void cuda_allocator_reset_peak(int device_index) {
  auto& c = gpu::cache(device_index);
  std::lock_guard<std::mutex> lock(c.mu);
  c.stats.peak_bytes_in_use = c.stats.bytes_in_use;
}

GraphPoolId cuda_allocator_begin_graph_pool(int device_index) {
  auto& c = gpu::cache(device_index);
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.active_pool != 0)
    fail("a CUDA graph memory pool is already active on cuda:", device_index, " (graph captures do not nest)");
  const GraphPoolId id = c.next_pool++;
  c.pools[id];
  c.active_pool = id;
  c.active_thread = std::this_thread::get_id();
  return id;
}

void cuda_allocator_end_graph_pool(int device_index) {
  auto& c = gpu::cache(device_index);
  std::lock_guard<std::mutex> lock(c.mu);
  c.active_pool = 0;
  c.active_thread = std::thread::id();
}

void cuda_allocator_release_graph_pool(int device_index, GraphPoolId pool) {
  auto& c = gpu::cache(device_index);
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.active_pool == pool) {
    c.active_pool = 0;
    c.active_thread = std::thread::id();
  }
  auto it = c.pools.find(pool);
  if (it == c.pools.end()) return;
  for (auto& kv : it->second.free_blocks) c.free_blocks.emplace(kv.first, kv.second);
  for (auto b = c.pool_of.begin(); b != c.pool_of.end();) {
    if (b->second == pool)
      b = c.pool_of.erase(b);
    else
      ++b;
  }
  c.pools.erase(it);
}

size_t cuda_allocator_graph_pool_bytes(int device_index, GraphPoolId pool) {
  auto& c = gpu::cache(device_index);
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.pools.find(pool);
  return it == c.pools.end() ? 0 : it->second.bytes;
}

}  // namespace ge
