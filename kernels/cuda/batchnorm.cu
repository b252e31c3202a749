// BatchNorm2d on the GPU with our own kernels (not cuDNN's), for NCHW and NHWC activations in
// f32/f16/bf16 with f32 or half parameters. All statistics are accumulated in fp32 through the
// deterministic per-channel reduction of channel_reduce.cuh.
//
// Training forward:  Welford (count, mean, M2) partials -> per channel mean, biased variance
//   (normalises), invstd = 1/sqrt(var + eps) (saved, f32), running stats updated with the
//   unbiased variance unless the batch statistics are not finite -> y = (x - mean)*invstd*gamma + beta.
// Eval forward:      the same normalisation with the running statistics.
// Backward:          sums of dy and dy*(x - mean) per channel -> dbeta, dgamma, and
//   dx = gamma*invstd * (dy - dbeta/M - (x - mean)*invstd^2 * sum(dy*(x-mean))/M),
//   which is gamma*invstd/M * (M*dy - dbeta - xhat*dgamma) with M = N*H*W.
//
// A fused activation (ReLU / LeakyReLU after the BatchNorm, ops::FusedActivation) is applied to
// the normalised value after rounding it to the activation dtype, and its gradient is rounded
// before BatchNorm's backward uses it: bitwise what the two unfused kernels produce, in one pass.
// The backward's gradient sums recompute the activation's output from x instead of reading it.
//
// Training passes over small NHWC layers run in one launch instead (batchnorm_cluster.h); the
// passes here serve the rest, --sync-bn and eval.
//
// D's last BatchNorm, in three launches, also does D's last layer's work (ops.h,
// batchnorm_activation_forward_train_dot and batchnorm_activation_backward_outer): its normalise
// forms each image's dot product with that layer's filter (normalize_dot_kernel), and its
// backward forms that layer's backward-data where it reads dy (OuterDy, batchnorm_math.cuh).
#include <type_traits>

#include "core/backend.h"
#include "cuda/aligned.h"
#include "cuda/batchnorm_cluster.h"
#include "cuda/batchnorm_math.cuh"
#include "cuda/channel_reduce.cuh"
#include "cuda/cuda_util.cuh"
#include "cuda/fp8_round_trip.cuh"
#include "cuda/image_dot.cuh"
#include "cuda/kernel_launch.cuh"
#include "cuda/vector_pack.cuh"

