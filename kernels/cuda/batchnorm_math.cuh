// BatchNorm's per-element and per-channel arithmetic on the GPU, shared by the three-launch
// passes (batchnorm.cu: reduction, merge, element-wise pass) and the one-launch passes over small
// layers (batchnorm_cluster.cu): both round every operation the same way, so they differ only in
// the order their sums are taken.
#pragma once
#include "core/fast_divmod.h"
#include "cuda/activation_math.cuh"
#include "cuda/cuda_util.cuh"
#include "cuda/vector_pack.cuh"
#include "ganengine/ops.h"

namespace ge {
namespace gpu {
namespace bn {

// ---- accumulators for the channel reduction

// Welford's running mean and M2: stable even when the mean is large next to the spread.
struct MeanVarAcc {
  float n, mean, m2;
  static constexpr int kFields = 3;
  __device__ static MeanVarAcc zero() { return {0.f, 0.f, 0.f}; }
  __device__ void add(float x) { add(x, n + 1.f, 1.f / (n + 1.f)); }
  // Welford's update with the new count and its reciprocal given: accumulators that see the
  // same rows share one division (a division per element holds the statistics pass well below
  // memory bandwidth: docs/performance.md).
  __device__ void add(float x, float new_n, float inv_new_n) {
    n = new_n;
    const float delta = x - mean;
    mean += delta * inv_new_n;
    m2 += delta * (x - mean);
  }
  // Chan et al.'s pairwise combination.
  __device__ void merge(const MeanVarAcc& o) {
    if (o.n == 0.f) return;
    if (n == 0.f) {
      *this = o;
      return;
    }
    const float total = n + o.n;
    const float delta = o.mean - mean;
    const float o_share = o.n / total;
    mean += delta * o_share;
    m2 += o.m2 + delta * delta * n * o_share;
    n = total;
  }
  // merge() for accumulators that have all seen the same rows (one thread's pack of channels):
  // the same operations, with o.n / total taken once.
  template <int V>
  __device__ static void merge_pack(MeanVarAcc (&a)[V], const MeanVarAcc (&o)[V]) {
    if (o[0].n == 0.f) return;
    if (a[0].n == 0.f) {
#pragma unroll
      for (int j = 0; j < V; ++j) a[j] = o[j];
      return;
    }
    const float total = a[0].n + o[0].n;
    const float o_share = o[0].n / total;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float delta = o[j].mean - a[j].mean;
      a[j].mean += delta * o_share;
      a[j].m2 += o[j].m2 + delta * delta * a[j].n * o_share;
      a[j].n = total;
    }
  }
  __device__ float get(int k) const { return k == 0 ? n : (k == 1 ? mean : m2); }
  __device__ void set(int k, float v) { (k == 0 ? n : (k == 1 ? mean : m2)) = v; }
};

struct GradSumsAcc {
  float sum_dy, sum_dy_xmu;
  static constexpr int kFields = 2;
  __device__ static GradSumsAcc zero() { return {0.f, 0.f}; }
  __device__ void merge(const GradSumsAcc& o) {
    sum_dy += o.sum_dy;
    sum_dy_xmu += o.sum_dy_xmu;
  }
  template <int V>
  __device__ static void merge_pack(GradSumsAcc (&a)[V], const GradSumsAcc (&o)[V]) {
#pragma unroll
    for (int j = 0; j < V; ++j) a[j].merge(o[j]);
  }
  __device__ float get(int k) const { return k == 0 ? sum_dy : sum_dy_xmu; }
  __device__ void set(int k, float v) { (k == 0 ? sum_dy : sum_dy_xmu) = v; }
};

// The training forward's normalise and shift, each operation rounded as written: the backward
// recomputes the fused activation's output with it, so it must be bitwise what the forward wrote
// (no contraction left to the compiler's choice in either place).
__device__ __forceinline__ float bn_affine(float x, float mean, float invstd, float gamma, float beta) {
  return __fmaf_rn(__fmul_rn(__fsub_rn(x, mean), invstd), gamma, beta);
}

// The gradient reaching BatchNorm's output: dy itself, or the fused activation's gradient,
// rounded as the unfused activation layer would store it. The activation's output y is read back
// or, with kRecompute, formed again from x and the channel's mean, invstd, gamma and beta exactly
// as the forward formed it: one activation-sized read less. The gradient sums recompute it; the
// dx pass, where recomputing costs more than the read, reads it or tests x against a threshold
// (below): docs/performance.md. Each thread loads its channels' values once (per element they
// would cost more than the read saves), and the activation's output is only tested for its sign
// (rounds_positive). kRecompute is a template argument: the values it needs cost registers where
// they are not used.
struct ActivationGrad {
  bool fused = false;
  bool recompute = false;  // the kernels' kRecompute
  ops::Activation kind = ops::Activation::ReLU;
  float slope = 0.f;
};

// One channel's values for bn_affine.
struct ChannelAffine {
  float mean, invstd, gamma, beta;
};

// Whether a normalised value z rounds to a positive T: all that ReLU's and LeakyReLU's (slope >= 0)
// gradients ask of their output, which is positive exactly then. For half, exactly when z exceeds
// 2^-25 (half the smallest subnormal; the tie rounds to even, zero): one compare. Rounding to
// half and back for the output and the activation on it, as the forward does, would make the
// recomputing passes slower than reading the output.
template <class T>
__device__ __forceinline__ bool rounds_positive(float z) {
  return round_to<T>(z) > 0.f;
}
template <>
__device__ __forceinline__ bool rounds_positive<__half>(float z) {
  return z > 0x1p-25f;
}

template <class T, bool kRecompute = false>
__device__ __forceinline__ float bn_output_grad(const ActivationGrad& a, float x, float y, float dy,
                                                const ChannelAffine& c) {
  if (!a.fused) return dy;
  // activate_grad's ReLU and LeakyReLU, with y > 0 as recomputed (the host recomputes for these,
  // with slope >= 0, only).
  if (kRecompute)
    return round_to<T>(rounds_positive<T>(bn_affine(x, c.mean, c.invstd, c.gamma, c.beta))
                           ? dy
                           : (a.kind == ops::Activation::ReLU ? 0.f : dy * a.slope));
  return round_to<T>(activate_grad(a.kind, y, dy, a.slope));
}

// ---- the dx pass's activation test without the activation's output
//
// For one channel, bn_affine is monotonic in x: each rounded operation is, increasing or
// decreasing with gamma's sign (invstd > 0). So rounds_positive holds for the values of T on one
// side of a boundary, which a bisection over T's values in order finds once per channel (the
// coefficient pass, FinishGrads); the dx pass then tests the activation with one compare instead
// of reading its output (a quarter of that pass's bytes). Where gamma is 0 the test is constant
// over finite x and an infinite x breaks the order, but an infinite x makes every dx of its
// channel NaN through the coefficients whatever the test says.

// T's values in increasing order: index 0 is -inf, kInf is -0, kInf + 1 is +0, 2 kInf + 1 is +inf.
template <class T>
struct Ordered16;
template <>
struct Ordered16<__half> {
  static constexpr uint32_t kInf = 0x7C00;
  __device__ static float value(uint32_t bits) { return __half2float(__ushort_as_half(static_cast<uint16_t>(bits))); }
};
template <>
struct Ordered16<__nv_bfloat16> {
  static constexpr uint32_t kInf = 0x7F80;
  __device__ static float value(uint32_t bits) { return __uint_as_float(bits << 16); }
};
template <class T>
__device__ __forceinline__ float ordered_value(uint32_t i) {
  constexpr uint32_t kInf = Ordered16<T>::kInf;
  return Ordered16<T>::value(i <= kInf ? (0x8000u | (kInf - i)) : i - (kInf + 1));
}

// x with its sign flipped when k0 (gamma * invstd, FinishGrads) has its sign bit set.
__device__ __forceinline__ float flip_by(float x, float k0) {
  return __int_as_float(__float_as_int(x) ^ (__float_as_int(k0) & static_cast<int>(0x80000000u)));
}

// t such that, for every value x of T, rounds_positive<T>(bn_affine(x, ...)) == (flip_by(x, k0) >= t);
// NaN when no value passes (NaN x never passes either way).
template <class T>
__device__ float activation_threshold(float mean, float invstd, float gamma, float beta, float k0) {
  const bool decreasing = signbit(k0);
  constexpr uint32_t kCount = 2 * (Ordered16<T>::kInf + 1);
  // Over increasing x, the test goes false -> true (or true -> false when decreasing); find the
  // first index of the second part.
  uint32_t lo = 0, hi = kCount;
  while (lo < hi) {
    const uint32_t mid = (lo + hi) / 2;
    if (rounds_positive<T>(bn_affine(ordered_value<T>(mid), mean, invstd, gamma, beta)) != decreasing)
      hi = mid;
    else
      lo = mid + 1;
  }
  if (!decreasing) return lo == kCount ? __int_as_float(0x7fffffff) : ordered_value<T>(lo);
  return lo == 0 ? __int_as_float(0x7fffffff) : -ordered_value<T>(lo - 1);  // x <= v, as -x >= -v
}

// bn_output_grad<T, true> with the test as a threshold: the same value.
template <class T>
__device__ __forceinline__ float bn_threshold_grad(const ActivationGrad& a, float x, float dy, float k0, float t) {
  return round_to<T>(flip_by(x, k0) >= t ? dy : (a.kind == ops::Activation::ReLU ? 0.f : dy * a.slope));
}

template <class T>
struct StatsVisit {
  static constexpr int kPack = kWidePack<T>;
  // Four rows loaded before any is added, and in the vector kernel the next four loaded before
  // these are added (accumulate_rows_prefetched): faster than either no prefetch or eight rows at
  // a time, which needs far more registers and so leaves room for fewer blocks beside the other
  // lanes' kernels (docs/performance.md).
  static constexpr int kUnroll = 4;
  using Loaded = Pack<T, kPack>;
  struct Channels {};
  const T* x;
  __device__ void operator()(MeanVarAcc& acc, uint64_t i, uint32_t) const { acc.add(load_float(x + i)); }
  __device__ Channels channels(uint32_t) const { return {}; }
  __device__ Loaded load(uint64_t i) const { return *reinterpret_cast<const Loaded*>(x + i); }
  __device__ void add(MeanVarAcc (&acc)[kPack], const Loaded& v, const Channels&) const {
    const float n = acc[0].n + 1.f;  // the pack's channels have all seen the same rows
    const float inv_n = 1.f / n;
#pragma unroll
    for (int j = 0; j < kPack; ++j) acc[j].add(load_float(&v.v[j]), n, inv_n);
  }
};

// Channel c's values for bn_affine (only the mean without a recomputed activation).
template <class P>
__device__ __forceinline__ ChannelAffine channel_affine(const float* mean, const float* invstd, const P* gamma,
                                                        const P* beta, uint32_t c, bool recompute) {
  ChannelAffine a{__ldg(mean + c), 0.f, 0.f, 0.f};
  if (recompute) {
    a.invstd = __ldg(invstd + c);
    a.gamma = load_float(gamma + c);
    a.beta = load_float(beta + c);
  }
  return a;
}

// Where a backward pass reads the gradient of BatchNorm's (activated) output: a tensor laid out
// as x (const T*), or OuterDy, the backward-data of D's last layer formed where it is read.
template <int V, class T>
__device__ __forceinline__ Pack<T, V> load_dy_pack(const T* dy, uint64_t i) {
  return *reinterpret_cast<const Pack<T, V>*>(dy + i);
}
template <class T>
__device__ __forceinline__ float load_dy(const T* dy, uint64_t i) {
  return load_float(dy + i);
}

// dy[n, k] = dlogits[n] * w[k] for the k-th of an image's image_elems values (NHWC, w laid out as
// one image), rounded to T: what conv_scalar.cu's backward-data of D's last layer writes, so
// BatchNorm's backward reads the same values without that layer writing them.
// (Offsets are below 2^31: BatchNorm's GPU passes take under 2^31 values.)
template <class T>
struct OuterDy {
  const T* dlogits;
  const T* w;
  FastDivmod image_elems;
};
template <int V, class T>
__device__ __forceinline__ Pack<T, V> load_dy_pack(const OuterDy<T>& dy, uint64_t i) {
  uint32_t n, k;
  dy.image_elems.divmod(static_cast<uint32_t>(i), n, k);
  const float g = load_float(dy.dlogits + n);
  const Pack<T, V> w = *reinterpret_cast<const Pack<T, V>*>(dy.w + k);
  Pack<T, V> out;
#pragma unroll
  for (int e = 0; e < V; ++e) store_float(&out.v[e], g * load_float(&w.v[e]));
  return out;
}
template <class T>
__device__ __forceinline__ float load_dy(const OuterDy<T>& dy, uint64_t i) {
  return load_float(&load_dy_pack<1>(dy, i).v[0]);
}

// Sums of the output gradient and of its product with x - mean (y: the fused activation's
// output, read when act.fused and not kRecompute; dy: a tensor, or OuterDy).
template <class T, class P, bool kRecompute, class Dy = const T*>
struct GradSumsVisit {
  static constexpr int kPack = kWidePack<T>;
  static constexpr int kUnroll = 2;  // up to three tensors a row
  struct Loaded {
    Pack<T, kPack> x, dy, y;
  };
  struct Channels {  // a thread's channels stay the same: their values are loaded once
    ChannelAffine c[kPack];
  };
  const T* x;
  Dy dy;
  const T* y;
  const float* mean;
  const float* invstd;
  const P* gamma;
  const P* beta;
  ActivationGrad act;

