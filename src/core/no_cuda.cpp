// What a CPU-only build answers where the CUDA backend would be.
#ifndef GE_WITH_CUDA
#include "ganengine/backend.h"

namespace ge {
bool built_with_cuda() { return false; }
bool cuda_available() { return false; }
void synchronize(Device) {}
}  // namespace ge
#endif
