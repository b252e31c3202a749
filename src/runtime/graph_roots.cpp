#include "runtime/graph_roots.h"

#include <cuda_runtime.h>

#include <vector>

#include "runtime/cuda_check.h"
#include "runtime/graph_edges.h"

namespace ge {
namespace gpu {

size_t join_graph_roots(cudaGraph_t graph) {
  const std::vector<cudaGraphNode_t> roots = graph_root_nodes(graph);
  if (roots.size() < 2) return 0;
  cudaGraphNode_t first = nullptr;
  int first_priority = 0;
  for (cudaGraphNode_t root : roots) {
    int priority = 0;
    if (kernel_node_priority(root, &priority) && (first == nullptr || priority < first_priority)) {
      first = root;
      first_priority = priority;
    }
  }
  if (first == nullptr) return 0;
  const cudaGraphEdgeData plain = {};  // a full dependency: wait for the node to finish
  size_t joined = 0;
  for (cudaGraphNode_t root : roots) {
    if (root == first) continue;
    CUDA_CHECK(cudaGraphAddDependencies(graph, &first, &root, &plain, 1));
    ++joined;
  }
  return joined;
}

}  // namespace gpu
}  // namespace ge
