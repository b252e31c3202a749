// Memory for tensors. The GPU allocator caches freed blocks by size, so once a training step
// has run once, later steps reuse memory and never call cudaMalloc (which would synchronise
// the device and break CUDA graph capture).
#pragma once
#include <cstddef>
#include <string>

#include "ganengine/dtype.h"

namespace ge {

void* device_alloc(Device d, size_t bytes);
void device_free(Device d, void* p, size_t bytes);

struct AllocatorStats {
  size_t cuda_malloc_calls = 0;  // cudaMalloc calls so far
  size_t bytes_reserved = 0;     // held from the driver, in use or cached
  size_t bytes_in_use = 0;
  size_t peak_bytes_in_use = 0;
};
AllocatorStats cuda_allocator_stats(int device_index = 0);
void cuda_allocator_release_cached(int device_index = 0);  // cudaFree every cached block
// Starts a new peak: peak_bytes_in_use becomes bytes_in_use (benchmarks measure each
// configuration's own peak).
void cuda_allocator_reset_peak(int device_index = 0);
// Where the peak goes (`bench --memory-breakdown`): while tracing, every block handed out is
// labelled with the profile phase that asked for it (profiling.h), and each new peak records
// the bytes in use per label. Turning tracing on forgets earlier labels (blocks already in
// use then are reported as in use before tracing began). The breakdown is empty when not tracing.
void cuda_allocator_trace_peak(int device_index, bool on);
std::string cuda_allocator_peak_breakdown(int device_index = 0);
// Bytes of the cuDNN workspace the device's context holds (allocated outside the caching
// allocator, so not in its stats; as large as the largest chosen algorithm asked for).
size_t cuda_workspace_bytes(int device_index = 0);
// Frees that workspace (it grows again to what the next convolutions ask for), unless a live
// CUDA graph still refers to it. Benchmarks call it so each configuration counts only its own.
void cuda_release_workspace(int device_index = 0);

// Lanes of work on a device (cuda_context.h, concurrent_region.h). open: from now on a freed
// block is held for the lane the freeing thread issues to (the main lane for other threads),
// and only that lane's allocations reuse it. join: call after the main lane has been made to
// wait for every other lane; the held blocks go back as usual (lanes stay open). merge: call
// after lane `into` has been made to wait for lane `from` (its side lane, while other lanes may
// still run): what `from` held is held for `into`. close: join and stop holding.
void cuda_allocator_open_lanes(int device_index);
void cuda_allocator_join_lanes(int device_index);
void cuda_allocator_merge_held(int device_index, int from_lane, int into_lane);
void cuda_allocator_close_lanes(int device_index);

// Memory pools for CUDA graphs (cuda_graph.h). A graph bakes in the address of every buffer its
// captured work touches, so those blocks must stay reserved for as long as the graph lives, and
// capture itself must not call cudaMalloc (an implicit device synchronisation that would break
// the capture).
//  - begin: makes a new pool active on the device for the calling thread and returns its handle.
//    While it is active, that thread's allocations come first from blocks freed back to this
//    pool, then from the general cache; one that would need cudaMalloc throws ge::Error instead.
//    Other threads allocate as usual.
//  - Every block handed out while the pool is active belongs to it from then on: freeing it,
//    during or after the capture, puts it on the pool's own free list, which only later
//    allocations of the same pool (while it is active) reuse; the general cache never sees it.
//    So does any block the capturing thread frees while the pool is active (the captured work
//    may have used it, though it was allocated before).
//  - end: the pool stops serving the thread; its blocks stay reserved.
//  - release (the graph is gone): the pool's free blocks return to the general cache, and blocks
//    still held by tensors become ordinary ones (they return to the general cache when freed).
using GraphPoolId = unsigned long long;
GraphPoolId cuda_allocator_begin_graph_pool(int device_index);
void cuda_allocator_end_graph_pool(int device_index);
void cuda_allocator_release_graph_pool(int device_index, GraphPoolId pool);
// Bytes held by a pool (in use or on its free list); 0 for a released or unknown pool.
size_t cuda_allocator_graph_pool_bytes(int device_index, GraphPoolId pool);

}  // namespace ge
