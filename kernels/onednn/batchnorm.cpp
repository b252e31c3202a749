// BatchNorm2d's training forward, eval forward and backward (with the fused ReLU/LeakyReLU) as
// threaded loops over NCHW tensors, one channel per iteration. The reference is
// kernels/cpu/batchnorm.cpp, with the same formulas: statistics in two passes (mean, then the
// squared deviations) accumulated in double across each channel, running statistics updated in
// double with the unbiased variance, skipped for a non-finite batch. The per-element arithmetic
// is fp32: y = x * (invstd * gamma) + (beta - mean * invstd * gamma), within fp32 rounding of
// the reference's double. The normalised value is rounded to the storage type before a fused
// activation, and the activation's gradient before BatchNorm's backward, as the two ops in
// sequence do. Synchronised BatchNorm across replicas and NHWC tensors stay on the reference.
#include <cmath>
#include <vector>

#include "core/backend.h"
#include "onednn/element_types.h"
#include "onednn/fast_ops.h"

namespace ge::onednn {
namespace {

bool nchw_of(DType t, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* x : ts)
    if (x->rank() != 4 || x->format() != MemoryFormat::NCHW || x->dtype() != t) return false;
  return fast_dtype(t);
}

bool per_channel_ok(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->defined() && !fast_dtype(t->dtype())) return false;
  return true;
}

// A per-channel parameter's value as float; written back rounded once.
float param(const Tensor& t, int64_t c) {
  float v = 0.f;
  with_element_type(t.dtype(), [&](auto tag) { v = widen(static_cast<const decltype(tag)*>(t.data())[c]); });
  return v;
}
void set_param(const Tensor& t, int64_t c, double v) {
  with_element_type(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    static_cast<T*>(t.data())[c] = narrow<T>(static_cast<float>(v));
  });
}

inline float activate(const ops::FusedActivation* act, float v) {
  if (!act) return v;
  if (act->kind == ops::Activation::ReLU) return std::isnan(v) ? v : (v > 0.f ? v : 0.f);
  return v > 0.f ? v : v * act->negative_slope;  // LeakyReLU (the only other fusable kind)
}

inline float activation_grad(const ops::FusedActivation* act, float y, float dy) {
  if (!act) return dy;
  if (act->kind == ops::Activation::ReLU) return y > 0.f ? dy : 0.f;
  return y > 0.f ? dy : dy * act->negative_slope;
}

// y = act(round(x * a + b)) over channel c's planes.
template <class T>
void normalise_channel(const T* x, T* y, int64_t N, int64_t C, int64_t HW, int64_t c, float a, float b,
                       const ops::FusedActivation* act) {
  for (int64_t n = 0; n < N; ++n) {
    const T* xp = x + (n * C + c) * HW;
    T* yp = y + (n * C + c) * HW;
#pragma omp simd
    for (int64_t i = 0; i < HW; ++i) yp[i] = narrow<T>(activate(act, widen(narrow<T>(widen(xp[i]) * a + b))));
  }
}

}  // namespace

bool batchnorm_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                             Tensor& running_var, float momentum, float eps, Tensor& y, Tensor& save_mean,
                             Tensor& save_invstd, const ops::FusedActivation* act, const ops::BatchNormSync* sync) {
  if (sync || !nchw_of(x.dtype(), {&x, &y}) ||
      !per_channel_ok({&gamma, &beta, &running_mean, &running_var, &save_mean, &save_invstd}))
    return false;
  const int64_t N = x.dim(0), C = x.dim(1), HW = x.dim(2) * x.dim(3);
  const double M = static_cast<double>(N * HW);
  with_element_type(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xs = static_cast<const T*>(x.data());
    T* ys = static_cast<T*>(y.data());
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t c = 0; c < C; ++c) {
      double sum = 0.0;
      for (int64_t n = 0; n < N; ++n) {
        const T* xp = xs + (n * C + c) * HW;
        float part = 0.f;
#pragma omp simd reduction(+ : part)
        for (int64_t i = 0; i < HW; ++i) part += widen(xp[i]);
        sum += part;
      }
      const double mu = sum / M;
      const float muf = static_cast<float>(mu);
      double m2 = 0.0;
      for (int64_t n = 0; n < N; ++n) {
        const T* xp = xs + (n * C + c) * HW;
        float part = 0.f;
#pragma omp simd reduction(+ : part)
        for (int64_t i = 0; i < HW; ++i) {
          const float d = widen(xp[i]) - muf;
          part += d * d;
        }
        m2 += part;
      }
      const double var = m2 / M;
      const double invstd = 1.0 / std::sqrt(var + static_cast<double>(eps));
      const double g = param(gamma, c), b = param(beta, c);
      normalise_channel(xs, ys, N, C, HW, c, static_cast<float>(invstd * g), static_cast<float>(b - mu * invstd * g),
                        act);
      set_param(save_mean, c, mu);
      set_param(save_invstd, c, invstd);
      // A non-finite batch (overflowed activations) must not poison the running statistics.
      if (std::isfinite(mu) && std::isfinite(var)) {
        const double m = momentum;
        set_param(running_mean, c, (1.0 - m) * param(running_mean, c) + m * mu);
        set_param(running_var, c, (1.0 - m) * param(running_var, c) + m * var * M / (M - 1));
      }
    }
  });
  return true;
}

