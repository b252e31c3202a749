#include "ganengine/cuda_context.h"

#include <mutex>
#include <vector>

#include "ganengine/allocator.h"
#include "ganengine/backend.h"

namespace ge {

bool built_with_cuda() { return true; }

bool cuda_available() {
  static const bool available = [] {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return n > 0;
  }();
  return available;
}

void synchronize(Device d) {
  if (d.is_cuda()) gpu::synchronize(d.index);
}

namespace gpu {

CudaContext& context(int device_index) {
  static std::mutex mu;
  static auto* contexts = new std::vector<CudaContext*>(64, nullptr);  // leaked: outlives tensors
  std::lock_guard<std::mutex> lock(mu);
  if (device_index < 0 || device_index >= 64) fail("CUDA device index ", device_index, " out of range");
  CudaContext*& ctx = (*contexts)[device_index];
  if (!ctx) {
    int count = 0;
    CUDA_CHECK(cudaGetDeviceCount(&count));
    if (device_index >= count)
      fail("cuda:", device_index, " requested but only ", count, " CUDA device(s) are present");
    ctx = new CudaContext;
    ctx->device = device_index;
    CUDA_CHECK(cudaSetDevice(device_index));
    CUDA_CHECK(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
    CUDNN_CHECK(cudnnCreate(&ctx->cudnn));
    CUDNN_CHECK(cudnnSetStream(ctx->cudnn, ctx->stream));
    CUBLAS_CHECK(cublasCreate(&ctx->cublas));
    CUBLAS_CHECK(cublasSetStream(ctx->cublas, ctx->stream));
  }
  CUDA_CHECK(cudaSetDevice(device_index));
  return *ctx;
}

void* workspace(CudaContext& ctx, size_t bytes) {
  if (bytes <= ctx.workspace_bytes) return ctx.workspace;
  // Growing means freeing the old buffer, which may still be read by queued work.
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  if (ctx.workspace) CUDA_CHECK(cudaFree(ctx.workspace));
  size_t want = ((bytes + (1 << 20) - 1) >> 20) << 20;
  CUDA_CHECK(cudaMalloc(&ctx.workspace, want));
  ctx.workspace_bytes = want;
  return ctx.workspace;
}

void synchronize(int device_index) { CUDA_CHECK(cudaStreamSynchronize(context(device_index).stream)); }

}  // namespace gpu
}  // namespace ge
