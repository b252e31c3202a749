// See conv_8ch_dgrad_narrow.h. Backward-data of a 4x4, stride-2, pad-1 convolution into a dx
// with the image's 1 or 3 channels: dx (N, 2P, 2Q, C) from dy (N, P, Q, 64) and w (64, 4, 4, C or 8).
//
// conv_8ch_dgrad.cu computes every output pixel as a dot product over its dy footprint, for 8
// channels at once (the padded width), with dy's pixels read from shared memory again for each
// of the 16 (phase, tap) products: at batch 1024 its calls took 105 and 163 us (H200, ncu) where
// moving their bytes once would take some 45 and 90, bound by shared-memory reads and mma.sync
// issue. This kernel turns the product around. Each dy pixel gives all 16 taps' contributions
// to the C channels of the output pixels it reaches, 16C values: a product of the weights
// arranged as a (16C x K) matrix with a (K x 8) slab of eight neighbouring dy pixels, one
// m16n8k16 Tensor Core product per 16 of K and 16 rows of (tap, channel): C of them per 16 of K
// instead of 16 per 16 of K for the 8 padded channels. The weights stay in registers as the
// products' A fragments for the block's life; dy's pixels are read once, each thread copying
// its own K/4 channels of one pixel (into shared memory, cp.async, and back into its B fragments:
// no other thread reads them; the reduction's order within K is permuted to match, in A alike).
// The contributions go to shared memory in fp32; each output value then sums its four (two row
// taps by two column taps) in a fixed order, is rounded to the dtype once and written.
//
// A tile is R dy rows of one image (and the rows just above and below, whose contributions reach
// its first and last output rows: recomputed by the neighbouring tile too), whole rows of up to
// 64 pixels; its output is the 2R rows they give. An item is eight dy pixels of a row. A warp
// loads all its items of a tile (three at most) before it computes any of them, and the next
// tile's while the block sums and writes this one's output.
//
// Against the padded kernel the same products are summed in another order (so close, not
// bitwise), and the fused activations are taken exactly as there: dy's activation gradient
// (D's LeakyReLU in G's pass through D) rounded to the dtype as activation_backward stores it,
// dx's activation (G's Tanh, or its gradient) on each value as rounded.
#include <climits>

#include "activation_math.cuh"
#include "conv_8ch_dgrad_narrow.h"
#include "conv_8ch_dx_activation.cuh"
#include "conv_8ch_tile.cuh"
#include "copy_async.cuh"
#include "ganengine/fast_divmod.h"
#include "kernel_launch.cuh"
#include "vector_pack.cuh"

