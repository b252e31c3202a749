// One CUDA graph: the work a function issues on a device's stream, recorded once and replayed
// later on the same buffers with one launch (no per-kernel launch cost, no host in the loop).
//
// Capture records, it does not run: the body's kernels execute only when the graph is replayed,
// so its first replay is the captured step itself. While the body runs, the caching allocator
// serves the capturing thread from a private pool (allocator.h) and never calls cudaMalloc; every
// block the graph touches stays reserved until the graph is destroyed. Everything the body does
// must be capturable: no host synchronisation, no host<->device copies, no cudaMalloc, no cuDNN
// algorithm search (warm the same shapes up eagerly first; those paths throw during a capture).
#pragma once
#include <cstddef>
#include <functional>

#include "ganengine/allocator.h"
#include "ganengine/dtype.h"

struct CUgraph_st;
struct CUgraphExec_st;

namespace ge {

class CudaGraph {
 public:
  CudaGraph() = default;
  ~CudaGraph();  // reset(); never throws
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Records body's work on device's stream (cudaStreamCaptureModeThreadLocal) and instantiates
  // it, replacing any earlier graph. If the body or the capture fails, the capture is ended, the
  // pool released, nothing stays captured, and the error is rethrown: the stream is usable again.
  void capture(Device device, const std::function<void()>& body);
  // Enqueues one run on the device's stream; returns without waiting.
  void replay();
  bool captured() const { return exec_ != nullptr; }
  size_t nodes() const { return nodes_; }  // kernels, copies and memsets recorded
  // Small memsets recorded as kernel nodes (src/runtime/graph_memsets.h; included in nodes()).
  size_t memsets_replaced() const { return memsets_replaced_; }
  // Memsets into a cuDNN workspace moved off the chain of BatchNorm kernels before them
  // (src/runtime/graph_memset_hoist.h).
  size_t memsets_hoisted() const { return memsets_hoisted_; }
  // Roots made to wait for the graph's root of highest priority (src/runtime/graph_roots.h).
  size_t roots_joined() const { return roots_joined_; }
  GraphPoolId pool() const { return pool_; }
  // Waits for the stream, destroys the graph and gives its memory pool back to the cache.
  void reset();

 private:
  int device_ = -1;
  CUgraph_st* graph_ = nullptr;     // cudaGraph_t
  CUgraphExec_st* exec_ = nullptr;  // cudaGraphExec_t
  GraphPoolId pool_ = 0;
  bool pinned_workspace_ = false;
  size_t nodes_ = 0;
  size_t memsets_replaced_ = 0;
  size_t memsets_hoisted_ = 0;
  size_t roots_joined_ = 0;
};

}  // namespace ge