namespace ge {
namespace gpu {
namespace {

using namespace bn;

// Blocks of an element-wise pass over `packs` packs: no more than are resident at once, each
// thread then taking several packs with its channels' values loaded once (fixed_channels). With
// more blocks (grid_for's up to 4096) a layer of a few million values runs as several waves whose
// threads each load the four per-channel values for one or two packs, which is slower
// (docs/performance.md).
template <class Kernel>
unsigned elementwise_blocks(Kernel kernel, int64_t packs, int device) {
  return std::min(grid_for(packs), static_cast<unsigned>(resident_blocks(kernel, kThreads, 0, device)));
}

// The element-wise passes (normalise, dx) walk the tensor from its end: what the pass before
// them wrote or read last, still in L2, is read first (G's fourth layer writes its images in
// order; the reductions end each of their ranges). The values are the same in any order.

// ---- what happens to each channel's totals (channel_reduce.cuh's Finish functors), and the
// per-channel kernels of --sync-bn (one thread per channel)

// ---- --sync-bn (ops::BatchNormSync): the same statistics over every replica, in three steps
// around two all-reduces of per-channel sums.

// This replica's count, mean and M2 (kept in `local`), and the first sums: count, count*mean.
struct FinishSyncStatsLocal {
  uint32_t C;
  float* local;
  float* first;
  __device__ void operator()(uint32_t c, const MeanVarAcc& acc) const {
    local[c] = acc.n;
    local[C + c] = acc.mean;
    local[2 * C + c] = acc.m2;
    first[c] = acc.n;
    first[C + c] = acc.n * acc.mean;
  }
};

// The global mean; this replica's M2 moved to it (Chan et al.), the second sums.
__global__ void sync_stats_moved_kernel(const float* first, uint32_t C, float* local, float* second) {
  const uint32_t c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const float mean = first[C + c] / first[c];
  const float d = local[C + c] - mean;
  second[c] = local[2 * C + c] + local[c] * d * d;
  local[C + c] = mean;
}

template <class P>
__global__ void sync_stats_finish_kernel(const float* first, const float* second, const float* local, uint32_t C,
                                         float eps, float momentum, float* save_mean, float* save_invstd,
                                         P* running_mean, P* running_var, float* total_count) {
  const uint32_t c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const float n = first[c];
  if (c == 0) total_count[0] = n;
  // The global count, mean and M2: what FinishStats makes of a single replica's.
  FinishStats<P>{eps, momentum, save_mean, save_invstd, running_mean, running_var}(c, {n, local[C + c], second[c]});
}

// Backward: this replica's dgamma and dbeta (as PyTorch's SyncBatchNorm), and its sums of dy
// and dy*(x - mean) for the all-reduce.
template <class P>
struct FinishSyncGradsLocal {
  uint32_t C;
  const float* save_invstd;
  P* dgamma;
  P* dbeta;
  float* sums;
  __device__ void operator()(uint32_t c, const GradSumsAcc& acc) const {
    store_float(dbeta + c, acc.sum_dy);
    store_float(dgamma + c, acc.sum_dy_xmu * save_invstd[c]);
    sums[c] = acc.sum_dy;
    sums[C + c] = acc.sum_dy_xmu;
  }
};

// dx's coefficients (FinishGrads's layout) from the sums over all replicas.
template <class P>
__global__ void sync_grads_coef_kernel(const float* sums, uint32_t C, const float* total_count, const P* gamma,
                                       const float* save_invstd, float* coef) {
  const uint32_t c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const DxCoef k = dx_coef({sums[c], sums[C + c]}, load_float(gamma + c), save_invstd[c], total_count[0]);
  coef[c] = k.k0;
  coef[C + c] = k.k1;
  coef[2 * C + c] = k.k2;
}

// Eval: mean and invstd from the running statistics, in the layout the normalise kernel reads.
template <class P>
__global__ void running_stats_kernel(const P* running_mean, const P* running_var, uint32_t C, float eps, float* mean,
                                     float* invstd) {
  const uint32_t c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  mean[c] = load_float(running_mean + c);
  invstd[c] = 1.f / sqrtf(load_float(running_var + c) + eps);
}

// ---- element-wise kernels over the whole activation, V elements per thread. With V > 1 the
// launcher has checked that a pack never straddles channels in NCHW (H*W % V == 0) and holds
// consecutive channels in NHWC (C % V == 0).

// The per-channel values of a pack's V elements: V neighbouring channels in NHWC (one vector
// load when `vector_loads`, the host having checked alignment), one channel for all in NCHW.
template <int V, class P>
__device__ __forceinline__ void channel_values(const P* p, uint32_t c0, bool nhwc, bool vector_loads, float (&out)[V]) {
  if (!nhwc) {
    const float v = load_float(p + c0);
#pragma unroll
    for (int j = 0; j < V; ++j) out[j] = v;
  } else if (vector_loads && V > 1) {
    const Pack<P, V> v = *reinterpret_cast<const Pack<P, V>*>(p + c0);
#pragma unroll
    for (int j = 0; j < V; ++j) out[j] = load_float(&v.v[j]);
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j) out[j] = load_float(p + c0 + j);
  }
}

// fixed_channels: the grid's stride is a whole number of pixels (NHWC), so every pack a thread
// visits holds the same channels and their values are read once. Read per pack, they would be
// several times the activation's own bytes in L1 traffic, and L1, not memory, would bound the pass.
// round.scale set: y rounded to FP8 and back as it is written (ops::Fp8RoundTrip), its amax
// folded into round.amax, or only its codes written (round.codes_only).
template <class T, class P, int V>
__global__ void normalize_kernel(const T* x, T* y, const float* mean, const float* invstd, const P* gamma,
                                 const P* beta, ChannelGeometry g, uint32_t packs, bool vector_loads,
                                 bool fixed_channels, bool fused, ops::Activation act, float slope,
                                 Fp8RoundTripArgs round) {
  await_previous_kernel();
  const float2 round_scales = fp8_round_trip_scales(round);
  uint32_t amax_key = 0;
  float m[V], s[V], ga[V], be[V];
  auto load_channels = [&](uint32_t c0) {
    channel_values<V>(mean, c0, g.nhwc, vector_loads, m);
    channel_values<V>(invstd, c0, g.nhwc, vector_loads, s);
    channel_values<V>(gamma, c0, g.nhwc, vector_loads, ga);
    channel_values<V>(beta, c0, g.nhwc, vector_loads, be);
  };
  const uint32_t first = blockIdx.x * blockDim.x + threadIdx.x;
  auto pack_at = [&](uint32_t i) { return packs - 1 - i; };  // from the end, where L2 still holds the last writes
  if (fixed_channels && first < packs) load_channels(channel_of(pack_at(first) * V, g));
  for (uint32_t i = first; i < packs; i += gridDim.x * blockDim.x) {
    const uint32_t p = pack_at(i);
    if (!fixed_channels) load_channels(channel_of(p * V, g));
    const Pack<T, V> in = reinterpret_cast<const Pack<T, V>*>(x)[p];
    Pack<T, V> out;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      float v = bn_affine(load_float(&in.v[j]), m[j], s[j], ga[j], be[j]);
      if (fused) v = activate(act, round_to<T>(v), slope);
      store_float(&out.v[j], v);
    }
    fp8_store_written(out, y, round, round_scales, uint64_t{p} * V, amax_key);
  }
  if (round.amax) fold_amax_key(amax_key, round.amax);
}

// normalize_kernel with an activation, one block of kThreads per image (image_packs packs of V
// values, NHWC), which also forms the image's dot product with w (laid out as one image) from the
// values as y stores them, in image_dot.cuh's order: the dot products conv_scalar.cu's forward
// would read y back for. fixed_channels: kThreads * V is a whole number of pixels.
template <class T, class P, int V>
__global__ void __launch_bounds__(kThreads)
    normalize_dot_kernel(const T* x, T* y, const float* mean, const float* invstd, const P* gamma, const P* beta,
                         const T* w, T* dots, uint32_t C, uint32_t image_packs, bool vector_loads, bool fixed_channels,
                         ops::Activation act, float slope) {
  await_previous_kernel();
  float m[V], s[V], ga[V], be[V];
  auto load_channels = [&](uint32_t c0) {
    channel_values<V>(mean, c0, true, vector_loads, m);
    channel_values<V>(invstd, c0, true, vector_loads, s);
    channel_values<V>(gamma, c0, true, vector_loads, ga);
    channel_values<V>(beta, c0, true, vector_loads, be);
  };
  using Packed = Pack<T, V>;
  const Packed* xn = reinterpret_cast<const Packed*>(x) + size_t{blockIdx.x} * image_packs;
  Packed* yn = reinterpret_cast<Packed*>(y) + size_t{blockIdx.x} * image_packs;
  const Packed* wp = reinterpret_cast<const Packed*>(w);
  if (fixed_channels) load_channels(threadIdx.x * V % C);
  float acc = 0.f;
#pragma unroll 4
  for (uint32_t i = threadIdx.x; i < image_packs; i += kThreads) {
    if (!fixed_channels) load_channels(i * V % C);
    const Packed in = xn[i];
    Packed out;
#pragma unroll
    for (int j = 0; j < V; ++j)
      store_float(&out.v[j],
                  activate(act, round_to<T>(bn_affine(load_float(&in.v[j]), m[j], s[j], ga[j], be[j])), slope));
    yn[i] = out;
    acc = dot_pack(out, wp[i], acc);
  }
  acc = block_sum<kThreads>(acc);
  if (threadIdx.x == 0) store_float(&dots[blockIdx.x], acc);
}

// fixed_channels: as normalize_kernel's. The fused activation's output is read back
// (bn_output_grad) or, with kThreshold, tested on x against coef's fourth vector
// (bn_threshold_grad; batchnorm_math.cuh says why that is the same). round.scale set: dx rounded
// to FP8 and back as it is written (ops::Fp8RoundTrip), its amax folded into round.amax, or only
// its codes written (round.codes_only).
template <class T, int V, bool kThreshold, class Dy = const T*>
__global__ void batchnorm_dx_kernel(const T* x, Dy dy, const T* y, T* dx, const float* mean, const float* coef,
                                    ChannelGeometry g, uint32_t packs, bool vector_loads, bool fixed_channels,
                                    ActivationGrad act, Fp8RoundTripArgs round) {
  await_previous_kernel();
  const float2 round_scales = fp8_round_trip_scales(round);
  uint32_t amax_key = 0;
  float m[V], k0[V], k1[V], k2[V], t[kThreshold ? V : 1];
  auto load_channels = [&](uint32_t c0) {
    channel_values<V>(mean, c0, g.nhwc, vector_loads, m);
    channel_values<V>(coef, c0, g.nhwc, vector_loads, k0);
    channel_values<V>(coef + g.C, c0, g.nhwc, vector_loads, k1);
    channel_values<V>(coef + 2 * g.C, c0, g.nhwc, vector_loads, k2);
    if constexpr (kThreshold) channel_values<V>(coef + 3 * g.C, c0, g.nhwc, vector_loads, t);
  };
  const uint32_t first = blockIdx.x * blockDim.x + threadIdx.x;
  auto pack_at = [&](uint32_t i) { return packs - 1 - i; };  // from the end, where L2 still holds the last writes
  if (fixed_channels && first < packs) load_channels(channel_of(pack_at(first) * V, g));
  for (uint32_t i = first; i < packs; i += gridDim.x * blockDim.x) {
    const uint32_t p = pack_at(i);
    if (!fixed_channels) load_channels(channel_of(p * V, g));
    const Pack<T, V> xv = reinterpret_cast<const Pack<T, V>*>(x)[p];
    const Pack<T, V> gv = load_dy_pack<V>(dy, uint64_t{p} * V);
    Pack<T, V> yv;
    if (act.fused && !kThreshold) yv = reinterpret_cast<const Pack<T, V>*>(y)[p];
    Pack<T, V> out;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float xf = load_float(&xv.v[j]);
      float grad;
      if constexpr (kThreshold)
        grad = bn_threshold_grad<T>(act, xf, load_float(&gv.v[j]), k0[j], t[j]);
      else
        grad = bn_output_grad<T>(act, xf, act.fused ? load_float(&yv.v[j]) : 0.f, load_float(&gv.v[j]),
                                 {m[j], 0.f, 0.f, 0.f});
      store_float(&out.v[j], bn_dx(k0[j], k1[j], k2[j], grad, xf, m[j]));
    }
    fp8_store_written(out, dx, round, round_scales, uint64_t{p} * V, amax_key);
  }
  if (round.amax) fold_amax_key(amax_key, round.amax);
}

