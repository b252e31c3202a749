#include "runtime/graph_memset_hoist.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "runtime/cuda_check.h"
#include "runtime/graph_edges.h"

namespace ge {
namespace gpu {

namespace {

// Our kernels that read and write only the tensors passed to them (from the caching allocator),
// never a lane's workspace: the BatchNorm passes, activations and the padding copies. Kernels
// that use the workspace (the 8-channel filter gradient and its sum, the scalar convolutions'
// partial sums) and every library kernel are left out, so a hoist stops at them.
constexpr const char* kWorkspaceFreeKernels[] = {
    "reduce_channels_nchw_kernel",  "reduce_channels_nhwc_kernel",      "reduce_channels_nhwc_vec_kernel",
    "finish_partials_kernel",       "finish_partials_warp_kernel",      "normalize_kernel",
    "batchnorm_dx_kernel",          "batchnorm_forward_cluster_kernel", "batchnorm_backward_cluster_kernel",
    "activation_forward_kernel",    "activation_backward_kernel",       "copy_padded_kernel",
    "copy_padded_nhwc_runs_kernel", "copy_trimmed_nhwc_pixels_kernel",
};

bool inside(const cudaMemsetParams& m, const ByteRange& r) {
  const auto begin = reinterpret_cast<uintptr_t>(r.begin), dst = reinterpret_cast<uintptr_t>(m.dst);
  const size_t rows = std::max<size_t>(m.height, 1);
  const size_t span = (rows - 1) * m.pitch + m.width * m.elementSize;
  return dst >= begin && dst - begin <= r.bytes && span <= r.bytes - (dst - begin);
}

bool keeps_off_workspaces(const char* kernel_name) {
  const std::string name = kernel_name ? kernel_name : "";
  // A mangled name spells each identifier after its length ("16normalize_kernel"), which fixes
  // where the identifier ends; a plain one ends it with '<' or '('. Both must be in ge::gpu, so
  // a library kernel that happens to contain one of the words does not match.
  const bool mangled = name.rfind("_Z", 0) == 0;
  if (name.find(mangled ? "2ge3gpu" : "ge::gpu::") == std::string::npos) return false;
  for (const char* k : kWorkspaceFreeKernels) {
    if (mangled ? name.find(std::to_string(std::strlen(k)) + k) != std::string::npos
                : name.find(std::string("::") + k + "<") != std::string::npos ||
                      name.find(std::string("::") + k + "(") != std::string::npos)
      return true;
  }
  return false;
}

bool passable(cudaGraphNode_t node) {
  cudaGraphNodeType type;
  CUDA_CHECK(cudaGraphNodeGetType(node, &type));
  if (type != cudaGraphNodeTypeKernel) return false;
  cudaKernelNodeParams params = {};
  const char* name = nullptr;
  // Library kernels launched through the driver API may not resolve: they are not ours anyway.
  if (cudaGraphKernelNodeGetParams(node, &params) != cudaSuccess || params.func == nullptr ||
      cudaFuncGetName(&name, params.func) != cudaSuccess || name == nullptr) {
    (void)cudaGetLastError();
    return false;
  }
  return keeps_off_workspaces(name);
}

bool has_edge(cudaGraphNode_t from, cudaGraphNode_t to) {
  const Edges out = outgoing_edges(from);
  return std::find(out.nodes.begin(), out.nodes.end(), to) != out.nodes.end();
}

// Moves `memset` (one predecessor) to wait for what the chain of passable kernels above it
// waited for; returns whether it moved.
bool hoist(cudaGraph_t graph, cudaGraphNode_t memset) {
  const Edges in = incoming_edges(memset);
  if (in.nodes.size() != 1) return false;
  const cudaGraphNode_t last = in.nodes[0];
  cudaGraphNode_t top = memset;
  for (;;) {
    const Edges above = incoming_edges(top);
    if (above.nodes.size() != 1 || !passable(above.nodes[0])) break;
    top = above.nodes[0];
  }
  if (top == memset) return false;

  const cudaGraphEdgeData plain = {};  // a full dependency: wait for the node to finish
  const Edges out = outgoing_edges(memset);
  for (cudaGraphNode_t next : out.nodes)
    if (!has_edge(last, next)) CUDA_CHECK(cudaGraphAddDependencies(graph, &last, &next, &plain, 1));
  CUDA_CHECK(cudaGraphRemoveDependencies(graph, &last, &memset, &in.data[0], 1));
  for (cudaGraphNode_t before : incoming_edges(top).nodes)
    CUDA_CHECK(cudaGraphAddDependencies(graph, &before, &memset, &plain, 1));
  return true;
}

}  // namespace

size_t hoist_workspace_memsets(cudaGraph_t graph, const std::vector<ByteRange>& workspaces) {
  size_t moved = 0;
  for (const MemsetNode& m : memset_nodes(graph)) {
    const bool in_workspace =
        std::any_of(workspaces.begin(), workspaces.end(), [&](const ByteRange& r) { return inside(m.params, r); });
    if (in_workspace && hoist(graph, m.node)) ++moved;
  }
  return moved;
}

}  // namespace gpu
}  // namespace ge
