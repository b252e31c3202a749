// BatchNorm's training forward and backward over a small NHWC layer, one launch each
// (batchnorm_cluster.h says why and how). The per-element arithmetic is batchnorm_math.cuh's, as
// in batchnorm.cu's three-launch passes.
#include <cooperative_groups.h>

#include <algorithm>
#include <atomic>

#include "core/backend.h"
#include "core/tuning_policy.h"
#include "cuda/batchnorm_cluster.h"
#include "cuda/copy_async.cuh"
#include "cuda/kernel_launch.cuh"

namespace ge {
namespace gpu {
namespace {

using namespace bn;
namespace cg = cooperative_groups;

constexpr int kClusterThreads = 256;
constexpr unsigned kMaxClusterBlocks = 16;  // H100/H200: 16 with the non-portable attribute
// A block's rows of every tensor it reads are copied into shared memory first (all at once, by
// cp.async: with a few hundred threads per SM, loads issued a few at a time leave the passes
// waiting on one memory latency after another), then summed and transformed from there.
constexpr size_t kMaxStagedBytes = 192 * 1024;

// A block is Packs x Rows threads: Packs neighbouring 16-byte packs of a row (the cluster's
// Cols = Packs * V channels) for Rows rows at once.
template <int Packs, int V>
struct Tile {
  static constexpr int kCols = Packs * V;
  static constexpr int kRows = kClusterThreads / Packs;
};

// The cluster's barrier in two halves: arrive once this block no longer reads the others'
// shared memory, wait before exiting (the others may still read this block's). Arriving early
// keeps the final wait short.
__device__ __forceinline__ void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory"); }

constexpr int kWarps = kClusterThreads / 32;

// The total of every thread's accumulators for column `lane` of the cluster's channels (valid
// for lane < Cols, the same in every block of the cluster): each warp's threads merged by
// shuffles (a fixed tree), the block's warps in order, then the cluster's blocks in rank order.
// The block has arrived at the cluster's barrier when it returns: it must cluster_wait() before
// it exits.
template <class Acc, int V, int Packs>
__device__ Acc cluster_total(Acc (&acc)[V], uint32_t lane) {
  constexpr int Cols = Packs * V;
  __shared__ float warp_totals[Acc::kFields][kWarps][Cols];
  __shared__ float block_total[Acc::kFields][Cols];  // read by the cluster's other blocks
  __shared__ float gathered[kMaxClusterBlocks][Acc::kFields][Cols];
  const uint32_t tx = threadIdx.x, warp = lane / 32, warp_lane = lane % 32;
  // Lanes with the same tx (the same channels) are Packs apart.
  for (uint32_t half = 16; half >= Packs; half /= 2) {
    Acc other[V];
#pragma unroll
    for (int j = 0; j < V; ++j)
#pragma unroll
      for (int k = 0; k < Acc::kFields; ++k) other[j].set(k, __shfl_down_sync(0xffffffffu, acc[j].get(k), half));
    if (warp_lane < half) Acc::merge_pack(acc, other);
  }
  if (warp_lane < Packs)
#pragma unroll
    for (int j = 0; j < V; ++j)
#pragma unroll
      for (int k = 0; k < Acc::kFields; ++k) warp_totals[k][warp][tx * V + j] = acc[j].get(k);
  __syncthreads();
  if (lane < Cols) {
    Acc total = Acc::zero();
    for (int w = 0; w < kWarps; ++w) {
      Acc part;
#pragma unroll
      for (int k = 0; k < Acc::kFields; ++k) part.set(k, warp_totals[k][w][lane]);
      total.merge(part);
    }
#pragma unroll
    for (int k = 0; k < Acc::kFields; ++k) block_total[k][lane] = total.get(k);
  }
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every block's total is complete
  // Every block's total fetched at once (one thread each), then merged in rank order.
  const unsigned blocks = cluster.num_blocks();
  if (lane < blocks * Cols) {
    const unsigned rank = lane / Cols, col = lane % Cols;
    const float* remote = cluster.map_shared_rank(&block_total[0][0], rank);
#pragma unroll
    for (int k = 0; k < Acc::kFields; ++k) gathered[rank][k][col] = remote[k * Cols + col];
  }
  __syncthreads();
  cluster_arrive();
  Acc total = Acc::zero();
  if (lane < Cols)
    for (unsigned r = 0; r < blocks; ++r) {
      Acc part;
#pragma unroll
      for (int k = 0; k < Acc::kFields; ++k) part.set(k, gathered[r][k][lane]);
      total.merge(part);
    }
  return total;
}

// The rows [begin, begin + count) of the tensor this block's cluster rank takes.
struct BlockRows {
  uint32_t begin, count;
};

__device__ __forceinline__ BlockRows block_rows(uint32_t M, uint32_t rows_per_block) {
  const uint32_t begin = min(M, cg::this_cluster().block_rank() * rows_per_block);
  return {begin, min(M, begin + rows_per_block) - begin};
}

// Starts copying this thread's packs of `src` (rows ty, ty + kRows, ... of the block's, channels
// c0 ..) to `slab`, the block's rows as [row][kCols] with this thread's pack at `col`.
template <int kRows, int kCols, class T>
__device__ __forceinline__ void stage(T* slab, const T* src, const BlockRows& rows, uint32_t C, uint32_t c0,
                                      uint32_t col) {
  for (uint32_t r = threadIdx.y; r < rows.count; r += kRows)
    copy_async_16(slab + r * kCols + col, src + uint64_t{rows.begin + r} * C + c0, true);
}

// round.scale set: y rounded to FP8 and back as it is written (ops::Fp8RoundTrip), its amax
// folded into round.amax, or only its codes written (round.codes_only).
template <class T, class P, int Packs>
__global__ void __launch_bounds__(kClusterThreads)
    batchnorm_forward_cluster_kernel(const T* x, T* y, const P* gamma, const P* beta, FinishStats<P> finish,
                                     ChannelGeometry g, uint32_t rows_per_block, bool fused, ops::Activation act,
                                     float slope, Fp8RoundTripArgs round) {
  await_previous_kernel();
  constexpr int V = kWidePack<T>, kCols = Tile<Packs, V>::kCols, kRows = Tile<Packs, V>::kRows;
  __shared__ float affine[4][kCols];  // mean, invstd, gamma, beta
  extern __shared__ __align__(16) unsigned char staged[];
  T* x_rows = reinterpret_cast<T*>(staged);
  const uint32_t tx = threadIdx.x, ty = threadIdx.y, lane = ty * Packs + tx, col = tx * V;
  const uint32_t c_first = blockIdx.y * kCols, c0 = c_first + col;
  const BlockRows rows = block_rows(g.M, rows_per_block);
  stage<kRows, kCols>(x_rows, x, rows, g.C, c0, col);
  copy_async_commit();
  const bool finisher = lane < kCols && cg::this_cluster().block_rank() == 0;
  float old_mean = 0.f, old_var = 0.f;
  if (lane < kCols) {  // loaded while the rows arrive
    affine[2][lane] = load_float(gamma + c_first + lane);
    affine[3][lane] = load_float(beta + c_first + lane);
    if (finisher) {
      old_mean = load_float(finish.running_mean + c_first + lane);
      old_var = load_float(finish.running_var + c_first + lane);
    }
  }
  copy_async_wait<0>();  // a thread reads only the packs it copied

  MeanVarAcc acc[V];
#pragma unroll
  for (int j = 0; j < V; ++j) acc[j] = MeanVarAcc::zero();
  accumulate_rows<kRows>(StatsVisit<T>{x_rows}, acc, ty, rows.count, kCols, col);
  const MeanVarAcc total = cluster_total<MeanVarAcc, V, Packs>(acc, lane);
  if (lane < kCols) {
    affine[0][lane] = total.mean;
    affine[1][lane] = batch_invstd(total, finish.eps);
  }
  __syncthreads();

  float m[V], s[V], ga[V], be[V];
#pragma unroll
  for (int j = 0; j < V; ++j) {
    m[j] = affine[0][col + j];
    s[j] = affine[1][col + j];
    ga[j] = affine[2][col + j];
    be[j] = affine[3][col + j];
  }
  using Packed = Pack<T, V>;
  const float2 round_scales = fp8_round_trip_scales(round);
  uint32_t amax_key = 0;
  for (uint32_t r = ty; r < rows.count; r += kRows) {
    const Packed in = *reinterpret_cast<const Packed*>(x_rows + r * kCols + col);
    Packed out;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      float v = bn_affine(load_float(&in.v[j]), m[j], s[j], ga[j], be[j]);
      if (fused) v = activate(act, round_to<T>(v), slope);
      store_float(&out.v[j], v);
    }
    const uint64_t first = uint64_t{rows.begin + r} * g.C + c0;
    fp8_store_written(out, y, round, round_scales, first, amax_key);
  }
  if (round.amax) fold_amax_key(amax_key, round.amax);
  // Saved and running statistics last: nothing in this kernel waits for them.
  if (finisher) finish.finish(c_first + lane, total, old_mean, old_var);
  cluster_wait();  // the other blocks have read this block's total
}

// outer.w non-null: dy is D's last layer's backward-data (OuterDy), formed into the block's rows
// instead of copied (visit.dy unused). round.scale set: dx rounded to FP8 and back as it is
// written (ops::Fp8RoundTrip), its amax folded into round.amax, or only its codes written
// (round.codes_only).
template <class T, class P, int Packs, bool kRecompute>
__global__ void __launch_bounds__(kClusterThreads)
    batchnorm_backward_cluster_kernel(GradSumsVisit<T, P, kRecompute> visit, T* dx, FinishGrads<P> finish,
                                      ChannelGeometry g, uint32_t rows_per_block, OuterDy<T> outer,
                                      Fp8RoundTripArgs round) {
  await_previous_kernel();
  constexpr int V = kWidePack<T>, kCols = Tile<Packs, V>::kCols, kRows = Tile<Packs, V>::kRows;
  __shared__ float coef[3][kCols];
  extern __shared__ __align__(16) unsigned char staged[];
  const uint32_t tx = threadIdx.x, ty = threadIdx.y, lane = ty * Packs + tx, col = tx * V;
  const uint32_t c_first = blockIdx.y * kCols, c0 = c_first + col;
  const BlockRows rows = block_rows(g.M, rows_per_block);
  // The same sums over the block's rows in shared memory: its visitor reads [row][kCols] slabs,
  // with the per-channel vectors offset to the cluster's first channel.
  const size_t slab = size_t{rows_per_block} * kCols;
  GradSumsVisit<T, P, kRecompute> local = visit;
  local.x = reinterpret_cast<T*>(staged);
  local.dy = local.x + slab;
  local.y = visit.reads_y() ? local.x + 2 * slab : nullptr;
  local.mean += c_first;
  local.invstd += c_first;
  local.gamma += c_first;
  if (kRecompute) local.beta += c_first;
  stage<kRows, kCols>(const_cast<T*>(local.x), visit.x, rows, g.C, c0, col);
  if (outer.w)
    for (uint32_t r = ty; r < rows.count; r += kRows)
      *reinterpret_cast<Pack<T, V>*>(const_cast<T*>(local.dy) + r * kCols + col) =
          load_dy_pack<V>(outer, uint64_t{rows.begin + r} * g.C + c0);
  else
    stage<kRows, kCols>(const_cast<T*>(local.dy), visit.dy, rows, g.C, c0, col);
  if (visit.reads_y()) stage<kRows, kCols>(const_cast<T*>(local.y), visit.y, rows, g.C, c0, col);
  copy_async_commit();
  // Per-channel values loaded while the rows arrive.
  const typename GradSumsVisit<T, P, kRecompute>::Channels ch = local.channels(col);
  float gamma_c = 0.f, invstd_c = 0.f;
  if (lane < kCols) {
    gamma_c = load_float(local.gamma + lane);
    invstd_c = local.invstd[lane];
  }
  copy_async_wait<0>();  // a thread reads only the packs it copied

  GradSumsAcc acc[V];
#pragma unroll
  for (int j = 0; j < V; ++j) acc[j] = GradSumsAcc::zero();
  accumulate_rows<kRows>(local, ch, acc, ty, rows.count, kCols, col);
  const GradSumsAcc total = cluster_total<GradSumsAcc, V, Packs>(acc, lane);
  if (lane < kCols) {
    const DxCoef k = dx_coef(total, gamma_c, invstd_c, static_cast<float>(g.M));
    coef[0][lane] = k.k0;
    coef[1][lane] = k.k1;
    coef[2][lane] = k.k2;
  }
  __syncthreads();

  float k0[V], k1[V], k2[V];
#pragma unroll
  for (int j = 0; j < V; ++j) {
    k0[j] = coef[0][col + j];
    k1[j] = coef[1][col + j];
    k2[j] = coef[2][col + j];
  }
  using Packed = Pack<T, V>;
  const float2 round_scales = fp8_round_trip_scales(round);
  uint32_t amax_key = 0;
  for (uint32_t r = ty; r < rows.count; r += kRows) {
    const typename GradSumsVisit<T, P, kRecompute>::Loaded v = local.load(r * kCols + col);
    Packed out;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float xf = load_float(&v.x.v[j]);
      const float yf = local.reads_y() ? load_float(&v.y.v[j]) : 0.f;
      const float grad = bn_output_grad<T, kRecompute>(local.act, xf, yf, load_float(&v.dy.v[j]), ch.c[j]);
      store_float(&out.v[j], bn_dx(k0[j], k1[j], k2[j], grad, xf, ch.c[j].mean));
    }
    const uint64_t at = uint64_t{rows.begin + r} * g.C + c0;  // the pack's first element
    fp8_store_written(out, dx, round, round_scales, at, amax_key);
  }
  if (round.amax) fold_amax_key(amax_key, round.amax);
  if (lane < kCols && cg::this_cluster().block_rank() == 0) finish.params(c_first + lane, total);  // dgamma, dbeta
  cluster_wait();  // the other blocks have read this block's total
}

// ---- the host side

std::atomic<ClusterBatchNorm> cluster_choice{ClusterBatchNorm::Auto};

ClusterBatchNorm effective_choice() { return cluster_choice.load(std::memory_order_relaxed); }

// How a layer is cut: `groups` clusters of `blocks` blocks, each block Packs x (256 / Packs)
// threads over rows_per_block rows of Packs * V channels.
struct ClusterLayout {
  int packs = 0;
  unsigned blocks = 0;
  unsigned groups = 0;
  uint32_t rows_per_block = 0;
  uint32_t rows_per_thread = 0;
  size_t staged_bytes = 0;  // per block
};

// About one block per SM: two packs (a 32-byte sector of each row) where that still leaves eight
// clusters, one otherwise, and as many blocks per cluster as fill the SMs (at most 16). `tensors`:
// how many tensors' rows a block stages.
template <class T>
ClusterLayout cluster_layout(const ChannelGeometry& g, int sms, int tensors) {
  constexpr int V = kWidePack<T>;
  ClusterLayout l;
  l.packs = (g.C % (2 * V) == 0 && g.C / (2 * V) >= 8) ? 2 : 1;
  l.groups = g.C / (l.packs * V);
  const uint32_t rows_at_once = kClusterThreads / l.packs;
  const int64_t fill = std::max<int64_t>(1, sms / static_cast<int64_t>(l.groups));
  l.blocks = static_cast<unsigned>(
      std::clamp<int64_t>(std::min<int64_t>(fill, ceil_div(g.M, rows_at_once)), 1, kMaxClusterBlocks));
  l.rows_per_block = static_cast<uint32_t>(ceil_div(g.M, l.blocks));
  l.rows_per_thread = static_cast<uint32_t>(ceil_div(l.rows_per_block, rows_at_once));
  l.staged_bytes = size_t{l.rows_per_block} * l.packs * V * sizeof(T) * tensors;
  return l;
}

// The layout when this layer takes the one-launch path, packs == 0 when it does not.
template <class T>
ClusterLayout layout_if_taken(const ChannelGeometry& g, int device, std::initializer_list<const void*> buffers,
                              int tensors) {
  const ClusterBatchNorm choice = effective_choice();
  if (choice == ClusterBatchNorm::Off || !g.nhwc) return {};
  if (g.M == 0 || g.C % kWidePack<T> != 0) return {};
  for (const void* p : buffers)
    if (p && !aligned16(p)) return {};
  const ClusterLayout l = cluster_layout<T>(g, sm_count(device), tensors);
  if (l.staged_bytes > kMaxStagedBytes) return {};
  if (choice == ClusterBatchNorm::Auto && (int64_t{l.rows_per_thread} > tuning().bn_cluster_max_rows_per_thread ||
                                           int64_t{g.M} * g.C > tuning().bn_cluster_max_values))
    return {};
  return l;
}

// Launches `kernel` as layout `l` says, after giving it the shared memory and (above 8 blocks)
// the cluster size it needs; false, launching nothing, when its clusters do not fit.
template <class... Params, class... Args>
bool launch_layout(void (*kernel)(Params...), const ClusterLayout& l, int device, cudaStream_t stream, Args&&... args) {
  set_function_attribute_once(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kMaxStagedBytes),
                              device);
  if (l.blocks > 8) set_function_attribute_once(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1, device);
  const dim3 block(l.packs, kClusterThreads / l.packs);
  if (resident_clusters(reinterpret_cast<const void*>(kernel), block, l.blocks, l.staged_bytes, device) == 0)
    return false;
  launch_kernel_in_clusters(kernel, dim3(l.blocks, l.groups), block, l.blocks, l.staged_bytes, stream,
                            std::forward<Args>(args)...);
  CUDA_CHECK_LAUNCH();
  return true;
}

}  // namespace

