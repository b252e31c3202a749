#include "ganengine/system_info.h"

#include "core/backend.h"

namespace ge {

#ifdef GE_WITH_CUDA
namespace gpu {
std::vector<std::string> cuda_info_lines();
}
#endif

std::vector<std::string> system_info_lines() {
  std::vector<std::string> lines;
#ifdef GE_WITH_CUDA
  lines.push_back("build: CPU reference backend + CUDA backend (sm_90, and sm_90a for the warpgroup-MMA kernels)");
  for (auto& l : gpu::cuda_info_lines()) lines.push_back(l);
#else
  lines.push_back("build: CPU reference backend only (no CUDA toolkit was found at build time)");
#endif
  return lines;
}

}  // namespace ge