// Vector loads of per-channel values need every channel vector aligned to a whole pack.
template <int V, class P>
bool packs_aligned(std::initializer_list<const void*> ptrs) {
  for (const void* p : ptrs)
    if (!aligned_to(p, V * sizeof(P))) return false;
  return true;
}

// Whether a grid-stride loop of `blocks` x kThreads threads over packs of V elements visits the
// same channels in every pack of a thread (normalize_kernel).
bool channels_fixed_per_thread(const ChannelGeometry& g, unsigned blocks, int V) {
  return g.nhwc && (uint64_t{blocks} * kThreads * V) % g.C == 0;
}

// Elements per thread for a tensor of this geometry: packs must not mix channels across NCHW
// planes (H*W % V) and must hold whole channel runs in NHWC (C % V).
template <class T>
int bn_pack_width(const ChannelGeometry& g, uint32_t n, std::initializer_list<const void*> ptrs) {
  return pack_width<T>(n, g.nhwc ? g.C : g.HW, ptrs);
}

// ---- argument checks

void check_activation_pair(const Tensor& a, const Tensor& b, const char* what) {
  check_gpu_float(a, what);
  GE_CHECK(a.shape() == b.shape() && a.dtype() == b.dtype() && a.format() == b.format() && a.device() == b.device(),
           "batchnorm: ", what, " tensors must share shape, dtype, format and device: ", a.str(), " vs ", b.str());
}

