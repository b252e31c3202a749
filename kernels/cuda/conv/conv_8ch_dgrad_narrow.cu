// See conv_8ch_dgrad_narrow.h. Backward-data of a 4x4, stride-2, pad-1 convolution into a dx
// with the image's 1 or 3 channels: dx (N, 2P, 2Q, C) from dy (N, P, Q, 64) and w (64, 4, 4, C or 8).
//
// conv_8ch_dgrad.cu computes every output pixel as a dot product over its dy footprint, for 8
// channels at once (the padded width), with dy's pixels read from shared memory again for each of
// the 16 (phase, tap) products: bound by shared-memory reads and mma.sync issue, it takes far
// longer than moving its bytes once would (docs/performance.md). This kernel turns the product
// around. Each dy pixel gives all 16 taps' contributions to the C channels of the output pixels
// it reaches, 16C values: a product of the weights arranged as a (16C x K) matrix with a (K x 8)
// slab of eight neighbouring dy pixels, one m16n8k16 Tensor Core product per 16 of K and 16 rows
// of (tap, channel): C of them per 16 of K instead of 16 per 16 of K for the 8 padded channels.
// The weights stay in registers as the products' A fragments for the block's life; dy's pixels
// are read once, each thread copying its own K/4 channels of one pixel (into shared memory,
// cp.async, and back into its B fragments: no other thread reads them; the reduction's order
// within K is permuted to match, in A alike). The contributions go to shared memory in fp32; each
// output value then sums its four (two row taps by two column taps) in a fixed order, is rounded
// to the dtype once and written.
//
// A tile (a band) is R dy rows of one image, whole rows of up to 64 pixels. An item is eight dy
// pixels of a row. A warp loads all its items of a tile (three at most) before it computes any
// of them, and the next tile's while the block sums and writes this one's output. The rows'
// contributions sit in a ring of R + 2 row slots (a tile's rows in consecutive slots), so that
// a block walking consecutive bands of an image (NarrowWalk::kCarry) still has the last row of
// the band before when it writes output row 2 m0 - 1, which takes dy rows m0 - 1 and m0: a band
// computes its own R rows (and row -1 or P, zeros, at the image's edges) and writes output rows
// 2 m0 - 1 .. 2 m0 + 2R - 2. Where a block's run of bands begins, or with NarrowWalk::kHalo (each
// band writing its own 2R output rows from the dy rows just above and below it as well, as the
// neighbouring bands compute them again), the row above is computed again. With R = 4 (64 output
// columns) the halo walk computes 6 rows a band for 4.
//
// Against the padded kernel the same products are summed in another order (so close, not
// bitwise), and the fused activations are taken exactly as there: dy's activation gradient
// (D's LeakyReLU in G's pass through D) rounded to the dtype as activation_backward stores it,
// dx's activation (G's Tanh, or its gradient) on each value as rounded.
#include <climits>
#include <string>
#include <type_traits>

#include "core/fast_divmod.h"
#include "core/tuning_policy.h"
#include "cuda/activation_math.cuh"
#include "cuda/conv/conv_8ch_dgrad_narrow.h"
#include "cuda/conv/conv_8ch_dx_activation.cuh"
#include "cuda/conv/conv_8ch_tile.cuh"
#include "cuda/copy_async.cuh"
#include "cuda/kernel_launch.cuh"
#include "cuda/vector_pack.cuh"

