#include "core/cuda_version_text.h"

namespace ge {
namespace {
std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }
}  // namespace

std::string cuda_versions_line(int runtime, int driver) {
  return "CUDA runtime " + version_text(runtime) +
         (driver > 0 ? ", driver supports " + version_text(driver) : std::string(", no CUDA driver"));
}

}  // namespace ge