void check_channel_vector(const Tensor& t, int64_t C, DType dtype, const Tensor& x, const char* what) {
  GE_CHECK(t.defined() && t.device() == x.device() && t.numel() == C && t.dtype() == dtype, "batchnorm: ", what,
           " must be ", dtype_name(dtype), " (", C, ") on ", x.device().str(), ", is ",
           t.defined() ? t.str() : std::string("undefined"));
}

void check_params(const Tensor& x, const Tensor& gamma, const std::vector<const Tensor*>& same_as_gamma) {
  const DType p = gamma.dtype();
  GE_CHECK(p == DType::F32 || p == x.dtype(), "batchnorm: parameters must be f32 or ", dtype_name(x.dtype()), ", are ",
           gamma.str());
  check_channel_vector(gamma, x.dim(1), p, x, "gamma");
  for (const Tensor* t : same_as_gamma) check_channel_vector(*t, x.dim(1), p, x, "parameter/statistic");
}

constexpr int kPerChannelThreads = 128;

void check_sync(const ops::BatchNormSync& sync, const Tensor& x) {
  GE_CHECK(sync.all_reduce_sum && sync.total_count.defined() && sync.total_count.device() == x.device() &&
               sync.total_count.dtype() == DType::F32 && sync.total_count.numel() == 1,
           "batchnorm --sync-bn: needs an all-reduce and an f32 (1) total count on ", x.device().str());
}

template <class T, class P>
void launch_normalize(const Tensor& x, Tensor& y, const float* mean, const float* invstd, const Tensor& gamma,
                      const Tensor& beta, const ChannelGeometry& g, const ops::FusedActivation* act,
                      cudaStream_t stream, const Fp8RoundTripArgs& round = {}) {
  const uint32_t n = static_cast<uint32_t>(x.numel());
  const bool fused = act != nullptr;
  const ops::Activation kind = fused ? act->kind : ops::Activation::ReLU;
  const float slope = fused ? act->negative_slope : 0.f;
  constexpr int W = kWidePack<T>;
  const bool vector_loads = packs_aligned<W, float>({mean, invstd}) && packs_aligned<W, P>({gamma.data(), beta.data()});
  if (bn_pack_width<T>(g, n, {x.data(), y.data()}) == W) {
    const unsigned blocks = elementwise_blocks(normalize_kernel<T, P, W>, n / W, x.device().index);
    launch_kernel(normalize_kernel<T, P, W>, blocks, kThreads, 0, stream, x.data_as<T>(), y.data_as<T>(), mean, invstd,
                  gamma.data_as<P>(), beta.data_as<P>(), g, n / W, vector_loads,
                  channels_fixed_per_thread(g, blocks, W), fused, kind, slope, round);
  } else {
    const unsigned blocks = grid_for(n);
    launch_kernel(normalize_kernel<T, P, 1>, blocks, kThreads, 0, stream, x.data_as<T>(), y.data_as<T>(), mean, invstd,
                  gamma.data_as<P>(), beta.data_as<P>(), g, n, false, channels_fixed_per_thread(g, blocks, 1), fused,
                  kind, slope, round);
  }
  CUDA_CHECK_LAUNCH();
}

// The dot products a training forward forms beside y (ops::batchnorm_activation_forward_train_dot):
// w (1, C, H, W) laid out as one of x's images, dots (N, 1, 1, 1) in x's dtype.
struct ImageDot {
  const Tensor* w;
  Tensor* dots;
};

// normalize_dot_kernel over x's images (an activation, NHWC, whole packs, 16-byte aligned x, y
// and w: batchnorm_forward_train_dot has checked).
template <class T, class P>
void launch_normalize_dot(const Tensor& x, Tensor& y, const float* mean, const float* invstd, const Tensor& gamma,
                          const Tensor& beta, const ChannelGeometry& g, const ops::FusedActivation& act,
                          const ImageDot& dot, cudaStream_t stream) {
  constexpr int V = kWidePack<T>;
  const uint32_t image_packs = g.HW * g.C / V;
  const bool vector_loads = packs_aligned<V, float>({mean, invstd}) && packs_aligned<V, P>({gamma.data(), beta.data()});
  launch_kernel(normalize_dot_kernel<T, P, V>, static_cast<unsigned>(x.dim(0)), kThreads, 0, stream, x.data_as<T>(),
                y.data_as<T>(), mean, invstd, gamma.data_as<P>(), beta.data_as<P>(), dot.w->data_as<T>(),
                dot.dots->data_as<T>(), g.C, image_packs, vector_loads, (kThreads * V) % g.C == 0, act.kind,
                act.negative_slope);
  CUDA_CHECK_LAUNCH();
}

