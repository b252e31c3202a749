// CUDA graphs and graph memory pools in a build without CUDA: nothing to capture.
#ifndef GE_WITH_CUDA
#include "ganengine/cuda_graph.h"
#include "ganengine/error.h"

namespace ge {

GraphPoolId cuda_allocator_begin_graph_pool(int) { fail("CUDA graph memory pools need a build with CUDA"); }
void cuda_allocator_end_graph_pool(int) {}
void cuda_allocator_release_graph_pool(int, GraphPoolId) {}
size_t cuda_allocator_graph_pool_bytes(int, GraphPoolId) { return 0; }

CudaGraph::~CudaGraph() = default;
void CudaGraph::capture(Device device, const std::function<void()>&) {
  fail("CUDA graph capture on ", device.str(), " needs a build with CUDA");
}
void CudaGraph::replay() { fail("CudaGraph::replay in a build without CUDA"); }
void CudaGraph::reset() {}

}  // namespace ge
#endif
