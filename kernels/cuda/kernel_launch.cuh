// Launching our kernels with programmatic dependent launch (sm_90 and later).
//
// A step's graph is a chain of about 160 kernels, many of them a few microseconds long, and each
// waits for the one before it to finish, flush and hand over before its blocks are even placed on
// the GPU. Launched through launch_kernel, a kernel's blocks may be placed while the kernel before
// it in the stream is still finishing; each such kernel must begin with await_previous_kernel(),
// before it reads or writes any memory, which waits until the previous kernel has completed and
// its writes are visible, and then lets the next kernel's blocks be placed in turn. (So when a
// kernel's blocks are placed, every kernel before the previous one has completed: the BatchNorm
// finish kernels read the forward's statistics and the parameters before they wait,
// channel_reduce.cuh.) Kernels launched otherwise (cuDNN's, cuBLAS's, <<<>>>) wait for the whole
// previous kernel as usual.
#pragma once
#include <cuda_runtime.h>

#include <utility>

#include "runtime/cuda_check.h"

namespace ge {
namespace gpu {

// The first statement of every kernel launched through launch_kernel.
__device__ __forceinline__ void await_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

bool programmatic_launch_enabled();  // on unless set_early_launch(Off)

// Sets a function attribute of `kernel` on `device` (the current device) the first time it is
// asked for that kernel, attribute and device; later calls do nothing (whatever their value).
void set_function_attribute_once(const void* kernel, cudaFuncAttribute attribute, int value, int device);
template <class... Params>
void set_function_attribute_once(void (*kernel)(Params...), cudaFuncAttribute attribute, int value, int device) {
  set_function_attribute_once(reinterpret_cast<const void*>(kernel), attribute, value, device);
}

// cluster_blocks > 0: the grid runs in thread-block clusters of that many consecutive blocks along
// x (sm_90; more than 8 needs the kernel's cudaFuncAttributeNonPortableClusterSizeAllowed).
template <class... Params, class... Args>
void launch_kernel_in_clusters(void (*kernel)(Params...), dim3 grid, dim3 block, unsigned cluster_blocks,
                               size_t shared_bytes, cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  cudaLaunchAttribute attrs[2];
  unsigned n = 0;
  if (programmatic_launch_enabled()) {
    attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  if (cluster_blocks > 0) {
    attrs[n].id = cudaLaunchAttributeClusterDimension;
    attrs[n].val.clusterDim.x = cluster_blocks;
    attrs[n].val.clusterDim.y = 1;
    attrs[n].val.clusterDim.z = 1;
    ++n;
  }
  config.attrs = attrs;
  config.numAttrs = n;
  CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

template <class... Params, class... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                   Args&&... args) {
  launch_kernel_in_clusters(kernel, grid, block, 0, shared_bytes, stream, std::forward<Args>(args)...);
}

}  // namespace gpu
}  // namespace ge
