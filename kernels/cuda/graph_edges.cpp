#include "graph_edges.h"

#include "ganengine/cuda_check.h"

namespace ge {
namespace gpu {

namespace {

using EdgeQuery = cudaError_t (*)(cudaGraphNode_t, cudaGraphNode_t*, cudaGraphEdgeData*, size_t*);

Edges edges_of(cudaGraphNode_t node, EdgeQuery query) {
  size_t n = 0;
  CUDA_CHECK(query(node, nullptr, nullptr, &n));
  Edges e{std::vector<cudaGraphNode_t>(n), std::vector<cudaGraphEdgeData>(n)};
  if (n) CUDA_CHECK(query(node, e.nodes.data(), e.data.data(), &n));
  return e;
}

}  // namespace

Edges incoming_edges(cudaGraphNode_t node) { return edges_of(node, cudaGraphNodeGetDependencies); }
Edges outgoing_edges(cudaGraphNode_t node) { return edges_of(node, cudaGraphNodeGetDependentNodes); }

bool kernel_node_priority(cudaGraphNode_t node, int* priority) {
  cudaGraphNodeType type;
  CUDA_CHECK(cudaGraphNodeGetType(node, &type));
  if (type != cudaGraphNodeTypeKernel) return false;
  cudaLaunchAttributeValue value;
  if (cudaGraphKernelNodeGetAttribute(node, cudaLaunchAttributePriority, &value) != cudaSuccess) {
    (void)cudaGetLastError();  // not an error to report: the node simply has no priority
    return false;
  }
  *priority = value.priority;
  return true;
}

std::vector<cudaGraphNode_t> graph_nodes(cudaGraph_t graph) {
  size_t n = 0;
  CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  if (n) CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &n));
  nodes.resize(n);
  return nodes;
}

std::vector<MemsetNode> memset_nodes(cudaGraph_t graph) {
  std::vector<MemsetNode> memsets;
  for (cudaGraphNode_t node : graph_nodes(graph)) {
    cudaGraphNodeType type;
    CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    if (type != cudaGraphNodeTypeMemset) continue;
    MemsetNode m{node, {}};
    CUDA_CHECK(cudaGraphMemsetNodeGetParams(node, &m.params));
    memsets.push_back(m);
  }
  return memsets;
}

}  // namespace gpu
}  // namespace ge
