// CPU reference for ops::fp8_update_scales: the delayed-scaling step of core/fp8_scaling_math.h
// applied to each state in turn, exactly as the CUDA kernel (kernels/cuda/fp8_scaling.cu) applies
// it in one thread per state.
#include "core/backend.h"
#include "core/fp8_scaling_math.h"

namespace ge {
namespace cpu {

void fp8_update_scales(const std::vector<Fp8Scaling>& states, const Fp8DelayedScaling& recipe) {
  const bool most_recent = recipe.amax_compute_algo == Fp8AmaxAlgo::MostRecent;
  for (const Fp8Scaling& s : states) {
    GE_CHECK(s.amax_history.device().is_cpu(), "fp8_update_scales: ", s.amax_history.str(), " is not on the CPU");
    fp8_delayed_scaling_step(s.amax_history.data_as<float>(), recipe.amax_history_len, s.scale.data_as<float>(),
                             s.scale_inv.data_as<float>(), fp8_scaled_max(s.format, recipe.margin), most_recent);
  }
}

}  // namespace cpu
}  // namespace ge
