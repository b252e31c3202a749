// CPU reference for Adam with PyTorch's semantics and arithmetic (src/core/adam_math.h):
//   t = step + 1 (the step tensor is advanced first)
//   m = lerp(m, g, 1 - b1);  v = b2*v + (1-b2)*g*g                        (fp32, per element)
//   p = p - lr/(1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)         (scalars from doubles)
// A nonzero skip element (one of this optimizer's losses overflowed) leaves every tensor, step
// included, untouched (pending gradients are still unscaled into the grads). At O3 the
// parameters and moments are half: computed in fp32, rounded once.
#include <cmath>

#include "core/adam_math.h"
#include "core/backend.h"
#include "cpu/cpu_util.h"

namespace ge {
namespace cpu {
namespace {

// One parameter tensor; all tensors addressed in logical order (formats may differ).
void update_tensor(const AdamElementScalars& s, Tensor p, const Tensor& g, Tensor m, Tensor v, Tensor half_copy) {
  for (int64_t i = 0; i < p.numel(); ++i) {
    float p_i = static_cast<float>(load_logical(p, i));
    float m_i = static_cast<float>(load_logical(m, i));
    float v_i = static_cast<float>(load_logical(v, i));
    adam_element(s, static_cast<float>(load_logical(g, i)), p_i, m_i, v_i);
    store_logical(m, i, m_i);
    store_logical(v, i, v_i);
    store_logical(p, i, p_i);
    if (half_copy.defined()) store_logical(half_copy, i, p_i);
  }
}

}  // namespace

void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& exp_avg,
               const std::vector<Tensor>& exp_avg_sq, Tensor& step, const Tensor& skip, const ops::AdamConfig& cfg,
               const std::vector<Tensor>& half_copies, const ops::PendingGrads* pending) {
  const size_t n = params.size();
  // List lengths are checked once, in ops::adam_step.
  require_cpu_floating(step, "adam step");
  require_cpu_floating(skip, "adam skip");
  for (size_t i = 0; i < n; ++i) {
    for (const Tensor* t : {&params[i], &grads[i], &exp_avg[i], &exp_avg_sq[i]}) {
      require_cpu_floating(*t, "adam tensor");
      GE_CHECK(t->numel() == params[i].numel(), "adam_step: ", t->str(), " does not match param ", params[i].str());
    }
    if (!half_copies.empty() && half_copies[i].defined()) {
      require_cpu_floating(half_copies[i], "adam half copy");
      GE_CHECK(half_copies[i].numel() == params[i].numel(), "adam_step: half copy ", half_copies[i].str(),
               " does not match param ", params[i].str());
    }
  }

  std::vector<Tensor> unscaled;  // the gradients the update reads, when not stored into grads
  if (pending) {                 // unscaled first, whether or not the step is skipped
    Tensor found = pending->found_inf;
    if (!pending->store_grads)
      for (const Tensor& g : grads) unscaled.push_back(g.clone());
    unscale_grads(pending->src, pending->store_grads ? grads : unscaled, pending->scale, found, pending->accumulate);
  }
  const std::vector<Tensor>& read = unscaled.empty() ? grads : unscaled;
  for (int64_t i = 0; i < skip.numel(); ++i)
    if (load_as_double(skip.data(), skip.dtype(), i) != 0.0) return;  // one of the losses overflowed

  const double t = load_as_double(step.data(), step.dtype(), 0) + 1.0;
  store_from_double(step.data(), step.dtype(), 0, t);
  const AdamElementScalars s = adam_scalars(cfg.lr, cfg.beta1, cfg.beta2, cfg.eps, t);
  parallel_for(static_cast<int64_t>(n), [&](int64_t i) {
    const size_t k = static_cast<size_t>(i);
    update_tensor(s, params[k], read[k], exp_avg[k], exp_avg_sq[k], half_copies.empty() ? Tensor() : half_copies[k]);
  });
}

}  // namespace cpu
}  // namespace ge