bool batchnorm_forward_eval(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                            const Tensor& running_var, float eps, Tensor& y, const ops::FusedActivation* act) {
  if (!nchw_of(x.dtype(), {&x, &y}) || !per_channel_ok({&gamma, &beta, &running_mean, &running_var})) return false;
  const int64_t N = x.dim(0), C = x.dim(1), HW = x.dim(2) * x.dim(3);
  with_element_type(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xs = static_cast<const T*>(x.data());
    T* ys = static_cast<T*>(y.data());
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < C; ++c) {
      const double invstd = 1.0 / std::sqrt(static_cast<double>(param(running_var, c)) + static_cast<double>(eps));
      const double g = param(gamma, c), mean = param(running_mean, c);
      normalise_channel(xs, ys, N, C, HW, c, static_cast<float>(invstd * g),
                        static_cast<float>(param(beta, c) - mean * invstd * g), act);
    }
  });
  return true;
}

bool batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,
                        const Tensor& save_invstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                        const ops::FusedActivation* act, const Tensor* y_act, const Tensor* /*beta*/,
                        const ops::BatchNormSync* sync, const ops::Fp8RoundTrip* round_dx) {
  if (sync || !nchw_of(x.dtype(), {&x, &dy, &dx}) || (act && !(y_act && nchw_of(x.dtype(), {y_act}))) ||
      !per_channel_ok({&gamma, &save_mean, &save_invstd, &dgamma, &dbeta}))
    return false;
  const int64_t N = x.dim(0), C = x.dim(1), HW = x.dim(2) * x.dim(3);
  const double M = static_cast<double>(N * HW);
  with_element_type(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xs = static_cast<const T*>(x.data());
    const T* gs = static_cast<const T*>(dy.data());
    const T* as = act ? static_cast<const T*>(y_act->data()) : nullptr;
    T* out = static_cast<T*>(dx.data());
    // The gradient reaching BatchNorm: through the activation, rounded to the storage type.
    auto grad_at = [&](int64_t i) {
      return act ? widen(narrow<T>(activation_grad(act, widen(as[i]), widen(gs[i])))) : widen(gs[i]);
    };
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t c = 0; c < C; ++c) {
      const float mean = param(save_mean, c), invstd = param(save_invstd, c);
      double sum_dy = 0.0, sum_dy_xhat = 0.0;
      for (int64_t n = 0; n < N; ++n) {
        const int64_t base = (n * C + c) * HW;
        float part_dy = 0.f, part_dy_xhat = 0.f;
#pragma omp simd reduction(+ : part_dy, part_dy_xhat)
        for (int64_t i = base; i < base + HW; ++i) {
          const float d = grad_at(i);
          part_dy += d;
          part_dy_xhat += d * ((widen(xs[i]) - mean) * invstd);
        }
        sum_dy += part_dy;
        sum_dy_xhat += part_dy_xhat;
      }
      set_param(dbeta, c, sum_dy);
      set_param(dgamma, c, sum_dy_xhat);
      // dx = k * (M * dy - sum_dy - xhat * sum_dy_xhat); each dx element is written after the
      // dy element at the same place is read, so dx may alias dy.
      const float k = static_cast<float>(static_cast<double>(param(gamma, c)) * invstd / M);
      const float m = static_cast<float>(M), s1 = static_cast<float>(sum_dy), s2 = static_cast<float>(sum_dy_xhat);
      for (int64_t n = 0; n < N; ++n) {
        const int64_t base = (n * C + c) * HW;
#pragma omp simd
        for (int64_t i = base; i < base + HW; ++i)
          out[i] = narrow<T>(k * (m * grad_at(i) - s1 - (widen(xs[i]) - mean) * invstd * s2));
      }
    }
  });
  if (round_dx) cpu::fp8_round_trip_in_place(*round_dx, dx);
  return true;
}

}  // namespace ge::onednn
