// cuda_util.cuh's occupancy queries (sm_count, resident_blocks, resident_clusters), each answer
// asked of the runtime once (this file is compiled by the host compiler; it needs only the
// runtime API).
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "runtime/cuda_check.h"

namespace ge {
namespace gpu {

int sm_count(int device) {
  static std::mutex mu;
  static std::map<int, int> known;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = known.find(device); it != known.end()) return it->second;
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  known.emplace(device, sms);
  return sms;
}

int resident_blocks(const void* kernel, int threads, size_t dynamic_smem, int device) {
  using Key = std::tuple<const void*, int, size_t, int>;
  static std::mutex mu;
  static std::map<Key, int> known;
  const Key key{kernel, threads, dynamic_smem, device};
  const int sms = sm_count(device);
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = known.find(key); it != known.end()) return it->second;
  int per_sm = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, dynamic_smem));
  const int blocks = sms * std::max(per_sm, 1);
  known.emplace(key, blocks);
  return blocks;
}

int resident_clusters(const void* kernel, dim3 block, unsigned cluster_blocks, size_t dynamic_smem, int device) {
  using Key = std::tuple<const void*, unsigned, unsigned, unsigned, unsigned, size_t, int>;
  static std::mutex mu;
  static std::map<Key, int> known;
  const Key key{kernel, block.x, block.y, block.z, cluster_blocks, dynamic_smem, device};
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = known.find(key); it != known.end()) return it->second;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(cluster_blocks);
  config.blockDim = block;
  config.dynamicSmemBytes = dynamic_smem;
  cudaLaunchAttribute cluster;
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = cluster_blocks;
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = 1;
  config.attrs = &cluster;
  config.numAttrs = 1;
  int clusters = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config));
  known.emplace(key, clusters);
  return clusters;
}

}  // namespace gpu
}  // namespace ge
