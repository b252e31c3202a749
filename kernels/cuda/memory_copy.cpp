// Byte copies between host and device memory, ordered on the device's stream.
#include "ganengine/cuda_context.h"
#include "ganengine/dtype.h"

namespace ge {
namespace gpu {

void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) {
  if (bytes == 0) return;
  const Device gpu_side = dst_dev.is_cuda() ? dst_dev : src_dev;
  CudaContext& ctx = context(gpu_side.index);
  if (dst_dev.is_cuda() && src_dev.is_cuda() && dst_dev.index != src_dev.index) {
    CUDA_CHECK(cudaStreamSynchronize(context(src_dev.index).stream));
    CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_dev.index, src, src_dev.index, bytes, ctx.stream));
  } else {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, ctx.stream));
  }
  // A host destination (or pageable host source) must be complete before the caller reads it.
  if (dst_dev.is_cpu() || src_dev.is_cpu()) CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
}

void zero_bytes(void* dst, Device dev, size_t bytes) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, context(dev.index).stream));
}

}  // namespace gpu
}  // namespace ge
