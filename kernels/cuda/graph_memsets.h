// Small memset nodes of a captured CUDA graph rewritten as kernel nodes.
//
// cuDNN's Hopper convolution kernels ("indexed" backward-data, some forward tiles) clear a
// 4-byte counter with cudaMemsetAsync before each launch, so a captured step holds one memset
// node per such convolution. On the H200 a memset node between two kernels left the GPU idle
// for 4-12 us around it (CUPTI timeline of a batch-64 step: 2-4 us before the memset, 3-8 us
// after it), against under 1 us between two kernel nodes: at batch 64 the three memsets on the
// generator step's serial chain cost about 25 us of a 0.93 ms step. A kernel node that writes
// the same bytes, with the memset's dependencies, keeps the chain on the SMs.
#pragma once
#include <cstddef>

struct CUgraph_st;

namespace ge {
namespace gpu {

// Memsets of at most this many bytes become kernels; larger ones stay (a fill kernel is not
// faster than the driver's for big buffers). The step usually has none, but two of session
// 16's batch-64 timelines showed a 4 MB memset node (in processes whose cuDNN algorithm choices
// differed; which call issued it was not traced down), which stays a memset node.
constexpr size_t kMemsetToKernelMaxBytes = size_t{1} << 20;

// Replaces every memset node of at most kMemsetToKernelMaxBytes in `graph` (before it is
// instantiated) by a kernel node writing the same values, with the same incoming and outgoing
// edges; returns how many it replaced. GANENGINE_GRAPH_MEMSETS=node leaves them (returns 0).
size_t memsets_to_kernels(CUgraph_st* graph);

}  // namespace gpu
}  // namespace ge