// How the backward takes a fused activation's gradient: recomputing its output from x where
// bn_output_grad's recomputation holds, ReLU and LeakyReLU with slope >= 0 (a negative slope makes
// negative inputs' outputs positive), and pays, on 16-bit activations, whose passes are
// memory-bound. beta: the forward's (nullptr: read the output).
bool recomputes_activation(const Tensor& x, const ops::FusedActivation& act) {
  return (x.dtype() == DType::F16 || x.dtype() == DType::BF16) &&
         (act.kind == ops::Activation::ReLU || (act.kind == ops::Activation::LeakyReLU && act.negative_slope >= 0.f));
}
ActivationGrad activation_grad(const Tensor& x, const Tensor& gamma, const ops::FusedActivation& act,
                               const Tensor* beta) {
  const bool recompute = beta && recomputes_activation(x, act);
  if (recompute) check_channel_vector(*beta, x.dim(1), gamma.dtype(), x, "beta");
  return ActivationGrad{true, recompute, act.kind, act.negative_slope};
}

// Whether D's last BatchNorm may do its last layer's passes on x (ops.h): NHWC,
// channels in whole 16-byte packs, every buffer 16-byte aligned.
bool image_work_applies(const Tensor& x, const ChannelGeometry& g, std::initializer_list<const void*> buffers) {
  if (!g.nhwc || g.M == 0) return false;
  bool packs = false;
  GE_DISPATCH_FLOAT(x.dtype(), T, packs = g.C % kWidePack<T> == 0);
  if (!packs) return false;
  for (const void* p : buffers)
    if (!aligned16(p)) return false;
  return true;
}

// What every backward checks of the tensors it shares with the others.
void check_backward(const Tensor& x, const Tensor& dx, const Tensor& gamma, const Tensor& dgamma, const Tensor& dbeta,
                    const Tensor& save_mean, const Tensor& save_invstd) {
  check_activation_pair(x, dx, "x/dx");
  check_params(x, gamma, {&dgamma, &dbeta});
  check_channel_vector(save_mean, x.dim(1), DType::F32, x, "save_mean");
  check_channel_vector(save_invstd, x.dim(1), DType::F32, x, "save_invstd");
}

// What both training forwards check of their tensors.
void check_train_forward(const Tensor& x, const Tensor& y, const Tensor& gamma, const Tensor& beta,
                         const Tensor& running_mean, const Tensor& running_var, const Tensor& save_mean,
                         const Tensor& save_invstd) {
  check_activation_pair(x, y, "x/y");
  check_params(x, gamma, {&beta, &running_mean, &running_var});
  check_channel_vector(save_mean, x.dim(1), DType::F32, x, "save_mean");
  check_channel_vector(save_invstd, x.dim(1), DType::F32, x, "save_invstd");
}

// The statistics pass, their merge and the element-wise pass (normalize_kernel, or with `dot`
// normalize_dot_kernel, which needs an activation and rounds nothing).
void batchnorm_forward_train_three_launches(const Tensor& x, const ChannelGeometry& g, const Tensor& gamma,
                                            const Tensor& beta, Tensor& running_mean, Tensor& running_var,
                                            float momentum, float eps, Tensor& y, Tensor& save_mean,
                                            Tensor& save_invstd, const ops::FusedActivation* act,
                                            const ops::BatchNormSync* sync, const ImageDot* dot,
                                            const Fp8RoundTripArgs& round = {}) {
  cudaStream_t stream = stream_of(x);
  const uint32_t splits = reduce_splits(g);
  Tensor partials =
      Tensor::empty({static_cast<int64_t>(partials_floats<MeanVarAcc>(g, splits))}, DType::F32, x.device());
  float* scratch = partials.data_as<float>();

  GE_DISPATCH_FLOAT(x.dtype(), T, {
    const StatsVisit<T> visit{x.data_as<T>()};
    const bool vector_ok = aligned16(x.data());
    GE_DISPATCH_FLOAT(gamma.dtype(), P, {
      if (sync) {
        const unsigned blocks = static_cast<unsigned>(ceil_div(g.C, kPerChannelThreads));
        Tensor local = Tensor::empty({3 * int64_t{g.C}}, DType::F32, x.device());
        Tensor first = Tensor::empty({2 * int64_t{g.C}}, DType::F32, x.device());
        Tensor second = Tensor::empty({int64_t{g.C}}, DType::F32, x.device());
        reduce_channels<MeanVarAcc>(visit, g, splits, scratch,
                                    FinishSyncStatsLocal{g.C, local.data_as<float>(), first.data_as<float>()}, stream,
                                    vector_ok);
        sync->all_reduce_sum(first);
        sync_stats_moved_kernel<<<blocks, kPerChannelThreads, 0, stream>>>(
            first.data_as<float>(), g.C, local.data_as<float>(), second.data_as<float>());
        CUDA_CHECK_LAUNCH();
        sync->all_reduce_sum(second);
        sync_stats_finish_kernel<P><<<blocks, kPerChannelThreads, 0, stream>>>(
            first.data_as<float>(), second.data_as<float>(), local.data_as<float>(), g.C, eps, momentum,
            save_mean.data_as<float>(), save_invstd.data_as<float>(), running_mean.data_as<P>(),
            running_var.data_as<P>(), sync->total_count.data_as<float>());
        CUDA_CHECK_LAUNCH();
      } else {
        reduce_channels<MeanVarAcc>(
            visit, g, splits, scratch,
            FinishStats<P>{eps, momentum, save_mean.data_as<float>(), save_invstd.data_as<float>(),
                           running_mean.data_as<P>(), running_var.data_as<P>()},
            stream, vector_ok);
      }
      if (dot)
        launch_normalize_dot<T, P>(x, y, save_mean.data_as<float>(), save_invstd.data_as<float>(), gamma, beta, g, *act,
                                   *dot, stream);
      else
        launch_normalize<T, P>(x, y, save_mean.data_as<float>(), save_invstd.data_as<float>(), gamma, beta, g, act,
                               stream, round);
    });
  });
}

