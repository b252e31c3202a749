// Small memset nodes of a captured CUDA graph rewritten as kernel nodes.
//
// cuDNN's Hopper convolution kernels ("indexed" backward-data, some forward tiles) clear a
// 4-byte counter with cudaMemsetAsync before each launch, so a captured step holds one memset
// node per such convolution. A memset node between two kernels leaves the GPU idle far longer
// around it than the gap between two kernel nodes, and at small batches the memsets on the
// generator step's serial chain cost a noticeable part of the step (docs/performance.md). A
// kernel node that writes the same bytes, with the memset's dependencies, keeps the chain on the
// SMs.
#pragma once
#include <cstddef>

struct CUgraph_st;

namespace ge {
namespace gpu {

// Memsets of at most this many bytes become kernels; larger ones stay (a fill kernel is not
// faster than the driver's for big buffers). The step usually has none; some cuDNN algorithm
// choices bring a memset of a few MB, which stays a memset node.
constexpr size_t kMemsetToKernelMaxBytes = size_t{1} << 20;

// Replaces every memset node of at most kMemsetToKernelMaxBytes in `graph` (before it is
// instantiated) by a kernel node writing the same values, with the same incoming and outgoing
// edges; returns how many it replaced.
size_t memsets_to_kernels(CUgraph_st* graph);

}  // namespace gpu
}  // namespace ge