void set_cluster_batchnorm(ClusterBatchNorm choice) { cluster_choice = choice; }

bool batchnorm_in_one_launch(const Tensor& x) {
  bool taken = false;
  GE_DISPATCH_FLOAT(x.dtype(), T,
                    taken = layout_if_taken<T>(channel_geometry(x), x.device().index, {x.data()}, 1).packs != 0);
  return taken;
}

bool batchnorm_forward_train_clustered(const Tensor& x, const ChannelGeometry& g, const Tensor& gamma,
                                       const Tensor& beta, Tensor& running_mean, Tensor& running_var, float momentum,
                                       float eps, Tensor& y, Tensor& save_mean, Tensor& save_invstd,
                                       const ops::FusedActivation* act, const Fp8RoundTripArgs& round) {
  bool taken = false;
  GE_DISPATCH_FLOAT(x.dtype(), T, {
    const ClusterLayout l = layout_if_taken<T>(g, x.device().index, {x.data(), y.data()}, 1);
    if (l.packs != 0) {
      const bool fused = act != nullptr;
      const ops::Activation kind = fused ? act->kind : ops::Activation::ReLU;
      const float slope = fused ? act->negative_slope : 0.f;
      const int device = x.device().index;
      GE_DISPATCH_FLOAT(gamma.dtype(), P, {
        const FinishStats<P> finish{eps,
                                    momentum,
                                    save_mean.data_as<float>(),
                                    save_invstd.data_as<float>(),
                                    running_mean.data_as<P>(),
                                    running_var.data_as<P>()};
        auto launch = [&](auto kernel) {
          taken = launch_layout(kernel, l, device, stream_of(x), x.data_as<T>(), y.data_as<T>(), gamma.data_as<P>(),
                                beta.data_as<P>(), finish, g, l.rows_per_block, fused, kind, slope, round);
        };
        if (l.packs == 2)
          launch(batchnorm_forward_cluster_kernel<T, P, 2>);
        else
          launch(batchnorm_forward_cluster_kernel<T, P, 1>);
      });
    }
  });
  return taken;
}

