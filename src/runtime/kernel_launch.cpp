// kernel_launch.cuh's switch and attribute setter (this file is compiled by the host compiler,
// which does not read that header's device code).
#include <cuda_runtime.h>

#include <atomic>
#include <mutex>
#include <set>
#include <tuple>

#include "core/backend.h"
#include "runtime/cuda_check.h"

namespace ge {
namespace gpu {
namespace {
std::atomic<EarlyLaunch> early_launch{EarlyLaunch::On};
}

void set_early_launch(EarlyLaunch choice) { early_launch = choice; }

bool programmatic_launch_enabled() { return early_launch.load(std::memory_order_relaxed) == EarlyLaunch::On; }

void set_function_attribute_once(const void* kernel, cudaFuncAttribute attribute, int value, int device) {
  using Key = std::tuple<const void*, int, int>;
  static std::mutex mu;
  static std::set<Key> done;
  const Key key{kernel, static_cast<int>(attribute), device};
  std::lock_guard<std::mutex> lock(mu);
  if (done.count(key)) return;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, attribute, value));
  done.insert(key);
}

}  // namespace gpu
}  // namespace ge
