// Small memset nodes of a captured graph as kernel nodes (graph_memsets.h says why).
#include <vector>

#include "cuda/cuda_util.cuh"
#include "runtime/graph_edges.h"
#include "runtime/graph_memsets.h"

namespace ge {
namespace gpu {

namespace {

// cudaMemsetParams' fill: `height` rows of `width` elements of `element_size` bytes (1, 2 or 4),
// rows `pitch` bytes apart, every element set to the low element_size bytes of value.
__global__ void memset_node_kernel(char* dst, size_t pitch, unsigned value, unsigned element_size, size_t width,
                                   size_t height) {
  const size_t count = width * height;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count; i += size_t{gridDim.x} * blockDim.x) {
    char* p = dst + (i / width) * pitch + (i % width) * element_size;
    if (element_size == 4)
      *reinterpret_cast<unsigned*>(p) = value;
    else if (element_size == 2)
      *reinterpret_cast<unsigned short*>(p) = static_cast<unsigned short>(value);
    else
      *p = static_cast<char>(value);
  }
}

// The priority the graph gives the first kernel that waits on `edges` (the memset ran for it),
// or none.
bool successor_priority(const Edges& edges, cudaLaunchAttributeValue* priority) {
  for (cudaGraphNode_t next : edges.nodes)
    if (kernel_node_priority(next, &priority->priority)) return true;
  return false;
}

void replace(cudaGraph_t graph, cudaGraphNode_t memset, const cudaMemsetParams& m) {
  const Edges in = incoming_edges(memset), out = outgoing_edges(memset);

  char* dst = static_cast<char*>(m.dst);
  size_t pitch = m.pitch, width = m.width, height = m.height;
  unsigned value = m.value, element_size = m.elementSize;
  void* args[] = {&dst, &pitch, &value, &element_size, &width, &height};
  constexpr unsigned kThreads = 256;
  cudaKernelNodeParams k = {};
  k.func = reinterpret_cast<void*>(memset_node_kernel);
  k.gridDim = dim3(static_cast<unsigned>(std::min<size_t>(ceil_div(width * height, kThreads), 1024)));
  k.blockDim = dim3(kThreads);
  k.kernelParams = args;
  cudaGraphNode_t fill = nullptr;
  CUDA_CHECK(cudaGraphAddKernelNode(&fill, graph, nullptr, 0, &k));
  cudaLaunchAttributeValue priority;
  if (successor_priority(out, &priority))
    CUDA_CHECK(cudaGraphKernelNodeSetAttribute(fill, cudaLaunchAttributePriority, &priority));

  if (!in.nodes.empty()) {
    const std::vector<cudaGraphNode_t> to(in.nodes.size(), fill);
    CUDA_CHECK(cudaGraphAddDependencies(graph, in.nodes.data(), to.data(), in.data.data(), in.nodes.size()));
  }
  if (!out.nodes.empty()) {
    const std::vector<cudaGraphNode_t> from(out.nodes.size(), fill);
    CUDA_CHECK(cudaGraphAddDependencies(graph, from.data(), out.nodes.data(), out.data.data(), out.nodes.size()));
  }
  CUDA_CHECK(cudaGraphDestroyNode(memset));
}

}  // namespace

size_t memsets_to_kernels(cudaGraph_t graph) {
  size_t replaced = 0;
  for (const MemsetNode& memset : memset_nodes(graph)) {
    cudaMemsetParams m = memset.params;
    const size_t rows = std::max<size_t>(m.height, 1);
    if (m.width * m.elementSize * rows > kMemsetToKernelMaxBytes) continue;
    if (m.elementSize != 1 && m.elementSize != 2 && m.elementSize != 4) continue;
    if (m.height == 0) m.height = 1;
    replace(graph, memset.node, m);
    ++replaced;
  }
  return replaced;
}

}  // namespace gpu
}  // namespace ge
