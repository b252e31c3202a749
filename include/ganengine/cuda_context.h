// Per-device CUDA state shared by all GPU ops: the stream work is issued on, and the cuDNN
// and cuBLAS handles bound to it. One stream per device keeps the caching allocator's reuse
// rules simple (a freed block is safe to reuse in stream order).
#pragma once
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
};

// The context of device k, created on first use (sets the current device).
CudaContext& context(int device_index = 0);
void* workspace(CudaContext& ctx, size_t bytes);
void synchronize(int device_index = 0);

}  // namespace gpu
}  // namespace ge
