// cuda_util.cuh's resident_blocks: the occupancy of each kernel, block shape and device, asked of
// the runtime once (this file is compiled by the host compiler; it needs only the runtime API).
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "ganengine/cuda_check.h"

namespace ge {
namespace gpu {

int resident_blocks(const void* kernel, int threads, size_t dynamic_smem, int device) {
  using Key = std::tuple<const void*, int, size_t, int>;
  static std::mutex mu;
  static std::map<Key, int> known;
  const Key key{kernel, threads, dynamic_smem, device};
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = known.find(key); it != known.end()) return it->second;
  int sms = 0, per_sm = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, dynamic_smem));
  const int blocks = sms * std::max(per_sm, 1);
  known.emplace(key, blocks);
  return blocks;
}

}  // namespace gpu
}  // namespace ge