bool batchnorm_backward_clustered(const Tensor& x, const ChannelGeometry& g, const Tensor* dy, const Tensor& gamma,
                                  const Tensor* beta, const Tensor* y, const Tensor& save_mean,
                                  const Tensor& save_invstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                                  const ActivationGrad& act, const Fp8RoundTripArgs& round, const ImageOuter* outer) {
  bool taken = false;
  GE_DISPATCH_FLOAT(x.dtype(), T, {
    const T* y_data = act.fused && !act.recompute ? y->data_as<T>() : nullptr;
    OuterDy<T> outer_dy{nullptr, nullptr, FastDivmod()};  // outer_dy.w null: dy is copied
    if (outer) outer_dy = {outer->dlogits->data_as<T>(), outer->w->data_as<T>(), FastDivmod(g.HW * g.C)};
    const void* dy_data = outer ? outer->w->data() : dy->data();
    const ClusterLayout l =
        layout_if_taken<T>(g, x.device().index, {x.data(), dy_data, dx.data(), y_data}, y_data ? 3 : 2);
    if (l.packs != 0) {
      const int device = x.device().index;
      GE_DISPATCH_FLOAT(gamma.dtype(), P, {
        const FinishGrads<P> finish{
            g.C,    g.M, gamma.data_as<P>(), save_invstd.data_as<float>(), dgamma.data_as<P>(), dbeta.data_as<P>(),
            nullptr};
        auto run = [&](auto recompute) {
          constexpr bool kRecompute = decltype(recompute)::value;
          const GradSumsVisit<T, P, kRecompute> visit{x.data_as<T>(),
                                                      outer ? nullptr : dy->data_as<T>(),
                                                      y_data,
                                                      save_mean.data_as<float>(),
                                                      save_invstd.data_as<float>(),
                                                      gamma.data_as<P>(),
                                                      kRecompute ? beta->data_as<P>() : nullptr,
                                                      act};
          auto launch = [&](auto kernel) {
            taken = launch_layout(kernel, l, device, stream_of(x), visit, dx.data_as<T>(), finish, g, l.rows_per_block,
                                  outer_dy, round);
          };
          if (l.packs == 2)
            launch(batchnorm_backward_cluster_kernel<T, P, 2, kRecompute>);
          else
            launch(batchnorm_backward_cluster_kernel<T, P, 1, kRecompute>);
        };
        if (act.recompute)
          run(std::true_type{});
        else
          run(std::false_type{});
      });
    }
  });
  return taken;
}

}  // namespace gpu
}  // namespace ge
