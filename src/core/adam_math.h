// The arithmetic of one Adam element, shared by the CPU reference and the CUDA kernel so both
// follow PyTorch's torch.optim.Adam exactly: hyper-parameters are Python doubles there, and
// each enters the fp32 element math rounded to float as PyTorch's scalar arguments do
// ((1 - beta2) is formed in double first, so it is not 1 - float(beta2)).
#pragma once
#include <cmath>

#include "core/half_bits.h"  // GE_HD

namespace ge {

struct AdamElementScalars {
  float lerp_weight;      // 1 - beta1: exp_avg.lerp_(grad, 1 - beta1)
  float beta2;            // exp_avg_sq.mul_(beta2)
  float one_minus_beta2;  //           .addcmul_(grad, grad, value=1 - beta2)
  float eps;
  float step_size;              // lr / (1 - beta1^t)
  float bias_correction2_sqrt;  // sqrt(1 - beta2^t)
};

// t is the 1-based step being taken.
GE_HD AdamElementScalars adam_scalars(double lr, double beta1, double beta2, double eps, double t) {
  AdamElementScalars s;
  s.lerp_weight = static_cast<float>(1.0 - beta1);
  s.beta2 = static_cast<float>(beta2);
  s.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  s.eps = static_cast<float>(eps);
  s.step_size = static_cast<float>(lr / (1.0 - pow(beta1, t)));
  s.bias_correction2_sqrt = static_cast<float>(sqrt(1.0 - pow(beta2, t)));
  return s;
}

// PyTorch's lerp: the formula switches at weight 0.5 to stay exact at both ends.
GE_HD float adam_lerp(float start, float end, float weight) {
  return weight < 0.5f ? start + weight * (end - start) : end - (end - start) * (1.f - weight);
}

// Updates one element in place.
GE_HD void adam_element(const AdamElementScalars& s, float g, float& p, float& m, float& v) {
  m = adam_lerp(m, g, s.lerp_weight);
  v = s.beta2 * v + s.one_minus_beta2 * (g * g);
  const float denom = sqrtf(v) / s.bias_correction2_sqrt + s.eps;
  p = p - s.step_size * (m / denom);
}

}  // namespace ge