// The gradient sums, their merge and the dx pass, reading dy from a tensor or forming it
// (OuterDy); dy_data: the memory whose alignment the dy loads need. y: the fused activation's
// output (nullptr without one).
template <class T, class Dy>
void batchnorm_backward_three_launches(const Tensor& x, const ChannelGeometry& g, Dy dy, const void* dy_data,
                                       const Tensor& gamma, const Tensor* beta, const T* y, const Tensor& save_mean,
                                       const Tensor& save_invstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                                       const ActivationGrad& agrad, const ops::BatchNormSync* sync,
                                       const Fp8RoundTripArgs& round) {
  cudaStream_t stream = stream_of(x);
  const uint32_t splits = reduce_splits(g);
  Tensor partials =
      Tensor::empty({static_cast<int64_t>(partials_floats<GradSumsAcc>(g, splits))}, DType::F32, x.device());
  // The dx pass tests a recomputed activation on thresholds (coef's fourth vector) where the
  // coefficients are formed here (not --sync-bn's kernel) and it reads whole packs.
  const bool thresholds = agrad.recompute && !sync;
  Tensor coef = Tensor::empty({(thresholds ? 4 : 3) * int64_t{g.C}}, DType::F32, x.device());
  const uint32_t n = static_cast<uint32_t>(x.numel());
  const float* mean = save_mean.data_as<float>();
  const float* invstd = save_invstd.data_as<float>();
  const bool vector_ok = aligned16(x.data()) && aligned16(dy_data) && (!y || aligned16(y));
  GE_DISPATCH_FLOAT(gamma.dtype(), P, {
    auto reduce = [&](auto recompute) {
      constexpr bool kRecompute = decltype(recompute)::value;
      const GradSumsVisit<T, P, kRecompute, Dy> visit{x.data_as<T>(),
                                                      dy,
                                                      kRecompute ? nullptr : y,
                                                      mean,
                                                      invstd,
                                                      gamma.data_as<P>(),
                                                      kRecompute ? beta->data_as<P>() : nullptr,
                                                      agrad};
      if (sync) {
        Tensor sums = Tensor::empty({2 * int64_t{g.C}}, DType::F32, x.device());
        reduce_channels<GradSumsAcc>(
            visit, g, splits, partials.data_as<float>(),
            FinishSyncGradsLocal<P>{g.C, invstd, dgamma.data_as<P>(), dbeta.data_as<P>(), sums.data_as<float>()},
            stream, vector_ok);
        sync->all_reduce_sum(sums);
        sync_grads_coef_kernel<P>
            <<<static_cast<unsigned>(ceil_div(g.C, kPerChannelThreads)), kPerChannelThreads, 0, stream>>>(
                sums.data_as<float>(), g.C, sync->total_count.data_as<float>(), gamma.data_as<P>(), invstd,
                coef.data_as<float>());
        CUDA_CHECK_LAUNCH();
      } else {
        FinishGrads<P> finish{
            g.C, g.M, gamma.data_as<P>(), invstd, dgamma.data_as<P>(), dbeta.data_as<P>(), coef.data_as<float>()};
        if (thresholds) {
          finish.save_mean = mean;
          finish.beta = beta->data_as<P>();
          finish.threshold = coef.data_as<float>() + 3 * g.C;
          finish.bf16 = x.dtype() == DType::BF16;
        }
        reduce_channels<GradSumsAcc>(visit, g, splits, partials.data_as<float>(), finish, stream, vector_ok);
      }
    };
    if (agrad.recompute)
      reduce(std::true_type{});
    else
      reduce(std::false_type{});
  });
  constexpr int W = kWidePack<T>;
  // coef's vectors start at multiples of C: aligned when C is a whole number of packs.
  const bool vector_loads = packs_aligned<W, float>({mean, coef.data()}) && g.C % W == 0;
  if (bn_pack_width<T>(g, n, {x.data(), dy_data, y, dx.data()}) == W) {
    auto launch = [&](auto kernel) {
      const unsigned blocks = elementwise_blocks(kernel, n / W, x.device().index);
      launch_kernel(kernel, blocks, kThreads, 0, stream, x.data_as<T>(), dy, y, dx.data_as<T>(), mean,
                    coef.data_as<float>(), g, n / W, vector_loads, channels_fixed_per_thread(g, blocks, W), agrad,
                    round);
    };
    if (thresholds)  // 16-bit activations only
      launch(batchnorm_dx_kernel<T, W, true, Dy>);
    else
      launch(batchnorm_dx_kernel<T, W, false, Dy>);
  } else {
    const unsigned blocks = grid_for(n);
    launch_kernel(batchnorm_dx_kernel<T, 1, false, Dy>, blocks, kThreads, 0, stream, x.data_as<T>(), dy, y,
                  dx.data_as<T>(), mean, coef.data_as<float>(), g, n, false, channels_fixed_per_thread(g, blocks, 1),
                  agrad, round);
  }
  CUDA_CHECK_LAUNCH();
}

