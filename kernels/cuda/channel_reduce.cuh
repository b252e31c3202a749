// Per-channel reductions over a 4-D activation, for BatchNorm's statistics and gradients.
//
// A channel's N*H*W elements are cut into `splits` contiguous ranges; block (tile, split)
// reduces one range, each thread walking a fixed subset and the block merging threads in a
// fixed tree, and writes one partial per channel. A second launch merges the partials in a
// fixed order and hands each channel's total to a Finish functor. Every sum is therefore taken
// in the same order on every run: the results are bitwise reproducible (no floating-point
// atomics), and the split count depends only on the shape, never on the GPU.
//
// Both layouts read memory coalesced:
//  - NCHW: a channel is N runs of H*W contiguous values; one block per (channel, split), the
//    block's threads walk the range in order, so a warp reads consecutive addresses.
//  - NHWC: channels are the fastest dimension; a block is 32 channels x 8 rows, a warp reads
//    32 neighbouring channels of one pixel, and the 8 row-groups are merged at the end.
//
// An accumulator type Acc provides: zero(), merge(const Acc&), kFields, get(k), set(k, v).
// A visitor provides: operator()(Acc&, uint64_t offset, uint32_t channel), adding one element,
// and for the vector kernel kPack, kUnroll, Channels, channels(c0), Loaded, load(offset), add(...).
// A Finish functor provides: operator()(uint32_t channel, const Acc& total), on the device, or
// with prepare() (below) operator()(channel, total, prepared).
#pragma once
#include <algorithm>
#include <type_traits>

#include "cuda/cuda_util.cuh"
#include "cuda/kernel_launch.cuh"

