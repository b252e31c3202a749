// Byte copies between host and device memory, ordered on the device's stream.
#include "ganengine/dtype.h"
#include "runtime/cuda_context.h"

namespace ge {
namespace gpu {

void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) {
  if (bytes == 0) return;
  const Device gpu_side = dst_dev.is_cuda() ? dst_dev : src_dev;
  CudaContext& ctx = context(gpu_side.index);
  if (dst_dev.is_cuda() && src_dev.is_cuda() && dst_dev.index != src_dev.index) {
    // Between GPUs: the source is complete first, and the copy before returning. The source's
    // memory is reused in its own device's stream order as soon as its tensor is freed, which the
    // destination's stream knows nothing of: without the first wait, handing one GPU's training
    // state to replicas on others could read a block already freed and reused.
    CUDA_CHECK(cudaStreamSynchronize(context(src_dev.index).stream()));
    CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_dev.index, src, src_dev.index, bytes, ctx.stream()));
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
  } else {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, ctx.stream()));
  }
  // A host destination (or pageable host source) must be complete before the caller reads it.
  if (dst_dev.is_cpu() || src_dev.is_cpu()) CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
}

void zero_bytes(void* dst, Device dev, size_t bytes) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, context(dev.index).stream()));
}

}  // namespace gpu
}  // namespace ge
