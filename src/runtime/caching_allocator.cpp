// GPU memory for tensors. Blocks freed by tensors go to a per-device cache keyed by size and
// are handed out again in stream order (all work runs on the context's one stream, so a block
// freed by the host is safe to reuse for work enqueued later). After the first training step
// the cache holds everything the step needs: no cudaMalloc, no implicit device sync.
#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ganengine/allocator.h"
#include "runtime/cuda_check.h"
#include "runtime/cuda_context.h"
#include "runtime/profiling.h"

namespace ge {
namespace gpu {
namespace {

// Size classes: 512 bytes below 1 MiB, 128 KiB above (whole MiB would waste up to 0.9 MiB on
// each copy of a 3.1 MiB weight: 4 MiB over O2's six copies of G's first layer).
size_t round_size(size_t bytes) {
  const size_t small = 512, large = size_t(1) << 20, large_step = size_t(128) << 10;
  if (bytes < large) return ((bytes + small - 1) / small) * small;
  return ((bytes + large_step - 1) / large_step) * large_step;
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
  // Lanes (cuda_context.h) open: a block freed now may still be used by work queued on the
  // lane that freed it, which the other lanes' work is not ordered after. So it is held for that
  // lane (only that lane's allocations reuse it, in its stream order) until the lanes join (the
  // main lane has waited for all the others): then every held block goes back as usual. Frees
  // from threads other than the one driving the lanes are held for the main lane.
  bool lanes_open = false;
  std::thread::id lanes_thread;
  std::array<std::multimap<size_t, void*>, kLanes> held;
  // Breakdown of the peak (cuda_allocator_trace_peak): the profile phase that asked for each
  // block in use, and, at the latest peak, the bytes in use per phase and the phase running.
  bool tracing = false;
  std::unordered_map<void*, std::string> phase_of;
  std::map<std::string, size_t> peak_by_phase;
  std::string peak_phase;
  // The most in use while each top-level phase (the first two names of the path) allocated, in
  // the order the phases first allocated.
  std::vector<std::pair<std::string, size_t>> top_phase_peaks;
};

std::string top_phase(const std::string& path) {
  const size_t first = path.find('/');
  return first == std::string::npos ? path : path.substr(0, path.find('/', first + 1));
}

size_t lane_of_caller(const DeviceCache& c) {
  return c.lanes_thread == std::this_thread::get_id() ? static_cast<size_t>(current_lane()) : 0;
}

// Called with the lock held whenever a block is handed out.
void note_allocation(DeviceCache& c, void* p) {
  if (c.stats.bytes_in_use > c.stats.peak_bytes_in_use) c.stats.peak_bytes_in_use = c.stats.bytes_in_use;
  if (!c.tracing) return;
  const std::string phase = current_profile_phase();
  c.phase_of[p] = phase;
  const std::string top = top_phase(phase);
  auto seen = std::find_if(c.top_phase_peaks.begin(), c.top_phase_peaks.end(),
                           [&](const std::pair<std::string, size_t>& e) { return e.first == top; });
  if (seen == c.top_phase_peaks.end())
    c.top_phase_peaks.emplace_back(top, c.stats.bytes_in_use);
  else
    seen->second = std::max(seen->second, c.stats.bytes_in_use);
  if (c.stats.bytes_in_use < c.stats.peak_bytes_in_use) return;
  c.peak_by_phase.clear();
  for (const auto& kv : c.phase_of) c.peak_by_phase[kv.second] += c.block_size.at(kv.first);
  c.peak_phase = phase;
}

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
  note_allocation(c, p);
  return p;
}

}  // namespace

void* caching_alloc(int device, size_t bytes) {
  DeviceCache& c = cache(device);
  std::lock_guard<std::mutex> lock(c.mu);
  size_t want = round_size(bytes == 0 ? 1 : bytes);
  const bool capturing = c.active_pool != 0 && c.active_thread == std::this_thread::get_id();
  if (c.lanes_open) {
    auto& held = c.held[lane_of_caller(c)];
    auto it = held.find(want);
    if (it != held.end()) {
      void* p = it->second;
      held.erase(it);
      if (capturing && !c.pool_of.count(p)) {  // the graph will use it: its pool keeps it
        c.pool_of[p] = c.active_pool;
        c.pools.at(c.active_pool).bytes += want;
      }
      c.stats.bytes_in_use += want;
      note_allocation(c, p);
      return p;
    }
  }
  if (capturing) return pool_alloc(c, device, want);
  // Exact size classes only: a training step asks for the same multiset of sizes every time,
  // so once one step has run, every request finds a block freed by the previous step. (Handing
  // out larger blocks would save memory but let sizes steal each other's blocks, and the cache
  // might then never settle.)
  auto it = c.free_blocks.find(want);
  if (it != c.free_blocks.end()) {
    void* p = it->second;
    c.stats.bytes_in_use += it->first;
    c.free_blocks.erase(it);
    note_allocation(c, p);
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
  note_allocation(c, p);
  return p;
}

namespace {
// A block no tensor uses any more, back where it can be handed out again. Lock held.
void release_block(DeviceCache& c, void* p, size_t size) {
  // A graph pool's block stays reserved for the graph: back to the pool, not to the cache.
  auto owner = c.pool_of.find(p);
  if (owner != c.pool_of.end()) {
    c.pools.at(owner->second).free_blocks.emplace(size, p);
    return;
  }
  // Freed by the capturing thread during a capture: the captured work may have used the block
  // (allocated before the capture), so the pool adopts it rather than let eager work reuse it.
  if (c.active_pool != 0 && c.active_thread == std::this_thread::get_id()) {
    DeviceCache::GraphPool& pool = c.pools.at(c.active_pool);
    c.pool_of[p] = c.active_pool;
    pool.bytes += size;
    pool.free_blocks.emplace(size, p);
    return;
  }
  c.free_blocks.emplace(size, p);
}

void release_held(DeviceCache& c) {
  for (auto& held : c.held) {
    for (auto& kv : held) release_block(c, kv.second, kv.first);
    held.clear();
  }
}
}  // namespace

void caching_free(int device, void* p, size_t) {
  DeviceCache& c = cache(device);
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.block_size.find(p);
  if (it == c.block_size.end()) return;  // not ours: nothing sensible to do
  c.stats.bytes_in_use -= it->second;
  if (c.tracing) c.phase_of.erase(p);
  if (c.lanes_open) {
    c.held[lane_of_caller(c)].emplace(it->second, p);
    return;
  }
  release_block(c, p, it->second);
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
  c.peak_by_phase.clear();
  c.peak_phase.clear();
  c.top_phase_peaks.clear();
}

void cuda_allocator_open_lanes(int device_index) {
  auto& c = gpu::cache(device_index);
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.lanes_open) fail("cuda:", device_index, ": its lanes are already open (concurrent regions do not nest)");
  c.lanes_open = true;
  c.lanes_thread = std::this_thread::get_id();
}

void cuda_allocator_join_lanes(int device_index) {
  auto& c = gpu::cache(device_index);
  std::lock_guard<std::mutex> lock(c.mu);
  gpu::release_held(c);
}

void cuda_allocator_merge_held(int device_index, int from_lane, int into_lane) {
  auto& c = gpu::cache(device_index);
  std::lock_guard<std::mutex> lock(c.mu);
  auto& from = c.held.at(static_cast<size_t>(from_lane));
  c.held.at(static_cast<size_t>(into_lane)).merge(from);
}

void cuda_allocator_close_lanes(int device_index) {
  auto& c = gpu::cache(device_index);
  std::lock_guard<std::mutex> lock(c.mu);
  gpu::release_held(c);
  c.lanes_open = false;
  c.lanes_thread = std::thread::id();
}

void cuda_allocator_trace_peak(int device_index, bool on) {
  auto& c = gpu::cache(device_index);
  std::lock_guard<std::mutex> lock(c.mu);
  c.tracing = on;
  c.phase_of.clear();
  c.peak_by_phase.clear();
  c.peak_phase.clear();
  c.top_phase_peaks.clear();
}

std::string cuda_allocator_peak_breakdown(int device_index) {
  auto& c = gpu::cache(device_index);
  std::lock_guard<std::mutex> lock(c.mu);
  if (!c.tracing) return "";
  std::vector<std::pair<size_t, std::string>> rows;
  for (const auto& kv : c.peak_by_phase) rows.emplace_back(kv.second, kv.first);
  size_t traced = 0;
  for (const auto& row : rows) traced += row.first;
  if (traced < c.stats.peak_bytes_in_use)
    rows.emplace_back(c.stats.peak_bytes_in_use - traced, "(in use before tracing began)");
  std::sort(rows.rbegin(), rows.rend());
  const std::string reached = c.peak_phase.empty() ? std::string("(no phase)") : c.peak_phase;
  std::string out = "peak " + std::to_string(c.stats.peak_bytes_in_use >> 20) + " MiB in use, reached in " + reached +
                    "; by the phase that allocated it:\n";
  char line[64];
  for (const auto& row : rows) {
    std::snprintf(line, sizeof line, "  %9.2f MiB  ", static_cast<double>(row.first) / (1 << 20));
    const std::string phase =
        row.second.empty() ? std::string("(outside any phase: weights, optimizer state, inputs)") : row.second;
    out += line + phase + "\n";
  }
  out += "most in use while each phase allocated:";
  for (const auto& e : c.top_phase_peaks)
    out += "  " + (e.first.empty() ? std::string("(none)") : e.first) + " " + std::to_string(e.second >> 20) + " MiB";
  return out + "\n";
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