namespace ge {
namespace gpu {

namespace {

using conv8::mma_16816;
using conv8::pack_pair;
using conv8::weight_bits;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kItemPixels = 8;     // dy pixels of an item: the product's n
constexpr int kTilePixels = 192;   // dy pixels a tile computes, halo rows included (24 items, 3 a warp)
// dy's channels, the reduction's length. With 128 (ndf 128) the weights' fragments would take
// twice the registers, one block an SM: conv_8ch_dgrad.cu keeps that width.
constexpr int kReduction = 64;

struct NarrowTiling {
  int P = 0, Q = 0, H = 0, W = 0;  // dy's and dx's sizes
  int rows = 0;                    // R: dy rows whose 2R output rows a tile writes
  int groups = 0;                  // items a dy row: Q / 8
  int items = 0;                   // a tile's: (R + 2) x groups
  int bands = 0;                   // tiles (bands of dy rows) an image
  int images = 0;                  // N
  FastDivmod bands_div;            // by bands: a tile's image and band without a division
  // Tile `tile`'s image n and first dy row m0.
  __device__ __forceinline__ void locate(int tile, int& n, int& m0) const {
    uint32_t image, band;
    bands_div.divmod(static_cast<uint32_t>(tile), image, band);
    n = static_cast<int>(image);
    m0 = static_cast<int>(band) * rows;
  }
};

bool choose_narrow_tiling(int64_t N, int64_t P, int64_t Q, int64_t H, int64_t W, NarrowTiling& t) {
  if (H != 2 * P || W != 2 * Q || Q % kItemPixels != 0 || Q < kItemPixels || P < 1) return false;
  const int64_t rows = kTilePixels / Q - 2;
  if (rows < 1) return false;  // rows wider than 64 pixels
  const int64_t bands = (P + rows - 1) / rows;
  if (N * bands > INT_MAX || P * Q > (int64_t{1} << 24)) return false;
  t.P = static_cast<int>(P);
  t.Q = static_cast<int>(Q);
  t.H = static_cast<int>(H);
  t.W = static_cast<int>(W);
  t.rows = static_cast<int>(rows);
  t.groups = static_cast<int>(Q / kItemPixels);
  t.items = (t.rows + 2) * t.groups;
  t.bands = static_cast<int>(bands);
  t.bands_div = FastDivmod(static_cast<uint32_t>(bands));
  t.images = static_cast<int>(N);
  return true;
}

// Shared memory: a tile's contributions (16C floats a dy pixel and 3 more, see the kernel), then
// the staged dy (and y) chunks: three items a warp, K / 8 chunks of 16 bytes a thread an item.
template <int kC>
constexpr size_t contributions_bytes() {
  return static_cast<size_t>(kTilePixels) * (16 * kC + 3) * sizeof(float);
}
// Output pixel pairs a thread writes a tile, at most: 2R rows of Q pairs, R at most 192 / Q - 2,
// Q at least 8.
constexpr int kPairsPerThread = (2 * kTilePixels - 4 * kItemPixels + kThreads - 1) / kThreads;
template <int kC, bool kActivation>
constexpr size_t staged_chunks_bytes() {
  return (kActivation ? 2 : 1) * static_cast<size_t>(kTilePixels) * kReduction * 2;
}
// ... and last dx's activation output y at the thread's output words (with its gradient), kC
// words a pixel pair.
template <int kC, bool kActivation>
constexpr size_t narrow_smem_bytes() {
  return contributions_bytes<kC>() + staged_chunks_bytes<kC, kActivation>() +
         static_cast<size_t>(kPairsPerThread) * kC * kThreads * 4;
}

__device__ __forceinline__ uint32_t load_shared_4(uint32_t address) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(address));
  return v;
}
__device__ __forceinline__ uint4 load_shared_16(uint32_t address) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(address));
  return v;
}

// A thread's 16-byte chunks of its dy pixel: chunk l (of K / 32) of thread t (of 4) holds channels
// 32l + 8t onwards, so that the four threads of a pixel read 64 neighbouring bytes with one
// instruction, whole 32-byte sectors. (Chunks 2t and 2t + 1, the obvious split, had each
// instruction read half of every sector it touched: twice the L2 traffic, L2 83% busy.)
__device__ __forceinline__ int chunk_channel(int t, int l) { return 32 * l + 8 * t; }
// The channels k-step s takes from thread t for its B fragment: 4 of chunk s / 2, the first or
// second half; the reduction's order within K is so permuted, in A alike.
__device__ __forceinline__ int channel_of(int t, int s) { return chunk_channel(t, s / 2) + 4 * (s % 2); }