namespace ge {
namespace gpu {

namespace {

using conv8::mma_16816;
using conv8::pack_pair;
using conv8::weight_bits;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kItemPixels = 8;    // dy pixels of an item: the product's n
constexpr int kTilePixels = 192;  // dy pixels a tile computes, halo rows included (24 items, 3 a warp)
// dy's channels, the reduction's length. With 128 (ndf 128) the weights' fragments would take
// twice the registers, one block an SM: conv_8ch_dgrad.cu keeps that width.
constexpr int kReduction = 64;

struct NarrowTiling {
  int P = 0, Q = 0, H = 0, W = 0;  // dy's and dx's sizes
  int rows = 0;                    // R: dy rows whose 2R output rows a tile writes
  int groups = 0;                  // items a dy row: Q / 8
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
// Output pixel pairs a thread writes a tile, at most: 2R + 1 rows of Q pairs (an image's last
// band, carried), R at most 192 / Q - 2, Q at least 8.
constexpr int kPairsPerThread = (2 * kTilePixels - 3 * kItemPixels + kThreads - 1) / kThreads;

// A tile's dy rows in shared memory and the output rows it writes (see the top of the file).
struct TileRows {
  int n;          // image
  int low;        // the lowest dy row it reads, m0 - 1
  int first;      // the first it computes: low, or m0 where the block's previous band left low
  int last;       // the last it computes (-1 and P are zeros)
  int out_begin;  // output rows out_begin .. out_end - 1
  int out_end;
};
// follows: the block's previous tile was the band before this one (kCarry's run).
__device__ __forceinline__ TileRows tile_rows(const NarrowTiling& tl, int tile, bool carry, bool follows) {
  TileRows r;
  int m0;
  tl.locate(tile, r.n, m0);
  r.low = m0 - 1;
  if (carry) {
    const bool last_band = m0 + tl.rows >= tl.P;
    r.first = follows && m0 > 0 ? m0 : m0 - 1;
    r.last = last_band ? tl.P : m0 + tl.rows - 1;
    r.out_begin = max(2 * m0 - 1, 0);
    r.out_end = last_band ? tl.H : 2 * (m0 + tl.rows) - 1;
  } else {
    r.first = m0 - 1;
    r.last = m0 + tl.rows;
    r.out_begin = 2 * m0;
    r.out_end = min(2 * (m0 + tl.rows), tl.H);
  }
  return r;
}
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

__device__ __forceinline__ uint2 load_shared_8(uint32_t address) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(address));
  return v;
}

// A thread's 16-byte chunks of its dy pixel: chunk l (of K / 32) of thread t (of 4) holds channels
// 32l + 8t onwards, so that the four threads of a pixel read 64 neighbouring bytes with one
// instruction, whole 32-byte sectors. (Chunks 2t and 2t + 1, the obvious split, have each
// instruction read half of every sector it touches: twice the L2 traffic.)
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

// Eight codes' activation_signs_of_codes as the 16 bytes activation_gradient takes for y.
template <class T>
__device__ __forceinline__ uint4 signs_of_codes(uint2 codes) {
  const Pack<T, 8> y = activation_signs_of_codes<T>(codes);
  uint4 r;
  memcpy(&r, &y, sizeof(r));
  return r;
}

// dy (N, P, Q, 64), w (64, 4, 4, wc) with wc kC or 8, dx (N, 2P, 2Q, kC), NHWC; with
// kActivation, y_act (dy's shape) the activation's output and dy its gradient (kYCodes: that
// output as the FP8 codes whose sign bits tell y > 0, ops::conv2d_activation_forward's
// codes_only, in the first half of each y chunk's 16 bytes). Tile b is band
// b % bands of image b / bands (TileRows). With carry a block walks a run of consecutive tiles,
// else tiles blockIdx.x, + gridDim.x, ...; either way with the weights' fragments built once:
// built for each tile (a block a tile), their 96 scattered 2-byte loads a thread would take much
// of the kernel's time (docs/performance.md).
template <class T, int kC, bool kActivation, bool kYCodes = false>
__global__ void __launch_bounds__(kThreads, 2)
    conv_8ch_dgrad_narrow_kernel(const T* __restrict__ dy, const T* __restrict__ w, T* __restrict__ dx, NarrowTiling tl,
                                 int wc, const std::conditional_t<kYCodes, uint8_t, T>* __restrict__ y_act,
                                 ops::Activation act, float slope, DxActivationArgs<T> dx_act, bool carry) {
  constexpr int kK = kReduction;
  constexpr int kRows = 16 * kC;      // the product's rows: (tap, channel), row tap * kC + channel
  constexpr int kMTiles = kC;         // of 16 rows
  constexpr int kSteps = kK / 16;     // of the reduction
  constexpr int kShare = kK / 4;      // channels of its pixel a thread loads
  constexpr int kLoads = kShare / 8;  // 16-byte loads of them
  // Floats a dy pixel's contributions take in shared memory: 3 more than its rows, an odd
  // number, so that the output's reads (32 neighbouring pixels at one offset) meet no bank twice;
  // the accumulator fragments' stores (pixels 2t, 2t + 1 and rows g, g + 8 of lane 4g + t) meet
  // each bank at most twice. (An even stride makes the stores conflict-free and the reads 4-way.)
  constexpr int kStride = kRows + 3;
  static_assert(kTilePixels * kStride * sizeof(float) == contributions_bytes<kC>(), "the layout below");
  constexpr int kItemsPerWarp = kTilePixels / kItemPixels / kWarps;  // a tile has at most 24 items
  extern __shared__ __align__(16) unsigned char smem[];
  float* const contributions = reinterpret_cast<float*>(smem);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;  // fragment row (pixel) group and thread in group
  // A thread's dy chunks (then y's) of its items, copied while the block writes the previous
  // tile's output and read back by the same thread only: shared memory in place of the 48
  // registers they would take (the kernel would spill). Chunk l of item i of lane `lane` of warp
  // `warp`: neighbouring lanes read neighbouring 16 bytes.
  const uint32_t stage = shared_address(smem + contributions_bytes<kC>());
  auto chunk_at = [&](int tensor, int i, int l) {
    return stage + ((((tensor * kItemsPerWarp + i) * kLoads + l) * kWarps + warp) * 32 + lane) * 16;
  };
  // y's word w of the thread's k-th output pixel pair of the tile (loaded early: loaded as dx is
  // written, they would hold up the writes).
  const uint32_t y_words = stage + staged_chunks_bytes<kC, kActivation>() + tid * 4;
  auto y_word_at = [&](int k, int w) { return y_words + (k * kC + w) * kThreads * 4; };
  await_previous_kernel();

  // Item i of a warp is the tile's item warp + 8i: dy row first + item_row[i], eight pixels from
  // q0[i]. Zeros above and below the image.
  int item_row[kItemsPerWarp], q0[kItemsPerWarp];
#pragma unroll
  for (int i = 0; i < kItemsPerWarp; ++i) {
    const int item = warp + i * kWarps;
    item_row[i] = item / tl.groups;
    q0[i] = (item - item_row[i] * tl.groups) * kItemPixels;
  }
  auto items_of = [&](const TileRows& r) { return (r.last - r.first + 1) * tl.groups; };
  auto load_tile = [&](const TileRows& r) {
    const int items = items_of(r);
#pragma unroll
    for (int i = 0; i < kItemsPerWarp; ++i) {
      if (warp + i * kWarps >= items) break;  // the same for the whole warp
      const int m = r.first + item_row[i];
      const bool inside = m >= 0 && m < tl.P;
      const size_t at = inside ? ((static_cast<size_t>(r.n) * tl.P + m) * tl.Q + q0[i] + g) * kK : 0;
#pragma unroll
      for (int l = 0; l < kLoads; ++l) {
        copy_async_16(chunk_at(0, i, l), dy + at + chunk_channel(t, l), inside);
        if constexpr (kActivation && kYCodes)
          copy_async_8(chunk_at(1, i, l), y_act + at + chunk_channel(t, l), inside);
        else if constexpr (kActivation)
          copy_async_16(chunk_at(1, i, l), y_act + at + chunk_channel(t, l), inside);
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

  // The ring slot of dy row `row` of a tile whose lowest row `low` sits in low_slot.
  const int ring = tl.rows + 2;
  auto slot_of = [&](int row, int low, int low_slot) {
    const int slot = low_slot + row - low;
    return slot >= ring ? slot - ring : slot;
  };
  // Output row 2m sums dy row m at row tap 1 and row m - 1 at tap 3; row 2m + 1, row m + 1 at
  // tap 0 and row m at tap 2. Column 2j sums dy column j at column tap 1 and j - 1 at tap 3;
  // column 2j + 1, j + 1 at tap 0 and j at tap 2; nothing from outside the image's columns. So a
  // pair reads, of each of its two rows, dy columns j - 1, j and j + 1 at one row tap: from one
  // base address, at fixed offsets.
  auto pair_values = [&](int o, int j, int low, int low_slot, float(&out)[2][kC]) {
    const int a = o >> 1;
    const int s1 = slot_of((o & 1) ? a + 1 : a, low, low_slot), kh1 = (o & 1) ? 0 : 1;
    const int s2 = slot_of((o & 1) ? a : a - 1, low, low_slot), kh2 = (o & 1) ? 2 : 3;
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

  const int tiles = tl.images * tl.bands;
  int tile_begin = blockIdx.x, tile_end = tiles, tile_step = gridDim.x;
  if (carry) {
    tile_begin = static_cast<int>(static_cast<int64_t>(blockIdx.x) * tiles / gridDim.x);
    tile_end = static_cast<int>((static_cast<int64_t>(blockIdx.x) + 1) * tiles / gridDim.x);
    tile_step = 1;
  }
  auto rows_of = [&](int tile) { return tile_rows(tl, tile, carry, tile != tile_begin); };
  // The first tile's chunks are on their way while the weights are read.
  if (tile_begin < tile_end) load_tile(rows_of(tile_begin));
  copy_async_commit();

  // The weights' kC channels, w_s[(k, tap, c)], in the contributions' space (free until the
  // first tile's items): neighbouring threads read neighbouring values, where each thread's 96
  // values gathered straight from w would be scattered 2-byte loads.
  uint16_t* const w_s = reinterpret_cast<uint16_t*>(smem);
  static_assert(kK * 16 * kC * 2 <= contributions_bytes<kC>(), "w's channels fit the contributions' space");
  for (int i = tid; i < kK * 16 * kC; i += kThreads)
    w_s[i] = static_cast<uint16_t>(weight_bits(w, i / (16 * kC), i / kC % 16, i % kC, wc));
  __syncthreads();
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
        a[mt][s][r] = w_s[(k * 16 + tap) * kC + c] | (static_cast<uint32_t>(w_s[((k + 1) * 16 + tap) * kC + c]) << 16);
      }
  __syncthreads();  // every thread has its fragments before the first items overwrite w_s

  int low_slot = 0;  // the slot of the tile's row `low`; any slot where a tile follows none
  for (int tile = tile_begin; tile < tile_end; tile += tile_step) {
    const TileRows r = rows_of(tile);
    const int items = items_of(r);
    copy_async_wait<0>();  // this thread's chunks of the tile
    // This tile's output words' y (with dx's activation gradient) are on their way while its
    // items are computed (the previous tile's output is written). Issued with the next tile's dy,
    // after the items, their wait would stand in the kernel's path.
    const int out_rows = r.out_end - r.out_begin;
    const size_t first_pixel = (static_cast<size_t>(r.n) * tl.H + r.out_begin) * tl.W;
    auto pair_at = [&](int lr, int j) { return (first_pixel + static_cast<size_t>(lr) * tl.W + 2 * j) * kC; };
    if (dx_act.gradient) {
#pragma unroll
      for (int k = 0, lr = pr0, j = pj0; k < kPairsPerThread; ++k, next_pair(lr, j))
#pragma unroll
        for (int w = 0; w < kC; ++w)
          if (lr < out_rows) copy_async_4(y_word_at(k, w), dx_act.y + pair_at(lr, j) + 2 * w, true);
    }
    copy_async_commit();
#pragma unroll
    for (int i = 0; i < kItemsPerWarp; ++i) {
      if (warp + i * kWarps >= items) break;  // the same for the whole warp
      uint4 v[kLoads];
#pragma unroll
      for (int l = 0; l < kLoads; ++l) {
        v[l] = load_shared_16(chunk_at(0, i, l));
        if constexpr (kActivation && kYCodes)
          v[l] = activation_gradient<T>(v[l], signs_of_codes<T>(load_shared_8(chunk_at(1, i, l))), act, slope);
        else if constexpr (kActivation)
          v[l] = activation_gradient<T>(v[l], load_shared_16(chunk_at(1, i, l)), act, slope);
      }
      float acc[kMTiles][4] = {};
#pragma unroll
      for (int s = 0; s < kSteps; ++s) {
        const uint32_t b[2] = {word_of(v[s / 2], 2 * (s % 2)), word_of(v[s / 2], 2 * (s % 2) + 1)};
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) mma_16816<T>(acc[mt], a[mt][s], b);
      }
      // Accumulator (row g + 8h, pixel 2t + e) of m-tile mt.
      const int slot = slot_of(r.first + item_row[i], r.low, low_slot);
      float* out = contributions + (slot * tl.Q + q0[i] + 2 * t) * kStride + g;
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int e = 0; e < 2; ++e) out[e * kStride + mt * 16 + 8 * h] = acc[mt][2 * h + e];
    }

    // The next tile's dy is on its way while the block sums and writes this tile's output (the
    // thread has read its chunks of this tile).
    if (tile + tile_step < tile_end) load_tile(rows_of(tile + tile_step));
    copy_async_commit();   // a group, empty on the block's last tile
    copy_async_wait<1>();  // the y words: all but the next tile's chunks
    __syncthreads();       // the tile's contributions are in

#pragma unroll
    for (int k = 0, lr = pr0, j = pj0; k < kPairsPerThread; ++k, next_pair(lr, j)) {
      if (lr >= out_rows) break;
      float out[2][kC];
      pair_values(r.out_begin + lr, j, r.low, low_slot, out);
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
    // The next band's row low is this band's last: R rows on in the ring.
    if (carry) low_slot = slot_of(r.low + tl.rows, r.low, low_slot);
  }
}

template <class T, int kC, bool kActivation, bool kYCodes = false>
void launch_narrow(const Tensor& dy, const Tensor& w, Tensor& dx, const NarrowTiling& tl, const Tensor* y_act,
                   ops::Activation act, float slope, const DxActivation* dx_act, NarrowWalk walk) {
  using YAct = std::conditional_t<kYCodes, uint8_t, T>;
  auto kernel = conv_8ch_dgrad_narrow_kernel<T, kC, kActivation, kYCodes>;
  const size_t smem = narrow_smem_bytes<kC, kActivation>();
  const int device = dy.device().index;
  conv8::allow_dynamic_smem(kernel, smem, device);
  const int tiles = tl.images * tl.bands;
  const int blocks = std::min(tiles, resident_blocks(kernel, kThreads, smem, device));
  const int64_t min_run = tuning().narrow_carry_min_bands_per_block;  // for NarrowWalk::kAuto to carry
  const bool carry = walk == NarrowWalk::kCarry || (walk == NarrowWalk::kAuto && tiles >= min_run * blocks);
  launch_kernel(kernel, static_cast<unsigned>(blocks), kThreads, smem, stream_of(dy), dy.data_as<T>(), w.data_as<T>(),
                dx.data_as<T>(), tl, static_cast<int>(w.dim(1)), y_act ? y_act->data_as<YAct>() : nullptr, act, slope,
                dx_activation_args<T>(dx_act), carry);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

bool conv2d_backward_data_narrow_applies(const Tensor& dy, const Tensor& dx) {
  return conv2d_backward_data_narrow_takes(dy.shape(), dx.shape());
}

bool conv2d_backward_data_narrow_takes(const Shape& dy, const Shape& dx) {
  NarrowTiling tl;
  return dy.size() == 4 && dx.size() == 4 && (dx[1] == 1 || dx[1] == 3) && dy[1] == kReduction &&
         choose_narrow_tiling(dy[0], dy[2], dy[3], dx[2], dx[3], tl);
}

bool conv2d_backward_data_narrow(const Tensor& dy, const Tensor& w, Tensor& dx, const ops::FusedActivation* act,
                                 const Tensor* y_act, const DxActivation* dx_act, NarrowWalk walk) {
  if (!conv2d_backward_data_narrow_applies(dy, dx)) return false;
  const int64_t C = dx.dim(1);
  NarrowTiling tl;
  choose_narrow_tiling(dy.dim(0), dy.dim(2), dy.dim(3), dx.dim(2), dx.dim(3), tl);
  const ops::Activation kind = act ? act->kind : ops::Activation::ReLU;
  const float slope = act ? act->negative_slope : 0.f;
  GE_DISPATCH_HALF(dy.dtype(), T, {
    const bool codes = act && y_act->dtype() == DType::U8;
    if (codes && C == 3)
      launch_narrow<T, 3, true, true>(dy, w, dx, tl, y_act, kind, slope, dx_act, walk);
    else if (codes)
      launch_narrow<T, 1, true, true>(dy, w, dx, tl, y_act, kind, slope, dx_act, walk);
    else if (act && C == 3)
      launch_narrow<T, 3, true>(dy, w, dx, tl, y_act, kind, slope, dx_act, walk);
    else if (act)
      launch_narrow<T, 1, true>(dy, w, dx, tl, y_act, kind, slope, dx_act, walk);
    else if (C == 3)
      launch_narrow<T, 3, false>(dy, w, dx, tl, nullptr, kind, slope, dx_act, walk);
    else
      launch_narrow<T, 1, false>(dy, w, dx, tl, nullptr, kind, slope, dx_act, walk);
  });
  return true;
}

}  // namespace gpu
}  // namespace ge
