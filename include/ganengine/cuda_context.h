// Per-device CUDA state shared by all GPU ops: the stream work is issued on, and the cuDNN
// and cuBLAS handles bound to it. One stream per device keeps the caching allocator's reuse
// rules simple (a freed block is safe to reuse in stream order).
#pragma once
#include <vector>

#include "ganengine/cuda_check.h"

namespace ge {
namespace gpu {

struct CudaContext {
  int device = 0;
  cudaStream_t stream = nullptr;
  cudnnHandle_t cudnn = nullptr;
  cublasHandle_t cublas = nullptr;
  void* workspace = nullptr;  // cuDNN workspace, grown on demand outside graph capture
  size_t workspace_bytes = 0;
  // Captured CUDA graphs bake the workspace's address in: while any graph holds a pin, growing
  // the workspace keeps the old buffer alive (retired) instead of freeing it.
  int workspace_pins = 0;
  std::vector<void*> retired_workspaces;
};

// The context of device k, created on first use (sets the current device).
CudaContext& context(int device_index = 0);
// The cuDNN workspace, at least `bytes` large. Growing it synchronises the stream and allocates,
// so it throws ge::Error when asked to grow while the stream is being captured into a graph.
void* workspace(CudaContext& ctx, size_t bytes);
// A CUDA graph referring to the current workspace holds a pin for as long as it lives.
void pin_workspace(CudaContext& ctx);
void unpin_workspace(CudaContext& ctx);  // never throws (graph destructors call it)
void synchronize(int device_index = 0);

}  // namespace gpu
}  // namespace ge
