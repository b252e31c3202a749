// The alignment the kernels' 16-byte accesses (vector loads and stores, cp.async, whole MMA
// fragments) ask of a buffer. A plain header: the host code that checks a buffer before choosing a
// kernel reads the same test.
#pragma once
#include <cstdint>

namespace ge {
namespace gpu {

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace gpu
}  // namespace ge