// Word i (0-3) of a 16-byte load: i is known when the loops are unrolled.
__device__ __forceinline__ uint32_t word_of(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// Eight dy values (one 16-byte load) turned into the activation's gradient given the eight
// activation outputs y, each rounded to T as activation_backward stores it.
template <class T>
__device__ __forceinline__ uint4 activation_gradient(const uint4& dy, const uint4& y, ops::Activation act,
                                                     float slope) {
  Pack<T, 8> d, yv;
  memcpy(&d, &dy, sizeof(dy));
  memcpy(&yv, &y, sizeof(y));
  const Pack<T, 8> out = activate_grad_pack(act, yv, d, slope);
  uint4 r;
  memcpy(&r, &out, sizeof(r));
  return r;
}

// dy (N, P, Q, 64), w (64, 4, 4, wc) with wc kC or 8, dx (N, 2P, 2Q, kC), NHWC; with
// kActivation, y_act (dy's shape) the activation's output and dy its gradient. Tile b (a band
// of dy rows) writes image b / bands' output rows 2R (b % bands) onwards; a block walks tiles
// blockIdx.x, + gridDim.x, ... with the weights' fragments built once: built for each tile (a
// block a tile), their 96 scattered 2-byte loads a thread were a third of the kernel's time at
// batch 1024 (270 us a call against 105 for conv_8ch_dgrad.cu, H200, ncu).
template <class T, int kC, bool kActivation>
__global__ void __launch_bounds__(kThreads, 2)
    conv_8ch_dgrad_narrow_kernel(const T* __restrict__ dy, const T* __restrict__ w, T* __restrict__ dx, NarrowTiling tl,
                                 int wc, const T* __restrict__ y_act, ops::Activation act, float slope,
                                 DxActivationArgs<T> dx_act) {
  constexpr int kK = kReduction;
  constexpr int kRows = 16 * kC;      // the product's rows: (tap, channel), row tap * kC + channel
  constexpr int kMTiles = kC;         // of 16 rows
  constexpr int kSteps = kK / 16;     // of the reduction
  constexpr int kShare = kK / 4;      // channels of its pixel a thread loads
  constexpr int kLoads = kShare / 8;  // 16-byte loads of them
  // Floats a dy pixel's contributions take in shared memory: 3 more than its rows, an odd
  // number, so that the output's reads (32 neighbouring pixels at one offset) meet no bank twice;
  // the accumulator fragments' stores (pixels 2t, 2t + 1 and rows g, g + 8 of lane 4g + t) meet
  // each bank at most twice. (An even stride made the stores conflict-free and the reads 4-way.)
  constexpr int kStride = kRows + 3;
  static_assert(kTilePixels * kStride * sizeof(float) == contributions_bytes<kC>(), "the layout below");
  constexpr int kItemsPerWarp = kTilePixels / kItemPixels / kWarps;  // a tile has at most 24 items
  extern __shared__ __align__(16) unsigned char smem[];
  float* const contributions = reinterpret_cast<float*>(smem);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;  // fragment row (pixel) group and thread in group
  // A thread's dy chunks (then y's) of its items, copied while the block writes the previous
  // tile's output and read back by the same thread only: shared memory in place of the 48
  // registers they took (the kernel spilled). Chunk l of item i of lane `lane` of warp `warp`:
  // neighbouring lanes read neighbouring 16 bytes.
  const uint32_t stage = shared_address(smem + contributions_bytes<kC>());
  auto chunk_at = [&](int tensor, int i, int l) {
    return stage + ((((tensor * kItemsPerWarp + i) * kLoads + l) * kWarps + warp) * 32 + lane) * 16;
  };
  // y's word w of the thread's k-th output pixel pair of the tile (loaded as dx was written, the
  // loads took 8% of the kernel's time at batch 1024).
  const uint32_t y_words = stage + staged_chunks_bytes<kC, kActivation>() + tid * 4;
  auto y_word_at = [&](int k, int w) { return y_words + (k * kC + w) * kThreads * 4; };
  await_previous_kernel();

  // Item i of a warp is the tile's item warp + 8i: dy row slot[i] (m0 - 1 + slot), eight
  // pixels from q0[i]; the same in every tile. Zeros above and below the image.
  int slot[kItemsPerWarp], q0[kItemsPerWarp];
#pragma unroll
  for (int i = 0; i < kItemsPerWarp; ++i) {
    const int item = warp + i * kWarps;
    slot[i] = item / tl.groups;
    q0[i] = (item - slot[i] * tl.groups) * kItemPixels;
  }
  auto load_tile = [&](int tile) {
    int n, m0;
    tl.locate(tile, n, m0);
#pragma unroll
    for (int i = 0; i < kItemsPerWarp; ++i) {
      const int m = m0 - 1 + slot[i];
      const bool inside = warp + i * kWarps < tl.items && m >= 0 && m < tl.P;
      const size_t at = inside ? ((static_cast<size_t>(n) * tl.P + m) * tl.Q + q0[i] + g) * kK : 0;
#pragma unroll
      for (int l = 0; l < kLoads; ++l) {
        copy_async_16(chunk_at(0, i, l), dy + at + chunk_channel(t, l), inside);
        if constexpr (kActivation) copy_async_16(chunk_at(1, i, l), y_act + at + chunk_channel(t, l), inside);
      }
    }
  };

  // A thread's output pixel pairs, the same in every tile: pair j (columns 2j, 2j + 1) of output
  // row lr, neighbouring threads writing neighbouring pairs (Q pairs a row, at most 64).
  const int pr0 = tid / tl.Q, pj0 = tid - pr0 * tl.Q;
  const int pair_step_rows = kThreads / tl.Q, pair_step_cols = kThreads - pair_step_rows * tl.Q;
  auto next_pair = [&](int& lr, int& j) {
    lr += pair_step_rows;
    j += pair_step_cols;
    if (j >= tl.Q) j -= tl.Q, ++lr;
  };

  // Output row 2m (m = m0 + a) sums dy row m at row tap 1 and row m - 1 at tap 3; row 2m + 1,
  // row m + 1 at tap 0 and row m at tap 2 (slot = dy row - m0 + 1). Column 2j sums dy column j
  // at column tap 1 and j - 1 at tap 3; column 2j + 1, j + 1 at tap 0 and j at tap 2; nothing
  // from outside the image's columns. So a pair reads, of each of its two slots, dy columns j - 1,
  // j and j + 1 at one row tap: from one base address, at fixed offsets.
  auto pair_values = [&](int lr, int j, float(&out)[2][kC]) {
    const int a = lr >> 1;
    const int s1 = (lr & 1) ? a + 2 : a + 1, kh1 = (lr & 1) ? 0 : 1;
    const int s2 = (lr & 1) ? a + 1 : a, kh2 = (lr & 1) ? 2 : 3;
    const float* r1 = contributions + (s1 * tl.Q + j) * kStride + kh1 * 4 * kC;  // (slot, column j, row tap)
    const float* r2 = contributions + (s2 * tl.Q + j) * kStride + kh2 * 4 * kC;
    const bool left = j > 0, right = j + 1 < tl.Q;
#pragma unroll
    for (int ch = 0; ch < kC; ++ch) {
      // [column tap kw of column j + dj] = r[dj * kStride + kw * kC + ch]
      out[0][ch] = (r1[kC + ch] + (left ? r1[-kStride + 3 * kC + ch] : 0.f)) +
                   (r2[kC + ch] + (left ? r2[-kStride + 3 * kC + ch] : 0.f));
      out[1][ch] =
          ((right ? r1[kStride + ch] : 0.f) + r1[2 * kC + ch]) + ((right ? r2[kStride + ch] : 0.f) + r2[2 * kC + ch]);
    }
  };

  // The first tile's chunks are on their way while the weights are read.
  const int tiles = tl.images * tl.bands;
  if (blockIdx.x < tiles) load_tile(blockIdx.x);
  copy_async_commit();

  // A fragments: rows (tap, channel) g and g + 8 of each m-tile, the reduction's positions 2t,
  // 2t + 1 (+8) of k-step s being channels channel_of(t, s) + (0, 1) (+2, 3): the ones this
  // thread loads of its dy pixel for its B fragment.
  uint32_t a[kMTiles][kSteps][4];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int s = 0; s < kSteps; ++s)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int row = mt * 16 + g + (r & 1) * 8, k = channel_of(t, s) + (r >> 1) * 2;
        const int tap = row / kC, c = row % kC;
        a[mt][s][r] = weight_bits(w, k, tap, c, wc) | (weight_bits(w, k + 1, tap, c, wc) << 16);
      }

  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    int n, m0;
    tl.locate(tile, n, m0);
    copy_async_wait<0>();  // this thread's chunks of the tile
