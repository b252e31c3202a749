#include <string>
#include <vector>

#include "core/backend.h"
#include "core/cuda_version_text.h"
#include "runtime/cuda_check.h"

namespace ge::gpu {

std::vector<std::string> cuda_info_lines() {
  std::vector<std::string> lines;
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  lines.push_back(cuda_versions_line(runtime, driver));
  size_t v = cudnnGetVersion();
  lines.push_back("cuDNN " + std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." +
                  std::to_string(v % 100) + " (compiled against " + std::to_string(CUDNN_MAJOR) + "." +
                  std::to_string(CUDNN_MINOR) + ")");
  if (!cuda_available()) {
    lines.push_back("GPUs: none usable (no driver or no device): use --device cpu");
    return lines;
  }
  int n = 0;
  CUDA_CHECK(cudaGetDeviceCount(&n));
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    CUDA_CHECK(cudaGetDeviceProperties(&p, i));
    lines.push_back("cuda:" + std::to_string(i) + ": " + p.name + ", compute " + std::to_string(p.major) + "." +
                    std::to_string(p.minor) + ", " + std::to_string(p.multiProcessorCount) + " SMs, " +
                    std::to_string(p.totalGlobalMem >> 20) + " MiB");
  }
  return lines;
}

}  // namespace ge::gpu
