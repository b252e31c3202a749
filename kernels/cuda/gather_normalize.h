// The one kernel behind GpuResidentSource (src/data/gpu_resident.h), declared for
// src/data/gpu_resident.cpp only; CUDA builds only.
#pragma once
#include <cstdint>

#include "ganengine/tensor.h"

namespace ge {
namespace gpu {

// out (n, C, S, S): f32, f16 or bf16, NCHW or NHWC, on images' device. Item k is image
// order[k] of images, a u8 (N, C, S, S) NHWC tensor (each image's HWC bytes contiguous),
// normalised as (float(u8) / 255.0f - 0.5f) / 0.5f in fp32 and rounded once to out's dtype.
// order: n device-resident indices in [0, N). Enqueued on the device's context stream; no sync.
void gather_normalize(const Tensor& images, const int64_t* order, Tensor& out);

}  // namespace gpu
}  // namespace ge
