// CPU reference for Adam with PyTorch's semantics and arithmetic:
//   t = step + 1 (the step tensor is advanced first)
//   m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g                          (fp32, per element)
//   bias_correction1 = 1 - b1^t;  bias_correction2 = 1 - b2^t           (double, as Python floats)
//   step_size = lr / bias_correction1
//   denom = sqrt(v) / sqrt(bias_correction2) + eps                      (fp32)
//   p = p - step_size * (m / denom)                                     (fp32)
// The per-step scalars are formed in double and enter the fp32 element math rounded to float,
// which is how PyTorch's fp32 path (foreach or single-tensor) treats Python scalars.
// A nonzero skip element (one of this optimizer's losses overflowed) leaves every tensor, step
// included, untouched. At O3 the parameters and moments are half: computed in fp32, rounded once.
#include <cmath>

#include "cpu_util.h"
#include "ganengine/backend.h"

namespace ge {
namespace cpu {
namespace {

struct AdamScalars {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, eps;
  float step_size;               // lr / bias_correction1
  float bias_correction2_sqrt;   // sqrt(1 - b2^t)
};

AdamScalars scalars_for_step(const ops::AdamConfig& cfg, double t) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(cfg.beta1), t);
  const double bc2 = 1.0 - std::pow(static_cast<double>(cfg.beta2), t);
  AdamScalars s;
  s.beta1 = cfg.beta1;
  s.one_minus_beta1 = 1.f - cfg.beta1;
  s.beta2 = cfg.beta2;
  s.one_minus_beta2 = 1.f - cfg.beta2;
  s.eps = cfg.eps;
  s.step_size = static_cast<float>(static_cast<double>(cfg.lr) / bc1);
  s.bias_correction2_sqrt = static_cast<float>(std::sqrt(bc2));
  return s;
}

// One parameter tensor; all tensors addressed in logical order (formats may differ).
void update_tensor(const AdamScalars& s, Tensor p, const Tensor& g, Tensor m, Tensor v, Tensor half_copy) {
  for (int64_t i = 0; i < p.numel(); ++i) {
    const float grad = static_cast<float>(load_logical(g, i));
    const float m_new = s.beta1 * static_cast<float>(load_logical(m, i)) + s.one_minus_beta1 * grad;
    const float v_new = s.beta2 * static_cast<float>(load_logical(v, i)) + s.one_minus_beta2 * grad * grad;
    const float denom = std::sqrt(v_new) / s.bias_correction2_sqrt + s.eps;
    const float p_new = static_cast<float>(load_logical(p, i)) - s.step_size * (m_new / denom);
    store_logical(m, i, m_new);
    store_logical(v, i, v_new);
    store_logical(p, i, p_new);
    if (half_copy.defined()) store_logical(half_copy, i, p_new);
  }
}

}  // namespace

void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
               const std::vector<Tensor>& exp_avg, const std::vector<Tensor>& exp_avg_sq, Tensor& step,
               const Tensor& skip, const ops::AdamConfig& cfg, const std::vector<Tensor>& half_copies) {
  const size_t n = params.size();
  GE_CHECK(grads.size() == n && exp_avg.size() == n && exp_avg_sq.size() == n,
           "adam_step: params, grads, exp_avg, exp_avg_sq must pair up (", n, ", ", grads.size(), ", ",
           exp_avg.size(), ", ", exp_avg_sq.size(), ")");
  GE_CHECK(half_copies.empty() || half_copies.size() == n, "adam_step: ", half_copies.size(),
           " half copies for ", n, " params");
  require_cpu_floating(step, "adam step");
  require_cpu_floating(skip, "adam skip");
  for (size_t i = 0; i < n; ++i) {
    for (const Tensor* t : {&params[i], &grads[i], &exp_avg[i], &exp_avg_sq[i]}) {
      require_cpu_floating(*t, "adam tensor");
      GE_CHECK(t->numel() == params[i].numel(), "adam_step: ", t->str(), " does not match param ",
               params[i].str());
    }
    if (!half_copies.empty() && half_copies[i].defined()) {
      require_cpu_floating(half_copies[i], "adam half copy");
      GE_CHECK(half_copies[i].numel() == params[i].numel(), "adam_step: half copy ", half_copies[i].str(),
               " does not match param ", params[i].str());
    }
  }

  for (int64_t i = 0; i < skip.numel(); ++i)
    if (load_as_double(skip.data(), skip.dtype(), i) != 0.0) return;  // one of the losses overflowed

  const double t = load_as_double(step.data(), step.dtype(), 0) + 1.0;
  store_from_double(step.data(), step.dtype(), 0, t);
  const AdamScalars s = scalars_for_step(cfg, t);
  parallel_for(static_cast<int64_t>(n), [&](int64_t i) {
    const size_t k = static_cast<size_t>(i);
    update_tensor(s, params[k], grads[k], exp_avg[k], exp_avg_sq[k],
                  half_copies.empty() ? Tensor() : half_copies[k]);
  });
}

}  // namespace cpu
}  // namespace ge