#pragma unroll
    for (int i = 0; i < kItemsPerWarp; ++i) {
      if (warp + i * kWarps >= tl.items) break;  // the same for the whole warp
      uint4 v[kLoads];
#pragma unroll
      for (int l = 0; l < kLoads; ++l) {
        v[l] = load_shared_16(chunk_at(0, i, l));
        if constexpr (kActivation) v[l] = activation_gradient<T>(v[l], load_shared_16(chunk_at(1, i, l)), act, slope);
      }
      float acc[kMTiles][4] = {};
#pragma unroll
      for (int s = 0; s < kSteps; ++s) {
        const uint32_t b[2] = {word_of(v[s / 2], 2 * (s % 2)), word_of(v[s / 2], 2 * (s % 2) + 1)};
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) mma_16816<T>(acc[mt], a[mt][s], b);
      }
      // Accumulator (row g + 8h, pixel 2t + e) of m-tile mt.
      float* out = contributions + (slot[i] * tl.Q + q0[i] + 2 * t) * kStride + g;
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int e = 0; e < 2; ++e) out[e * kStride + mt * 16 + 8 * h] = acc[mt][2 * h + e];
    }

    // This tile's output words' y (with dx's activation gradient) and the next tile's dy are on
    // their way while the block sums and writes this tile's output (the thread has read its
    // chunks of this tile).
    const int out_rows = min(2 * tl.rows, tl.H - 2 * m0);
    const size_t first_pixel = (static_cast<size_t>(n) * tl.H + 2 * m0) * tl.W;
    auto pair_at = [&](int lr, int j) { return (first_pixel + static_cast<size_t>(lr) * tl.W + 2 * j) * kC; };
    if (dx_act.gradient) {
#pragma unroll
      for (int k = 0, lr = pr0, j = pj0; k < kPairsPerThread; ++k, next_pair(lr, j))
#pragma unroll
        for (int w = 0; w < kC; ++w)
          if (lr < out_rows) copy_async_4(y_word_at(k, w), dx_act.y + pair_at(lr, j) + 2 * w, true);
    }
    copy_async_commit();
    if (tile + gridDim.x < tiles) load_tile(tile + gridDim.x);
    copy_async_commit();   // a group, empty on the block's last tile
    copy_async_wait<1>();  // the y words: all but the next tile's chunks
    __syncthreads();       // the tile's contributions are in

