// CPU reference for ops::ema_update: in logical element order,
//   average = f32(f32(decay * average) + f32((1 - decay) * value))
// with decay and 1 - decay rounded to f32 first. The host code is built without FMA contraction
// (CMakeLists.txt), so each product and the sum are rounded separately, as the GPU kernel's
// explicitly rounded operations are.
#include "core/backend.h"
#include "cpu/cpu_util.h"

namespace ge {
namespace cpu {

void ema_update(const std::vector<Tensor>& averages, const std::vector<Tensor>& values, double decay) {
  const auto keep = static_cast<float>(decay);
  const auto take = static_cast<float>(1.0 - decay);
  for (size_t k = 0; k < averages.size(); ++k) {
    require_cpu_floating(averages[k], "ema_update average");
    require_cpu_floating(values[k], "ema_update value");
    require_same_shape(averages[k], values[k], "ema_update average", "value");
  }
  parallel_for(static_cast<int64_t>(averages.size()), [&](int64_t k) {
    Tensor average = averages[static_cast<size_t>(k)];
    const Tensor& value = values[static_cast<size_t>(k)];
    for (int64_t i = 0; i < average.numel(); ++i) {
      const float kept = keep * static_cast<float>(load_logical(average, i));
      const float taken = take * static_cast<float>(load_logical(value, i));
      store_logical(average, i, static_cast<double>(kept + taken));
    }
  });
}

}  // namespace cpu
}  // namespace ge