namespace ge {
namespace gpu {

// A 4-D activation as the per-channel kernels see it. 32-bit indices: checked by the caller.
struct ChannelGeometry {
  uint32_t C = 0;
  uint32_t HW = 0;
  uint32_t M = 0;  // elements per channel: N*H*W
  bool nhwc = false;
};

inline ChannelGeometry channel_geometry(const Tensor& t) {
  GE_CHECK(t.rank() == 4, "BatchNorm takes 4-D (N,C,H,W) tensors, got ", t.str());
  GE_CHECK(t.numel() < (int64_t{1} << 31), "BatchNorm on the GPU takes under 2^31 elements, got ", t.str());
  ChannelGeometry g;
  g.C = static_cast<uint32_t>(t.dim(1));
  g.HW = static_cast<uint32_t>(t.dim(2) * t.dim(3));
  g.M = static_cast<uint32_t>(t.dim(0) * t.dim(2) * t.dim(3));
  g.nhwc = t.format() == MemoryFormat::NHWC;
  return g;
}

constexpr int kReduceThreadsNchw = 256;
constexpr int kTileChannels = 32;  // NHWC block: 32 channels ...
constexpr int kTileRows = 8;       // ... by 8 rows

// Number of ranges each channel is cut into: enough blocks to fill the GPU on big layers,
// with each thread still summing a few dozen elements. A pure function of the shape.
// The target counts tiles of kTileChannels; the vector kernel's blocks take twice as many
// channels, so it launches about half as many blocks. Of the targets timed, 512 gives the
// shortest steps (docs/performance.md).
inline uint32_t reduce_splits(const ChannelGeometry& g) {
  const int64_t target_blocks = 512;
  int64_t tiles = g.nhwc ? ceil_div(g.C, kTileChannels) : g.C;
  int64_t per_split = g.nhwc ? kTileRows * 32 : kReduceThreadsNchw * 16;
  int64_t splits = std::min(ceil_div(g.M, per_split), std::max<int64_t>(1, target_blocks / tiles));
  return static_cast<uint32_t>(std::max<int64_t>(1, splits));
}

inline uint32_t split_length(const ChannelGeometry& g, uint32_t splits) {
  return static_cast<uint32_t>(ceil_div(g.M, splits));
}

// partials layout: [Acc::kFields][splits][C]
template <class Acc>
__device__ __forceinline__ void store_partial(float* partials, const Acc& acc, uint32_t splits, uint32_t split,
                                              uint32_t C, uint32_t c) {
#pragma unroll
  for (int k = 0; k < Acc::kFields; ++k) partials[(static_cast<size_t>(k) * splits + split) * C + c] = acc.get(k);
}

template <class Acc>
__device__ __forceinline__ Acc load_partial(const float* partials, uint32_t splits, uint32_t split, uint32_t C,
                                            uint32_t c) {
  Acc acc = Acc::zero();
#pragma unroll
  for (int k = 0; k < Acc::kFields; ++k) acc.set(k, partials[(static_cast<size_t>(k) * splits + split) * C + c]);
  return acc;
}

// Merges rows 1 .. Rows-1 of a block's shared[field][row][column] accumulators into row 0 in a
// fixed tree (row r takes row r + half, half = Rows/2, Rows/4, ...), so results do not depend
// on timing. Every thread of the block calls it; `thread` is its index among `threads`.
template <class Acc, int Rows, int Cols>
__device__ __forceinline__ void merge_rows(float (&shared)[Acc::kFields][Rows][Cols], uint32_t thread,
                                           uint32_t threads) {
  for (uint32_t half = Rows / 2; half > 0; half /= 2) {
    for (uint32_t slot = thread; slot < half * Cols; slot += threads) {
      const uint32_t r = slot / Cols, col = slot % Cols;
      Acc a = Acc::zero(), b = Acc::zero();
#pragma unroll
      for (int k = 0; k < Acc::kFields; ++k) {
        a.set(k, shared[k][r][col]);
        b.set(k, shared[k][r + half][col]);
      }
      a.merge(b);
#pragma unroll
      for (int k = 0; k < Acc::kFields; ++k) shared[k][r][col] = a.get(k);
    }
    __syncthreads();
  }
}

// Merging the partials: a block of kTileChannels x kMergeRows threads takes 32 channels; row r
// merges splits r, r + kMergeRows, ... in order (reads coalesced across the channels), then the
// rows are merged in a fixed tree. One thread per channel walking all splits serially is far
// slower where there are many splits (docs/performance.md).
constexpr int kMergeRows = 32;

// Call from every thread of a (kTileChannels, kMergeRows) block whose x-thread is channel
// blockIdx.x * kTileChannels + threadIdx.x; the merged value is valid in row 0.
template <class Acc>
__device__ Acc merge_partials_tile(const float* partials, uint32_t splits, uint32_t C) {
  __shared__ float shared[Acc::kFields][kMergeRows][kTileChannels];
  const uint32_t tx = threadIdx.x, ty = threadIdx.y, c = blockIdx.x * kTileChannels + tx;
  Acc acc = Acc::zero();
  if (c < C) {
    // Four partials loaded before any is merged (merged in the same order as one at a time):
    // a load per merge leaves a 512-split merge waiting on 16 latencies in turn.
    constexpr uint32_t U = 4;
    uint32_t s = ty;
    for (; s + (U - 1) * kMergeRows < splits; s += U * kMergeRows) {
      Acc part[U];
#pragma unroll
      for (uint32_t u = 0; u < U; ++u) part[u] = load_partial<Acc>(partials, splits, s + u * kMergeRows, C, c);
#pragma unroll
      for (uint32_t u = 0; u < U; ++u) acc.merge(part[u]);
    }
    for (; s < splits; s += kMergeRows) acc.merge(load_partial<Acc>(partials, splits, s, C, c));
  }
#pragma unroll
  for (int k = 0; k < Acc::kFields; ++k) shared[k][ty][tx] = acc.get(k);
  __syncthreads();
  merge_rows<Acc>(shared, ty * kTileChannels + tx, kTileChannels * kMergeRows);
  Acc total = Acc::zero();
#pragma unroll
  for (int k = 0; k < Acc::kFields; ++k) total.set(k, shared[k][0][tx]);
  return total;
}

inline dim3 merge_grid(uint32_t C) { return dim3(static_cast<unsigned>(ceil_div(C, kTileChannels))); }
inline dim3 merge_block() { return dim3(kTileChannels, kMergeRows); }

// Channel c's partials merged by one warp: lane l takes splits l, l + 32, ... in order and the
// lanes are merged in merge_rows' tree (lane r takes lane r + half): merge_partials_tile's sums
// in its order, so bitwise its result. Valid in lane 0.
template <class Acc>
__device__ Acc merge_partials_warp(const float* partials, uint32_t splits, uint32_t C, uint32_t c, uint32_t lane) {
  Acc acc = Acc::zero();
  constexpr uint32_t U = 4;
  uint32_t s = lane;
  for (; s + (U - 1) * 32 < splits; s += U * 32) {
    Acc part[U];
#pragma unroll
    for (uint32_t u = 0; u < U; ++u) part[u] = load_partial<Acc>(partials, splits, s + u * 32, C, c);
#pragma unroll
    for (uint32_t u = 0; u < U; ++u) acc.merge(part[u]);
  }
  for (; s < splits; s += 32) acc.merge(load_partial<Acc>(partials, splits, s, C, c));
  for (uint32_t half = 16; half > 0; half /= 2) {
    Acc other = Acc::zero();
#pragma unroll
    for (int k = 0; k < Acc::kFields; ++k) other.set(k, __shfl_down_sync(0xffffffffu, acc.get(k), half));
    if (lane < half) acc.merge(other);
  }
  return acc;
}

constexpr int kMergeWarpThreads = 256;  // 8 channels a block

// Merges of at most this many partials take a warp per channel (finish_partials_warp_kernel),
// longer ones a 32x32 block per 32 channels (finish_partials_kernel): the same result. The warp
// is faster for the few partials of small batches' layers, the block for long merges
// (docs/performance.md).
constexpr uint32_t kWarpMergeMaxSplits = 64;

template <class Acc, class Visit>
__global__ void __launch_bounds__(kReduceThreadsNchw)
    reduce_channels_nchw_kernel(Visit visit, ChannelGeometry g, uint32_t splits, uint32_t length, float* partials) {
  await_previous_kernel();
  __shared__ float shared[Acc::kFields][kReduceThreadsNchw][1];
  const uint32_t c = blockIdx.x, split = blockIdx.y, tid = threadIdx.x;
  const uint32_t begin = split * length, end = min(g.M, begin + length);

  Acc acc = Acc::zero();
  uint32_t j = begin + tid;
  if (j < end) {
    // Walk j = n*HW + i in steps of blockDim without dividing in the loop.
    uint32_t n = j / g.HW, i = j - n * g.HW;
    const uint32_t step_n = kReduceThreadsNchw / g.HW, step_i = kReduceThreadsNchw % g.HW;
    for (; j < end; j += kReduceThreadsNchw) {
      visit(acc, (static_cast<uint64_t>(n) * g.C + c) * g.HW + i, c);
      n += step_n;
      i += step_i;
      if (i >= g.HW) {
        i -= g.HW;
        ++n;
      }
    }
  }

#pragma unroll
  for (int k = 0; k < Acc::kFields; ++k) shared[k][tid][0] = acc.get(k);
  __syncthreads();
  merge_rows<Acc>(shared, tid, kReduceThreadsNchw);
  if (tid == 0) {
    Acc total = Acc::zero();
#pragma unroll
    for (int k = 0; k < Acc::kFields; ++k) total.set(k, shared[k][0][0]);
    store_partial(partials, total, splits, split, g.C, c);
  }
}

template <class Acc, class Visit>
__global__ void __launch_bounds__(kTileChannels* kTileRows)
    reduce_channels_nhwc_kernel(Visit visit, ChannelGeometry g, uint32_t splits, uint32_t length, float* partials) {
  await_previous_kernel();
  __shared__ float shared[Acc::kFields][kTileRows][kTileChannels];
  const uint32_t tx = threadIdx.x, ty = threadIdx.y;
  const uint32_t c = blockIdx.x * kTileChannels + tx, split = blockIdx.y;
  const uint32_t begin = split * length, end = min(g.M, begin + length);

  Acc acc = Acc::zero();
  if (c < g.C)
    for (uint32_t row = begin + ty; row < end; row += kTileRows) visit(acc, static_cast<uint64_t>(row) * g.C + c, c);

#pragma unroll
  for (int k = 0; k < Acc::kFields; ++k) shared[k][ty][tx] = acc.get(k);
  __syncthreads();
  merge_rows<Acc>(shared, ty * kTileChannels + tx, kTileChannels * kTileRows);
  if (ty == 0 && c < g.C) {
    Acc total = Acc::zero();
#pragma unroll
    for (int k = 0; k < Acc::kFields; ++k) total.set(k, shared[k][0][tx]);
    store_partial(partials, total, splits, split, g.C, c);
  }
}

// NHWC with V neighbouring channels per thread (one 16-byte load per operand and row): a block
// is kVecLanes x V channels by kVecRows rows. The scalar kernel above reads 2-byte elements
// 32 to a warp, far below memory bandwidth; this one reads whole 128-byte lines. The visitor
// splits a row into load(offset) (Visit::kUnroll rows are loaded before any is added: one row at
// a time leaves small batches waiting on one memory latency after another; more rows in flight
// cost registers, so visitors reading several tensors take fewer) and add(acc, loaded, channels),
// with channels(c0) the per-channel constants of channels c0 .. c0+V-1.
constexpr int kVecLanes = 8;
constexpr int kVecRows = 32;

// Adds rows `row`, row + kStride, ... (below `end`) of channels c0 .. c0+V-1 of an NHWC tensor
// with C channels to acc, Visit::kUnroll rows loaded before any is added.
template <int kStride, class Acc, class Visit, int V>
__device__ __forceinline__ void accumulate_rows(const Visit& visit, const typename Visit::Channels& channels,
                                                Acc (&acc)[V], uint32_t row, uint32_t end, uint32_t C, uint32_t c0) {
  constexpr int U = Visit::kUnroll;
  for (; row + (U - 1) * kStride < end; row += U * kStride) {
    typename Visit::Loaded rows[U];
#pragma unroll
    for (int u = 0; u < U; ++u) rows[u] = visit.load(static_cast<uint64_t>(row + u * kStride) * C + c0);
#pragma unroll
    for (int u = 0; u < U; ++u) visit.add(acc, rows[u], channels);
  }
  for (; row < end; row += kStride) visit.add(acc, visit.load(static_cast<uint64_t>(row) * C + c0), channels);
}

template <int kStride, class Acc, class Visit, int V>
__device__ __forceinline__ void accumulate_rows(const Visit& visit, Acc (&acc)[V], uint32_t row, uint32_t end,
                                                uint32_t C, uint32_t c0) {
  accumulate_rows<kStride>(visit, visit.channels(c0), acc, row, end, C, c0);
}

// accumulate_rows for rows in global memory, the same sums in the same order, with the loads of
// each group of Visit::kUnroll rows issued before the previous group is added: otherwise a
// thread's loads are in flight only while it waits, none while it adds, and the statistics pass
// (about six instructions per value) falls well short of the bandwidth the normalising pass, which
// reads and writes, reaches (docs/performance.md).
template <int kStride, class Acc, class Visit, int V>
__device__ __forceinline__ void accumulate_rows_prefetched(const Visit& visit, Acc (&acc)[V], uint32_t row,
                                                           uint32_t end, uint32_t C, uint32_t c0) {
  constexpr int U = Visit::kUnroll;
  using Loaded = typename Visit::Loaded;
  const typename Visit::Channels channels = visit.channels(c0);
  auto full_group = [&](uint32_t r) { return r + (U - 1) * kStride < end; };
  auto load_group = [&](Loaded(&rows)[U], uint32_t r) {
#pragma unroll
    for (int u = 0; u < U; ++u) rows[u] = visit.load(static_cast<uint64_t>(r + u * kStride) * C + c0);
  };
  auto add_group = [&](const Loaded(&rows)[U]) {
#pragma unroll
    for (int u = 0; u < U; ++u) visit.add(acc, rows[u], channels);
  };
  // Two groups of registers used in turn (no copies between them). The two halves of the loop
  // are written out: folded into one lambda called with (a, b) and (b, a), the kernels compile
  // to other register counts and run slower (docs/performance.md).
  Loaded a[U], b[U];
  if (full_group(row)) {
    load_group(a, row);
    row += U * kStride;
    while (true) {
      if (!full_group(row)) {
        add_group(a);
        break;
      }
      load_group(b, row);
      row += U * kStride;
      add_group(a);
      if (!full_group(row)) {
        add_group(b);
        break;
      }
      load_group(a, row);
      row += U * kStride;
      add_group(b);
    }
  }
  for (; row < end; row += kStride) visit.add(acc, visit.load(static_cast<uint64_t>(row) * C + c0), channels);
}

// partials layout: [Acc::kFields][splits][C].
template <class Acc>
inline size_t partials_floats(const ChannelGeometry& g, uint32_t splits) {
  return static_cast<size_t>(Acc::kFields) * splits * g.C;
}

template <class Acc, class Visit, int V>
__global__ void __launch_bounds__(kVecLanes* kVecRows)
    reduce_channels_nhwc_vec_kernel(Visit visit, ChannelGeometry g, uint32_t splits, uint32_t length, float* partials) {
  await_previous_kernel();
  constexpr int kCols = kVecLanes * V;
  __shared__ float shared[Acc::kFields][kVecRows][kCols];
  const uint32_t tx = threadIdx.x, ty = threadIdx.y;
  const uint32_t c_first = blockIdx.x * kCols, c0 = c_first + tx * V, split = blockIdx.y;
  const uint32_t begin = split * length, end = min(g.M, begin + length);

  Acc acc[V];
#pragma unroll
  for (int j = 0; j < V; ++j) acc[j] = Acc::zero();
  if (c0 < g.C) accumulate_rows_prefetched<kVecRows>(visit, acc, begin + ty, end, g.C, c0);

#pragma unroll
  for (int j = 0; j < V; ++j)
#pragma unroll
    for (int k = 0; k < Acc::kFields; ++k) shared[k][ty][tx * V + j] = acc[j].get(k);
  __syncthreads();
  const uint32_t lane = ty * kVecLanes + tx;  // 0 .. 255
  merge_rows<Acc>(shared, lane, kVecLanes * kVecRows);
  for (uint32_t ch = lane; ch < kCols; ch += kVecLanes * kVecRows) {
    const uint32_t c = c_first + ch;
    if (c >= g.C) continue;
    Acc total = Acc::zero();
#pragma unroll
    for (int k = 0; k < Acc::kFields; ++k) total.set(k, shared[k][0][ch]);
    store_partial(partials, total, splits, split, g.C, c);
  }
}

// Merges the partials and hands each channel's total to the Finish functor: one block of
// kTileChannels x kMergeRows threads per 32 channels. (Merging inside the reduction instead, in
// the last block of each channel tile to finish, is slower: the tail of fences, atomics and
// merges in that one block takes longer than this launch.)
// A Finish functor may have per-channel work that reads nothing the reduction writes:
// `Prepared prepare(c)`, run before the finish kernel waits for the reduction (launched early, it
// waits at await_previous_kernel) and handed back as finish(c, total, prepared).
template <class F, class = void>
struct HasPrepare : std::false_type {};
template <class F>
struct HasPrepare<F, std::void_t<decltype(&F::prepare)>> : std::true_type {};

struct NothingPrepared {};

template <class Finish>
__device__ __forceinline__ auto prepare_finish(const Finish& finish, uint32_t c, bool finisher) {
  if constexpr (HasPrepare<Finish>::value)
    return finisher ? finish.prepare(c) : typename Finish::Prepared{};
  else
    return NothingPrepared{};
}

template <class Finish, class Acc, class Prepared>
__device__ __forceinline__ void call_finish(const Finish& finish, uint32_t c, const Acc& total,
                                            const Prepared& prepared) {
  if constexpr (HasPrepare<Finish>::value)
    finish(c, total, prepared);
  else
    finish(c, total);
}

template <class Acc, class Finish>
__global__ void finish_partials_kernel(const float* partials, uint32_t splits, uint32_t C, Finish finish) {
  const uint32_t c = blockIdx.x * kTileChannels + threadIdx.x;
  const bool finisher = threadIdx.y == 0 && c < C;
  const auto prepared = prepare_finish(finish, c, finisher);
  await_previous_kernel();
  const Acc total = merge_partials_tile<Acc>(partials, splits, C);
  if (finisher) call_finish(finish, c, total, prepared);
}

template <class Acc, class Finish>
__global__ void __launch_bounds__(kMergeWarpThreads)
    finish_partials_warp_kernel(const float* partials, uint32_t splits, uint32_t C, Finish finish) {
  const uint32_t c = blockIdx.x * (kMergeWarpThreads / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  const auto prepared = prepare_finish(finish, c, c < C && lane == 0);
  await_previous_kernel();
  if (c >= C) return;  // whole warps: c is the same for all 32 lanes
  const Acc total = merge_partials_warp<Acc>(partials, splits, C, c, lane);
  if (lane == 0) call_finish(finish, c, total, prepared);
}

// Merges partials ([Acc::kFields][splits][C], from a reduction or from the kernel that wrote the
// tensor) in a fixed order and calls finish(c, total) once per channel, on the device.
template <class Acc, class Finish>
void finish_channels(const float* partials, uint32_t splits, uint32_t C, const Finish& finish, cudaStream_t stream) {
  if (splits <= kWarpMergeMaxSplits)
    launch_kernel(finish_partials_warp_kernel<Acc, Finish>, static_cast<unsigned>(ceil_div(C, kMergeWarpThreads / 32)),
                  kMergeWarpThreads, 0, stream, partials, splits, C, finish);
  else
    launch_kernel(finish_partials_kernel<Acc, Finish>, merge_grid(C), merge_block(), 0, stream, partials, splits, C,
                  finish);
  CUDA_CHECK_LAUNCH();
}

// Reduces every channel and calls finish(c, total) once per channel, on the device. partials:
// partials_floats<Acc>(g, splits) floats of scratch. vector_ok: the visitor's buffers are
// 16-byte aligned, so NHWC tensors whose channel count divides by Visit::kPack take the vector
// kernel.
template <class Acc, class Visit, class Finish>
void reduce_channels(const Visit& visit, const ChannelGeometry& g, uint32_t splits, float* partials,
                     const Finish& finish, cudaStream_t stream, bool vector_ok = false) {
  const uint32_t length = split_length(g, splits);
  constexpr int V = Visit::kPack;
  if (g.nhwc && vector_ok && g.C % V == 0) {
    dim3 grid(static_cast<unsigned>(ceil_div(g.C, kVecLanes * V)), splits);
    launch_kernel(reduce_channels_nhwc_vec_kernel<Acc, Visit, V>, grid, dim3(kVecLanes, kVecRows), 0, stream, visit, g,
                  splits, length, partials);
  } else if (g.nhwc) {
    dim3 grid(static_cast<unsigned>(ceil_div(g.C, kTileChannels)), splits);
    launch_kernel(reduce_channels_nhwc_kernel<Acc, Visit>, grid, dim3(kTileChannels, kTileRows), 0, stream, visit, g,
                  splits, length, partials);
  } else {
    dim3 grid(g.C, splits);
    launch_kernel(reduce_channels_nchw_kernel<Acc, Visit>, grid, kReduceThreadsNchw, 0, stream, visit, g, splits,
                  length, partials);
  }
  CUDA_CHECK_LAUNCH();
  finish_channels<Acc>(partials, splits, g.C, finish, stream);
}

// Channel of the element at physical offset i (for element-wise kernels over the whole tensor).
__device__ __forceinline__ uint32_t channel_of(uint32_t i, const ChannelGeometry& g) {
  return g.nhwc ? i % g.C : (i / g.HW) % g.C;
}

}  // namespace gpu
}  // namespace ge