  __device__ bool reads_y() const { return act.fused && !kRecompute; }
  // Written out operation by operation: the fused backward (kRecompute) and the unfused one
  // (which never recomputes) are different instantiations, and the compiler's contraction of
  // g * (x - mean) + sum differed between them (bitwise different dgamma).
  __device__ static void add_grad(GradSumsAcc& acc, float g, float x, float mean) {
    acc.sum_dy = __fadd_rn(acc.sum_dy, g);
    acc.sum_dy_xmu = __fmaf_rn(g, __fsub_rn(x, mean), acc.sum_dy_xmu);
  }
  __device__ void operator()(GradSumsAcc& acc, uint64_t i, uint32_t c) const {
    const ChannelAffine ca = channel_affine(mean, invstd, gamma, beta, c, kRecompute);
    const float xv = load_float(x + i);
    const float yv = reads_y() ? load_float(y + i) : 0.f;
    const float g = bn_output_grad<T, kRecompute>(act, xv, yv, load_dy(dy, i), ca);
    add_grad(acc, g, xv, ca.mean);
  }
  __device__ Channels channels(uint32_t c0) const {
    Channels ch;
#pragma unroll
    for (int j = 0; j < kPack; ++j) ch.c[j] = channel_affine(mean, invstd, gamma, beta, c0 + j, kRecompute);
    return ch;
  }
  __device__ Loaded load(uint64_t i) const {
    using Packed = Pack<T, kPack>;
    Loaded v;
    v.x = *reinterpret_cast<const Packed*>(x + i);
    v.dy = load_dy_pack<kPack>(dy, i);
    if (reads_y()) v.y = *reinterpret_cast<const Packed*>(y + i);
    return v;
  }
  __device__ void add(GradSumsAcc (&acc)[kPack], const Loaded& v, const Channels& ch) const {
#pragma unroll
    for (int j = 0; j < kPack; ++j) {
      const float xv = load_float(&v.x.v[j]);
      const float yv = reads_y() ? load_float(&v.y.v[j]) : 0.f;
      const float g = bn_output_grad<T, kRecompute>(act, xv, yv, load_float(&v.dy.v[j]), ch.c[j]);
      add_grad(acc[j], g, xv, ch.c[j].mean);
    }
  }
};

// 1/sqrt(biased variance + eps): what the element-wise passes normalise with.
__device__ __forceinline__ float batch_invstd(const MeanVarAcc& acc, float eps) {
  return 1.f / sqrtf(acc.m2 / acc.n + eps);
}

// Saves mean/invstd and updates the running statistics.
template <class P>
struct FinishStats {
  float eps, momentum;
  float* save_mean;
  float* save_invstd;
  P* running_mean;
  P* running_var;
  __device__ void operator()(uint32_t c, const MeanVarAcc& acc) const {
    finish(c, acc, load_float(running_mean + c), load_float(running_var + c));
  }
  // With the running statistics' old values given (loaded early by the caller).
  __device__ void finish(uint32_t c, const MeanVarAcc& acc, float old_mean, float old_var) const {
    const float var = acc.m2 / acc.n;
    save_mean[c] = acc.mean;
    save_invstd[c] = batch_invstd(acc, eps);
    const float unbiased_var = acc.n > 1.f ? acc.m2 / (acc.n - 1.f) : var;
    // A non-finite batch (an overflowed half step) must not poison the running statistics.
    if (isfinite(acc.mean) && isfinite(unbiased_var)) {
      store_float(running_mean + c, momentum * acc.mean + (1.f - momentum) * old_mean);
      store_float(running_var + c, momentum * unbiased_var + (1.f - momentum) * old_var);
    }
  }
};

// dx's three per-channel coefficients (bn_dx).
struct DxCoef {
  float k0, k1, k2;
};
__device__ __forceinline__ DxCoef dx_coef(const GradSumsAcc& sums, float gamma, float invstd, float count) {
  const float inv_m = 1.f / count;
  return {gamma * invstd, sums.sum_dy * inv_m, invstd * invstd * sums.sum_dy_xmu * inv_m};
}

// Backward: dbeta, dgamma, and the three per-channel coefficients of dx.
// coef layout: [0] gamma*invstd, [1] mean of dy, [2] invstd^2 * mean of dy*(x - mean); the
// thresholds, where asked for, go to `threshold` (batchnorm.cu puts them at coef + 3C).
template <class P>
struct FinishGrads {
  uint32_t C, M;
  const P* gamma;
  const float* save_invstd;
  P* dgamma;
  P* dbeta;
  float* coef;
  // With `threshold`: each channel's activation_threshold for 16-bit activations (bf16 or half).
  const float* save_mean = nullptr;
  const P* beta = nullptr;
  float* threshold = nullptr;
  bool bf16 = false;
  // dbeta and dgamma only.
  __device__ void params(uint32_t c, const GradSumsAcc& sums) const {
    store_float(dbeta + c, sums.sum_dy);
    store_float(dgamma + c, sums.sum_dy_xmu * save_invstd[c]);
  }
  // The channel's activation threshold (0 without `threshold`). It needs only the forward's
  // statistics and the parameters, so the finish kernels call it before they wait for the
  // reduction (channel_reduce.cuh): the bisection's latency hides behind it.
  using Prepared = float;
  __device__ float prepare(uint32_t c) const {
    if (!threshold) return 0.f;
    const float invstd = save_invstd[c], ga = load_float(gamma + c), be = load_float(beta + c);
    const float k0 = ga * invstd;  // dx_coef's k0: its sign bit picks the direction
    return bf16 ? activation_threshold<__nv_bfloat16>(save_mean[c], invstd, ga, be, k0)
                : activation_threshold<__half>(save_mean[c], invstd, ga, be, k0);
  }
  __device__ void operator()(uint32_t c, const GradSumsAcc& sums, float prepared) const {
    const float invstd = save_invstd[c];
    params(c, sums);
    const DxCoef k = dx_coef(sums, load_float(gamma + c), invstd, static_cast<float>(M));
    coef[c] = k.k0;
    coef[C + c] = k.k1;
    coef[2 * C + c] = k.k2;
    if (threshold) threshold[c] = prepared;
  }
};

// dx = k0 * (g - k1 - (x - mean) * k2), g the gradient at BatchNorm's output.
__device__ __forceinline__ float bn_dx(float k0, float k1, float k2, float g, float x, float mean) {
  const float xmu = x - mean;
  return k0 * (g - k1 - xmu * k2);
}

}  // namespace bn
}  // namespace gpu
}  // namespace ge
