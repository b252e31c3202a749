// Launching our kernels with programmatic dependent launch (sm_90 and later).
//
// A step's graph is a chain of about 160 kernels, many of them a few microseconds long, and each
// waits for the one before it to finish, flush and hand over before its blocks are even placed on
// the GPU. Launched through launch_kernel, a kernel's blocks may be placed while the kernel before
// it in the stream is still finishing; each such kernel must begin with await_previous_kernel(),
// before it reads or writes any memory, which waits until the previous kernel has completed and
// its writes are visible, and then lets the next kernel's blocks be placed in turn. Kernels
// launched otherwise (cuDNN's, cuBLAS's, <<<>>>) wait for the whole previous kernel as usual.
// GANENGINE_PDL=off launches every kernel the usual way.
#pragma once
#include <cuda_runtime.h>

#include <utility>

#include "ganengine/cuda_check.h"

namespace ge {
namespace gpu {

// The first statement of every kernel launched through launch_kernel.
__device__ __forceinline__ void await_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

bool programmatic_launch_enabled();  // GANENGINE_PDL (on by default) or set_early_launch

template <class... Params, class... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                   Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  cudaLaunchAttribute early;
  early.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  early.val.programmaticStreamSerializationAllowed = 1;
  if (programmatic_launch_enabled()) {
    config.attrs = &early;
    config.numAttrs = 1;
  }
  CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

}  // namespace gpu
}  // namespace ge
