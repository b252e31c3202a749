// Whether a list of gradients holds a non-finite value, as a flag on the device.
#pragma once
#include <cuda_runtime.h>

#include <vector>

#include "ganengine/tensor.h"

namespace ge {
namespace gpu {

// Sets *found_inf to 1 if any element of `tensors` (f32, f16 or bf16 on the GPU) is an infinity
// or a NaN, and leaves it as it was otherwise: the overflow test of ops::unscale_grads, without
// unscaling anything. One multi-tensor launch per table of tensors, on `stream`.
void raise_if_non_finite(const std::vector<const Tensor*>& tensors, float* found_inf, cudaStream_t stream);

}  // namespace gpu
}  // namespace ge
