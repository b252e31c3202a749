// What a benchmark ran on and how much device memory is in use, for `ganengine bench`.
#include <cctype>
#include <fstream>
#include <sstream>

#include "runtime/cuda_context.h"
#include "runtime/gpu_measure.h"

namespace ge {

namespace {

std::string cuda_version_str(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

bool looks_like_version(const std::string& w) {  // "580.65.06"
  if (w.empty() || !std::isdigit(static_cast<unsigned char>(w[0]))) return false;
  bool dot = false;
  for (char ch : w) {
    if (ch == '.')
      dot = true;
    else if (!std::isdigit(static_cast<unsigned char>(ch)))
      return false;
  }
  return dot;
}

// The runtime API only reports the CUDA version a driver supports; the driver's own release
// number (what nvidia-smi shows) is in the kernel module's banner, e.g.
// "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build  (...)".
std::string kernel_module_version() {
  std::ifstream f("/proc/driver/nvidia/version");
  std::string line;
  if (!f || !std::getline(f, line)) return "unknown";
  std::istringstream words(line);
  for (std::string w; words >> w;)
    if (looks_like_version(w)) return w;
  return "unknown";
}

}  // namespace

DeviceMemory device_memory(Device d) {
  GE_CHECK(d.is_cuda(), "device_memory on ", d.str());
  gpu::context(d.index);  // makes d current (and creates its context, which holds memory too)
  DeviceMemory m;
  CUDA_CHECK(cudaMemGetInfo(&m.free_bytes, &m.total_bytes));
  return m;
}

DeviceFacts device_facts(Device d) {
  GE_CHECK(d.is_cuda(), "device_facts on ", d.str());
  gpu::CudaContext& ctx = gpu::context(d.index);
  DeviceFacts f;
  cudaDeviceProp p{};
  CUDA_CHECK(cudaGetDeviceProperties(&p, d.index));
  f.name = p.name;
  f.compute_capability = std::to_string(p.major) + "." + std::to_string(p.minor);
  f.sm_count = p.multiProcessorCount;
  f.driver = kernel_module_version();
  int v = 0;
  CUDA_CHECK(cudaDriverGetVersion(&v));
  f.driver_cuda = cuda_version_str(v);
  CUDA_CHECK(cudaRuntimeGetVersion(&v));
  f.cuda_runtime = cuda_version_str(v);
  const size_t dnn = cudnnGetVersion();  // 9.19.0 is 91900
  f.cudnn = std::to_string(dnn / 10000) + "." + std::to_string(dnn % 10000 / 100) + "." + std::to_string(dnn % 100);
  int blas = 0;
  CUBLAS_CHECK(cublasGetVersion(ctx.cublas, &blas));  // major*10000 + minor*100 + patch
  f.cublas = std::to_string(blas / 10000) + "." + std::to_string(blas % 10000 / 100) + "." + std::to_string(blas % 100);
  return f;
}

}  // namespace ge
