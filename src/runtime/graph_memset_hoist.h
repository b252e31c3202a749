// cuDNN's counter memsets moved off the step's serial chain, in a captured graph.
//
// cuDNN's Hopper convolutions clear a 4-byte counter in the workspace before each launch
// (graph_memsets.h). Captured from one stream, that memset waits for whatever ran just before
// it, usually a BatchNorm kernel of ours, and the convolution waits for the memset: at small
// batches a step has a dozen of them on its critical path, each one short kernel plus a launch
// gap. The counter only has to be clear after the previous user of the workspace is done, so
// the memset can wait for that node instead and run beside the BatchNorm kernels in between.
#pragma once
#include <cstddef>
#include <vector>

struct CUgraph_st;

namespace ge {
namespace gpu {

struct ByteRange {
  const void* begin = nullptr;
  size_t bytes = 0;
};

// For each memset node inside one of `workspaces` whose only predecessor is a chain of kernels
// known never to touch a workspace (BatchNorm, activation and padding kernels of ours, linked one
// to one): the memset waits for what that chain waited for instead, and the memset's successors
// also wait for the chain's last kernel (they may read its output). Run before
// memsets_to_kernels; returns how many memsets it moved.
size_t hoist_workspace_memsets(CUgraph_st* graph, const std::vector<ByteRange>& workspaces);

}  // namespace gpu
}  // namespace ge
