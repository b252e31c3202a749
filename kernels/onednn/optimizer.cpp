// Adam and the loss-scale unscaling over every parameter tensor, threaded over the elements of
// each tensor. The arithmetic is the reference's, element for element (kernels/cpu/adam.cpp and
// amp.cpp, through src/core/adam_math.h), so the results are bitwise the reference's: every
// operand is addressed by position, so all tensors of one parameter must share a layout.
#include <cmath>

#include "core/adam_math.h"
#include "onednn/element_types.h"
#include "onednn/fast_ops.h"

namespace ge::onednn {
namespace {

bool same_layout(const Tensor& a, const Tensor& b) {
  return a.rank() == b.rank() && (a.rank() != 4 || a.format() == b.format());
}

float scalar(const Tensor& t, int64_t i = 0) { return static_cast<float>(load_as_double(t.data(), t.dtype(), i)); }

// dst = src * inv_scale (+ dst); true when src held a non-finite value.
bool unscale_one(const Tensor& src, const Tensor& dst, float inv_scale, bool accumulate) {
  bool any_non_finite = false;
  with_element_type(src.dtype(), [&](auto tag) {
    using S = decltype(tag);
    const S* in = static_cast<const S*>(src.data());
    float* out = static_cast<float*>(dst.data());
    const int64_t n = src.numel();
    int bad = 0;
#pragma omp parallel for simd schedule(static) reduction(| : bad)
    for (int64_t i = 0; i < n; ++i) {
      const float g = widen(in[i]);
      bad |= std::isfinite(g) ? 0 : 1;
      out[i] = accumulate ? g * inv_scale + out[i] : g * inv_scale;
    }
    any_non_finite = bad != 0;
  });
  return any_non_finite;
}

bool unscale_takes(const std::vector<Tensor>& src, const std::vector<Tensor>& dst) {
  for (size_t i = 0; i < src.size(); ++i)
    if (!fast_dtype(src[i].dtype()) || dst[i].dtype() != DType::F32 || !same_layout(src[i], dst[i])) return false;
  return true;
}

template <class P, class H>
void update(const AdamElementScalars& s, const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
            const Tensor& half_copy) {
  P* ps = static_cast<P*>(p.data());
  P* ms = static_cast<P*>(m.data());
  P* vs = static_cast<P*>(v.data());
  const float* gs = static_cast<const float*>(g.data());
  H* hs = half_copy.defined() ? static_cast<H*>(half_copy.data()) : nullptr;
  const int64_t n = p.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float p_i = widen(ps[i]), m_i = widen(ms[i]), v_i = widen(vs[i]);
    adam_element(s, gs[i], p_i, m_i, v_i);
    ms[i] = narrow<P>(m_i);
    vs[i] = narrow<P>(v_i);
    ps[i] = narrow<P>(p_i);
    if (hs) hs[i] = narrow<H>(p_i);
  }
}

}  // namespace

bool unscale_grads(const std::vector<Tensor>& src, const std::vector<Tensor>& dst, const Tensor& scale,
                   Tensor& found_inf, bool accumulate) {
  if (!unscale_takes(src, dst)) return false;
  // 1/scale formed in double and rounded to fp32 once, as PyTorch's inv_scale tensor is.
  const float inv_scale = static_cast<float>(1.0 / load_as_double(scale.data(), scale.dtype(), 0));
  bool any_non_finite = false;
  for (size_t t = 0; t < src.size(); ++t) any_non_finite |= unscale_one(src[t], dst[t], inv_scale, accumulate);
  // Set, never cleared: found_inf gathers overflows from several calls of one step.
  if (any_non_finite) store_from_double(found_inf.data(), found_inf.dtype(), 0, 1.0);
  return true;
}

bool adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& exp_avg,
               const std::vector<Tensor>& exp_avg_sq, Tensor& step, const Tensor& skip, const ops::AdamConfig& cfg,
               const std::vector<Tensor>& half_copies, const ops::PendingGrads* pending) {
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    if (!fast_dtype(p.dtype()) || grads[i].dtype() != DType::F32 || exp_avg[i].dtype() != p.dtype() ||
        exp_avg_sq[i].dtype() != p.dtype() || !same_layout(p, grads[i]) || !same_layout(p, exp_avg[i]) ||
        !same_layout(p, exp_avg_sq[i]))
      return false;
    if (!half_copies.empty() && half_copies[i].defined() && !same_layout(p, half_copies[i])) return false;
  }
  if (pending && !unscale_takes(pending->src, grads)) return false;

  std::vector<Tensor> unscaled;  // the gradients the update reads, when not stored into grads
  if (pending) {                 // unscaled first, whether or not the step is skipped
    Tensor found = pending->found_inf;
    if (!pending->store_grads)
      for (const Tensor& g : grads) unscaled.push_back(Tensor::empty(g.shape(), g.dtype(), g.device(), g.format()));
    // Into fresh buffers, accumulation starts from the stored grads.
    if (!pending->store_grads && pending->accumulate)
      for (size_t i = 0; i < grads.size(); ++i) unscaled[i].copy_from(grads[i]);
    unscale_grads(pending->src, pending->store_grads ? grads : unscaled, pending->scale, found, pending->accumulate);
  }
  const std::vector<Tensor>& read = unscaled.empty() ? grads : unscaled;
  for (int64_t i = 0; i < skip.numel(); ++i)
    if (scalar(skip, i) != 0.f) return true;  // one of the losses overflowed: nothing moves

  const double t = load_as_double(step.data(), step.dtype(), 0) + 1.0;
  store_from_double(step.data(), step.dtype(), 0, t);
  const AdamElementScalars s = adam_scalars(cfg.lr, cfg.beta1, cfg.beta2, cfg.eps, t);
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor half = half_copies.empty() ? Tensor() : half_copies[i];
    with_element_type(params[i].dtype(), [&](auto ptag) {
      using P = decltype(ptag);
      if (!half.defined())
        update<P, P>(s, params[i], read[i], exp_avg[i], exp_avg_sq[i], half);
      else
        with_element_type(half.dtype(), [&](auto htag) {
          update<P, decltype(htag)>(s, params[i], read[i], exp_avg[i], exp_avg_sq[i], half);
        });
    });
  }
  return true;
}

}  // namespace ge::onednn
