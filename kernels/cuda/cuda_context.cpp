#include "ganengine/cuda_context.h"

#include <mutex>
#include <vector>

#include "ganengine/allocator.h"
#include "ganengine/backend.h"

namespace ge {

bool built_with_cuda() { return true; }

int cuda_device_count() {
  static const int count = [] {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

bool cuda_available() { return cuda_device_count() > 0; }

void synchronize(Device d) {
  if (d.is_cuda()) gpu::synchronize(d.index);
}

size_t cuda_workspace_bytes(int device_index) { return gpu::context(device_index).workspace_bytes; }

void cuda_release_workspace(int device_index) {
  gpu::CudaContext& ctx = gpu::context(device_index);
  if (!ctx.workspace || ctx.workspace_pins > 0) return;
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));  // queued work may still use it
  CUDA_CHECK(cudaFree(ctx.workspace));
  ctx.workspace = nullptr;
  ctx.workspace_bytes = 0;
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
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(ctx.stream, &capture));
  if (capture != cudaStreamCaptureStatusNone)
    fail("the cuDNN workspace of cuda:", ctx.device, " would have to grow from ", ctx.workspace_bytes, " to ", bytes,
         " bytes during CUDA graph capture, which cannot synchronise or allocate: run more warm-up steps with the "
         "same shapes before capturing");
  // Growing means freeing the old buffer, which may still be read by queued work.
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  if (ctx.workspace) {
    if (ctx.workspace_pins > 0)
      ctx.retired_workspaces.push_back(ctx.workspace);  // a live CUDA graph still uses it
    else
      CUDA_CHECK(cudaFree(ctx.workspace));
    ctx.workspace = nullptr;
    ctx.workspace_bytes = 0;
  }
  size_t want = ((bytes + (1 << 20) - 1) >> 20) << 20;
  CUDA_CHECK(cudaMalloc(&ctx.workspace, want));
  ctx.workspace_bytes = want;
  return ctx.workspace;
}

void pin_workspace(CudaContext& ctx) { ++ctx.workspace_pins; }

void unpin_workspace(CudaContext& ctx) {
  if (ctx.workspace_pins > 0) --ctx.workspace_pins;
  if (ctx.workspace_pins > 0 || ctx.retired_workspaces.empty()) return;
  // No graph refers to the retired buffers any more; queued work might still.
  if (cudaStreamSynchronize(ctx.stream) != cudaSuccess) {
    (void)cudaGetLastError();
    return;  // keep them: freeing memory the device may still read is worse than a leak
  }
  for (void* p : ctx.retired_workspaces) (void)cudaFree(p);
  ctx.retired_workspaces.clear();
  (void)cudaGetLastError();
}

void synchronize(int device_index) { CUDA_CHECK(cudaStreamSynchronize(context(device_index).stream)); }

}  // namespace gpu
}  // namespace ge
