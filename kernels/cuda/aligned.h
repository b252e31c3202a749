// Whether a buffer starts on a multiple of `bytes`: what a wide access (16-byte vector loads and
// stores, cp.async, whole MMA fragments; 8 bytes of FP8 codes) asks of it. A plain header with
// GE_HD: the host code that checks a buffer before choosing a kernel and the kernels that choose a
// wide store read the same test.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/host_device_math.h"

namespace ge {
namespace gpu {

GE_HD bool aligned_to(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

GE_HD bool aligned16(const void* p) { return aligned_to(p, 16); }

}  // namespace gpu
}  // namespace ge