// The training forward in one launch where it can be, else in three.
void forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& running_mean, Tensor& running_var,
                   float momentum, float eps, Tensor& y, Tensor& save_mean, Tensor& save_invstd,
                   const ops::FusedActivation* act, const ops::BatchNormSync* sync, const Fp8RoundTripArgs& round) {
  check_train_forward(x, y, gamma, beta, running_mean, running_var, save_mean, save_invstd);
  if (sync) check_sync(*sync, x);
  const ChannelGeometry g = channel_geometry(x);
  GE_CHECK(g.M > 0 && g.C > 0, "batchnorm: empty input ", x.str());
  if (!sync && batchnorm_forward_train_clustered(x, g, gamma, beta, running_mean, running_var, momentum, eps, y,
                                                 save_mean, save_invstd, act, round))
    return;
  batchnorm_forward_train_three_launches(x, g, gamma, beta, running_mean, running_var, momentum, eps, y, save_mean,
                                         save_invstd, act, sync, nullptr, round);
}

}  // namespace

void batchnorm_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                             Tensor& running_var, float momentum, float eps, Tensor& y, Tensor& save_mean,
                             Tensor& save_invstd, const ops::FusedActivation* act, const ops::BatchNormSync* sync) {
  forward_train(x, gamma, beta, running_mean, running_var, momentum, eps, y, save_mean, save_invstd, act, sync, {});
}

void batchnorm_forward_train_rounded(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                                     Tensor& running_var, float momentum, float eps, Tensor& y, Tensor& save_mean,
                                     Tensor& save_invstd, const ops::FusedActivation& act,
                                     const ops::Fp8RoundTrip& round_y) {
  forward_train(x, gamma, beta, running_mean, running_var, momentum, eps, y, save_mean, save_invstd, &act, nullptr,
                fp8_round_trip_args(&round_y));
}

bool batchnorm_backward_recomputes(const Tensor& x, const ops::FusedActivation& act) {
  return recomputes_activation(x, act);
}

bool batchnorm_forward_train_dot(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                                 Tensor& running_var, float momentum, float eps, const ops::FusedActivation& act,
                                 Tensor& y, Tensor& save_mean, Tensor& save_invstd, const Tensor& w, Tensor& dots) {
  check_train_forward(x, y, gamma, beta, running_mean, running_var, save_mean, save_invstd);
  const ChannelGeometry g = channel_geometry(x);  // (under 2^31 values, so under 2^31 images)
  if (!image_work_applies(x, g, {x.data(), y.data(), w.data()})) return false;
  // Where the plain forward takes one launch (its statistics summed in another order than the
  // three launches'), it stays as it is: forming the dots in that launch too, summed by a kernel
  // of their own, makes steps longer (docs/performance.md).
  if (batchnorm_in_one_launch(x)) return false;
  const ImageDot dot{&w, &dots};
  batchnorm_forward_train_three_launches(x, g, gamma, beta, running_mean, running_var, momentum, eps, y, save_mean,
                                         save_invstd, &act, nullptr, &dot);
  return true;
}

void batchnorm_forward_train_moments(const Tensor& x, const Tensor& moments, const Tensor& gamma, const Tensor& beta,
                                     Tensor& running_mean, Tensor& running_var, float momentum, float eps, Tensor& y,
                                     Tensor& save_mean, Tensor& save_invstd, const ops::FusedActivation* act,
                                     const ops::Fp8RoundTrip* round_y) {
  check_train_forward(x, y, gamma, beta, running_mean, running_var, save_mean, save_invstd);
  GE_CHECK(moments.dtype() == DType::F32 && moments.rank() == 3 && moments.dim(0) == 3 && moments.dim(2) == x.dim(1) &&
               moments.device() == x.device(),
           "batchnorm: moments must be (3, parts, C) f32 on ", x.device().str(), ", are ", moments.str());
  const ChannelGeometry g = channel_geometry(x);
  GE_CHECK(g.M > 0 && g.C > 0, "batchnorm: empty input ", x.str());
  cudaStream_t stream = stream_of(x);
  GE_DISPATCH_FLOAT(x.dtype(), T, {
    GE_DISPATCH_FLOAT(gamma.dtype(), P, {
      finish_channels<MeanVarAcc>(
          moments.data_as<float>(), static_cast<uint32_t>(moments.dim(1)), g.C,
          FinishStats<P>{eps, momentum, save_mean.data_as<float>(), save_invstd.data_as<float>(),
                         running_mean.data_as<P>(), running_var.data_as<P>()},
          stream);
      launch_normalize<T, P>(x, y, save_mean.data_as<float>(), save_invstd.data_as<float>(), gamma, beta, g, act,
                             stream, fp8_round_trip_args(round_y));
    });
  });
}

