// One gradient element as ops::unscale_grads forms it: src / scale, plus what the destination
// held when accumulating, with a non-finite src noted for the overflow flag. The unscale pass
// (amp.cu) and Adam's pending gradients (adam.cu, ops::PendingGrads) both use it, so the update
// reads exactly the gradient the separate pass would have written.
#pragma once

namespace ge {
namespace gpu {

struct ElementUnscale {
  float inv_scale;  // 1 / scale: scales are powers of two, so the product is exact (and
                    // contracting it with the sum changes nothing)
  bool accumulate;
  bool saw_non_finite = false;
  __device__ __forceinline__ float operator()(float src, float prev) {
    if (!isfinite(src)) saw_non_finite = true;
    float out = src * inv_scale;
    if (accumulate) out += prev;
    return out;
  }
};

}  // namespace gpu
}  // namespace ge
