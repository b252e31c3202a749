// The line `ganengine info` prints about CUDA's versions, apart from the CUDA calls that give
// them (src/runtime/cuda_info.cpp), so that every build can test it.
#pragma once
#include <string>

namespace ge {

// runtime and driver as cudaRuntimeGetVersion and cudaDriverGetVersion report them (1000 *
// major + 10 * minor). A driver version of 0 means no CUDA driver is installed: the line says
// so instead of "driver supports 0.0".
std::string cuda_versions_line(int runtime, int driver);

}  // namespace ge
