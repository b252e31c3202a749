#include "runtime/graph_edges.h"

#include "runtime/cuda_check.h"

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

using NodeQuery = cudaError_t (*)(cudaGraph_t, cudaGraphNode_t*, size_t*);

std::vector<cudaGraphNode_t> nodes_of(cudaGraph_t graph, NodeQuery query) {
  size_t n = 0;
  CUDA_CHECK(query(graph, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  if (n) CUDA_CHECK(query(graph, nodes.data(), &n));
  nodes.resize(n);
  return nodes;
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

std::vector<cudaGraphNode_t> graph_nodes(cudaGraph_t graph) { return nodes_of(graph, cudaGraphGetNodes); }
std::vector<cudaGraphNode_t> graph_root_nodes(cudaGraph_t graph) { return nodes_of(graph, cudaGraphGetRootNodes); }

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
