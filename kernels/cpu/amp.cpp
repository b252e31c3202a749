// CPU reference for the loss-scale bookkeeping: unscaling gradients into fp32 with a fused
// finite check, scaling in place, and Apex's dynamic loss-scale update.
#include <cmath>

#include "core/backend.h"
#include "cpu/cpu_util.h"

namespace ge {
namespace cpu {

// dst = src * (1/scale) (+ dst), in fp32. 1/scale is formed in double and rounded to fp32 once,
// as PyTorch's inv_scale tensor is. Only src is checked for non-finite values: those are the
// incoming (scaled) grads, and an overflow there is what the scaler reacts to.
void unscale_grads(const std::vector<Tensor>& src, const std::vector<Tensor>& dst, const Tensor& scale,
                   Tensor& found_inf, bool accumulate) {
  GE_CHECK(src.size() == dst.size(), "unscale_grads: ", src.size(), " sources but ", dst.size(), " destinations");
  require_cpu_floating(scale, "unscale scale");
  require_cpu_floating(found_inf, "unscale found_inf");
  const float inv_scale = static_cast<float>(1.0 / load_as_double(scale.data(), scale.dtype(), 0));
  bool any_non_finite = false;
  for (size_t t = 0; t < src.size(); ++t) {
    require_cpu_floating(src[t], "unscale src");
    require_cpu_floating(dst[t], "unscale dst");
    GE_CHECK(src[t].numel() == dst[t].numel(), "unscale_grads: src ", src[t].str(), " and dst ", dst[t].str(),
             " differ in size");
    Tensor out = dst[t];  // a handle to the same storage: dst is written through it
    for (int64_t i = 0; i < src[t].numel(); ++i) {
      // Checked after the conversion to fp32: an f64 value beyond fp32's range is an overflow too.
      const float g = static_cast<float>(load_logical(src[t], i));
      if (!std::isfinite(g)) any_non_finite = true;
      float v = g * inv_scale;
      if (accumulate) v += static_cast<float>(load_logical(out, i));
      store_logical(out, i, v);
    }
  }
  // Set, never cleared: found_inf gathers overflows from several calls (losses) of one step.
  if (any_non_finite) store_from_double(found_inf.data(), found_inf.dtype(), 0, 1.0);
}

void scale_inplace(const Tensor& t, float factor) {
  require_cpu_floating(t, "scale_inplace tensor");
  Tensor out = t;  // NOLINT(performance-unnecessary-copy-initialization): a writable handle to t's storage
  const bool wide = computes_in_double(t.dtype());
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = load_as_double(t.data(), t.dtype(), i);  // element-wise: layout irrelevant
    const double scaled = wide ? v * static_cast<double>(factor) : static_cast<double>(static_cast<float>(v) * factor);
    store_from_double(out.data(), out.dtype(), i, scaled);
  }
}

// Apex's update_scale: on overflow halve (not below the floor) and restart the count of clean
// steps; otherwise count the clean step and double (not above the ceiling) after
// growth_interval of them. A static scaler never changes.
void loss_scaler_update(Tensor& state, const Tensor& found_inf, const ops::ScalerConfig& cfg) {
  require_cpu_floating(state, "loss scaler state");
  require_cpu_floating(found_inf, "loss scaler found_inf");
  GE_CHECK(state.numel() == 2, "loss scaler state must be {scale, clean_steps}, got ", state.str());
  if (!cfg.dynamic) return;
  double scale = load_as_double(state.data(), state.dtype(), 0);
  double clean_steps = load_as_double(state.data(), state.dtype(), 1);
  const bool overflow = load_as_double(found_inf.data(), found_inf.dtype(), 0) != 0.0;
  if (overflow) {
    scale = std::max(static_cast<double>(cfg.min_scale), scale / 2.0);
    clean_steps = 0.0;
  } else {
    clean_steps += 1.0;
    if (clean_steps >= cfg.growth_interval) {
      scale = std::min(static_cast<double>(cfg.max_scale), scale * 2.0);
      clean_steps = 0.0;
    }
  }
  store_from_double(state.data(), state.dtype(), 0, scale);
  store_from_double(state.data(), state.dtype(), 1, clean_steps);
}

}  // namespace cpu
}  // namespace ge