void batchnorm_forward_eval(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                            const Tensor& running_var, float eps, Tensor& y, const ops::FusedActivation* act) {
  check_activation_pair(x, y, "x/y");
  check_params(x, gamma, {&beta, &running_mean, &running_var});
  const ChannelGeometry g = channel_geometry(x);
  if (x.numel() == 0) return;
  cudaStream_t stream = stream_of(x);
  Tensor stats = Tensor::empty({2 * int64_t{g.C}}, DType::F32, x.device());  // mean, invstd
  float* mean = stats.data_as<float>();
  float* invstd = mean + g.C;
  const unsigned channel_blocks = static_cast<unsigned>(ceil_div(g.C, kPerChannelThreads));
  const uint32_t n = static_cast<uint32_t>(x.numel());

  GE_DISPATCH_FLOAT(x.dtype(), T, {
    GE_DISPATCH_FLOAT(gamma.dtype(), P, {
      running_stats_kernel<P><<<channel_blocks, kPerChannelThreads, 0, stream>>>(
          running_mean.data_as<P>(), running_var.data_as<P>(), g.C, eps, mean, invstd);
      CUDA_CHECK_LAUNCH();
      launch_normalize<T, P>(x, y, mean, invstd, gamma, beta, g, act, stream);
    });
  });
}

void batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,
                        const Tensor& save_invstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                        const ops::FusedActivation* act, const Tensor* y_act, const Tensor* beta,
                        const ops::BatchNormSync* sync, const ops::Fp8RoundTrip* round_dx) {
  check_activation_pair(x, dy, "x/dy");
  check_backward(x, dx, gamma, dgamma, dbeta, save_mean, save_invstd);
  if (sync) check_sync(*sync, x);
  ActivationGrad agrad;
  if (act) {
    GE_CHECK(y_act && y_act->defined(), "batchnorm backward with a fused activation needs the activation's output");
    check_activation_pair(x, *y_act, "x/y");
    agrad = activation_grad(x, gamma, *act, beta);
  }
  const ChannelGeometry g = channel_geometry(x);
  GE_CHECK(g.M > 0 && g.C > 0, "batchnorm: empty input ", x.str());
  const Fp8RoundTripArgs round = fp8_round_trip_args(round_dx);
  if (!sync && batchnorm_backward_clustered(x, g, &dy, gamma, beta, y_act, save_mean, save_invstd, dx, dgamma, dbeta,
                                            agrad, round))
    return;
  GE_DISPATCH_FLOAT(x.dtype(), T, {
    batchnorm_backward_three_launches<T>(x, g, dy.data_as<T>(), dy.data(), gamma, beta,
                                         act ? y_act->data_as<T>() : nullptr, save_mean, save_invstd, dx, dgamma, dbeta,
                                         agrad, sync, round);
  });
}

bool batchnorm_backward_outer(const Tensor& x, const Tensor& y_act, const Tensor& dlogits, const Tensor& w,
                              const Tensor& gamma, const Tensor& beta, const Tensor& save_mean,
                              const Tensor& save_invstd, const ops::FusedActivation& act, Tensor& dx, Tensor& dgamma,
                              Tensor& dbeta, const ops::Fp8RoundTrip* round_dx) {
  check_activation_pair(x, y_act, "x/y");
  check_backward(x, dx, gamma, dgamma, dbeta, save_mean, save_invstd);
  check_params(x, gamma, {&beta});
  const ChannelGeometry g = channel_geometry(x);
  // Half activations only: f32's backward-data of the layer is cuDNN's, which this would not be.
  if ((x.dtype() != DType::F16 && x.dtype() != DType::BF16) ||
      !image_work_applies(x, g, {x.data(), y_act.data(), dx.data(), w.data()}))
    return false;
  const ActivationGrad agrad = activation_grad(x, gamma, act, &beta);
  const ImageOuter outer{&dlogits, &w};
  const Fp8RoundTripArgs round = fp8_round_trip_args(round_dx);
  if (batchnorm_backward_clustered(x, g, nullptr, gamma, &beta, &y_act, save_mean, save_invstd, dx, dgamma, dbeta,
                                   agrad, round, &outer))
    return true;
  GE_DISPATCH_HALF(x.dtype(), T, {
    const OuterDy<T> dy{dlogits.data_as<T>(), w.data_as<T>(), FastDivmod(g.HW * g.C)};
    batchnorm_backward_three_launches<T>(x, g, dy, w.data(), gamma, &beta, y_act.data_as<T>(), save_mean, save_invstd,
                                         dx, dgamma, dbeta, agrad, nullptr, round);
  });
  return true;
}

}  // namespace gpu
}  // namespace ge
