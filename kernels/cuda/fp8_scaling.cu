// ops::fp8_update_scales on the GPU: one launch for up to kStatesPerLaunch states, a thread per
// state running core/fp8_scaling_math.h's delayed-scaling step over its history in global memory,
// bitwise what the CPU reference kernels/cpu/fp8_scaling.cpp computes. The table of states travels
// by value as a kernel parameter (about 1.8 KiB, under the classic 4 KiB limit) and every value is
// read and written on the device, so the launch is capturable in a CUDA graph as it stands.
// A history is a few dozen floats at most in practice: one thread walks it faster than a block
// would synchronise over it.
#include <vector>

#include "core/backend.h"
#include "core/fp8_scaling_math.h"
#include "cuda/cuda_util.cuh"
#include "cuda/kernel_launch.cuh"

namespace ge {
namespace gpu {
namespace {

constexpr int kStatesPerLaunch = 64;

struct ScalingTable {
  float* history[kStatesPerLaunch];
  float* scale[kStatesPerLaunch];
  float* scale_inv[kStatesPerLaunch];
  float scaled_max[kStatesPerLaunch];  // fp8_max * 2^-margin of the state's format
  int count;
};

__global__ void update_scales_kernel(ScalingTable table, int history_len, bool most_recent) {
  await_previous_kernel();
  const int k = static_cast<int>(threadIdx.x);
  if (k >= table.count) return;
  fp8_delayed_scaling_step(table.history[k], history_len, table.scale[k], table.scale_inv[k], table.scaled_max[k],
                           most_recent);
}

}  // namespace

void fp8_update_scales(const std::vector<Fp8Scaling>& states, const Fp8DelayedScaling& recipe) {
  const bool most_recent = recipe.amax_compute_algo == Fp8AmaxAlgo::MostRecent;
  ScalingTable table{};
  cudaStream_t stream = nullptr;
  auto flush = [&] {
    if (table.count == 0) return;
    launch_kernel(update_scales_kernel, 1, kStatesPerLaunch, 0, stream, table, recipe.amax_history_len, most_recent);
    CUDA_CHECK_LAUNCH();
    table = ScalingTable{};
  };
  for (const Fp8Scaling& s : states) {
    GE_CHECK(s.amax_history.device().is_cuda(), "fp8_update_scales: ", s.amax_history.str(),
             " is not on a CUDA device");
    if (!stream) stream = stream_of(s.amax_history);
    if (table.count == kStatesPerLaunch) flush();
    const int k = table.count++;
    table.history[k] = s.amax_history.data_as<float>();
    table.scale[k] = s.scale.data_as<float>();
    table.scale_inv[k] = s.scale_inv.data_as<float>();
    table.scaled_max[k] = fp8_scaled_max(s.format, recipe.margin);
  }
  flush();
}

}  // namespace gpu
}  // namespace ge