#pragma unroll
    for (int k = 0, lr = pr0, j = pj0; k < kPairsPerThread; ++k, next_pair(lr, j)) {
      if (lr >= out_rows) break;
      float out[2][kC];
      pair_values(lr, j, out);
      const float* flat = &out[0][0];  // the pair's 2 kC values in dx's order
      uint32_t* dst = reinterpret_cast<uint32_t*>(dx + pair_at(lr, j));
#pragma unroll
      for (int w = 0; w < kC; ++w) {
        uint32_t word = pack_pair<T>(flat[2 * w], flat[2 * w + 1]);
        if (dx_act.on) word = dx_act.apply(word, dx_act.gradient ? load_shared_4(y_word_at(k, w)) : 0u);
        dst[w] = word;
      }
    }
    __syncthreads();  // every thread has read the contributions
  }
}

template <class T, int kC, bool kActivation>
void launch_narrow(const Tensor& dy, const Tensor& w, Tensor& dx, const NarrowTiling& tl, const Tensor* y_act,
                   ops::Activation act, float slope, const DxActivation* dx_act) {
  auto kernel = conv_8ch_dgrad_narrow_kernel<T, kC, kActivation>;
  const size_t smem = narrow_smem_bytes<kC, kActivation>();
  const int device = dy.device().index;
  conv8::allow_dynamic_smem(kernel, smem, device);
  const int tiles = tl.images * tl.bands;
  const int blocks = std::min(tiles, resident_blocks(kernel, kThreads, smem, device));
  launch_kernel(kernel, static_cast<unsigned>(blocks), kThreads, smem, stream_of(dy), dy.data_as<T>(), w.data_as<T>(),
                dx.data_as<T>(), tl, static_cast<int>(w.dim(1)), y_act ? y_act->data_as<T>() : nullptr, act, slope,
                dx_activation_args<T>(dx_act));
  CUDA_CHECK_LAUNCH();
}

}  // namespace

bool conv2d_backward_data_narrow(const Tensor& dy, const Tensor& w, Tensor& dx, const ops::FusedActivation* act,
                                 const Tensor* y_act, const DxActivation* dx_act) {
  const int64_t C = dx.dim(1);
  if ((C != 1 && C != 3) || dy.dim(1) != kReduction) return false;
  NarrowTiling tl;
  if (!choose_narrow_tiling(dy.dim(0), dy.dim(2), dy.dim(3), dx.dim(2), dx.dim(3), tl)) return false;
  const ops::Activation kind = act ? act->kind : ops::Activation::ReLU;
  const float slope = act ? act->negative_slope : 0.f;
  GE_DISPATCH_HALF(dy.dtype(), T, {
    if (act && C == 3)
      launch_narrow<T, 3, true>(dy, w, dx, tl, y_act, kind, slope, dx_act);
    else if (act)
      launch_narrow<T, 1, true>(dy, w, dx, tl, y_act, kind, slope, dx_act);
    else if (C == 3)
      launch_narrow<T, 3, false>(dy, w, dx, tl, nullptr, kind, slope, dx_act);
    else
      launch_narrow<T, 1, false>(dy, w, dx, tl, nullptr, kind, slope, dx_act);
  });
  return true;
}

}  // namespace gpu
}  // namespace ge
