// A captured graph's nodes and edges (with their data: type and ports), for the passes that rewire
// a graph between capture and instantiation (graph_memsets.h, graph_memset_hoist.h, graph_roots.h).
#pragma once
#include <cuda_runtime.h>

#include <vector>

namespace ge {
namespace gpu {

struct Edges {
  std::vector<cudaGraphNode_t> nodes;
  std::vector<cudaGraphEdgeData> data;  // data[i] belongs to the edge with nodes[i]
};

Edges incoming_edges(cudaGraphNode_t node);  // the nodes `node` waits for
Edges outgoing_edges(cudaGraphNode_t node);  // the nodes that wait for `node`

// A kernel node's launch priority (lower numbers run first; captured from its stream's), or
// false for other nodes and kernel nodes without one.
bool kernel_node_priority(cudaGraphNode_t node, int* priority);

// Every node of the graph, in the order cudaGraphGetNodes gives; the nodes that wait for none.
std::vector<cudaGraphNode_t> graph_nodes(cudaGraph_t graph);
std::vector<cudaGraphNode_t> graph_root_nodes(cudaGraph_t graph);

// The graph's memset nodes with their parameters, in the same order.
struct MemsetNode {
  cudaGraphNode_t node;
  cudaMemsetParams params;
};
std::vector<MemsetNode> memset_nodes(cudaGraph_t graph);

}  // namespace gpu
}  // namespace ge
