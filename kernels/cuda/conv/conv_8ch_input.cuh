// The two ways the 8-channel convolution kernels (conv_8ch.cu: forward, conv_8ch_wgrad.cu:
// backward-filter) read their 8-channel side x: an 8-channel tensor, or an image batch's own 1
// or 3 channels (no padding copy).
#pragma once
#include "cuda/conv/conv_8ch_tile.cuh"

namespace ge {
namespace gpu {
namespace conv8 {

// How a tile's input footprint reaches shared memory, and how the kernels read it: the two
// kinds of input (conv_8ch.cu's top comment) as policies of the forward and backward-filter
// kernels. The forward reads a k-step's A fragments (pixels x reduction) with ldmatrix, the
// backward-filter its B fragments (the same matrix, pixels along its k) with ldmatrix.trans.
//
// PaddedInput: 8-channel pixels of 16 bytes, one cp.async each, stored in Tiling's order (even
// footprint columns first); a k-step of 16 is two taps of 8 channels, the reduction's order
// tap-major (w (K, 4, 4, 8) as it is in memory).
template <class T>
struct PaddedInput {
  static constexpr bool kConverts = false;  // convert() after the copies land (RowsInput)
  static constexpr int kRawHalves = 0;      // staging after the footprint, per buffer (RowsInput)
  static constexpr int kPixelHalves = 8;
  static constexpr int kKSteps = 8;
  static constexpr int kWeightHalfStep = 8;  // b1's k (2t + 8) sits 8 halves after b0's
  FootprintWalk walk;
  __device__ explicit PaddedInput(const Tiling& tl) : walk(tl) {}
  __device__ __forceinline__ void issue(const T* __restrict__ x, T* in_s, const Tiling& tl, int n, int p0, int q0) {
    load_footprint_async(x, in_s, tl, walk, n, p0, q0);
  }
  __device__ __forceinline__ void finish(T*, const Tiling&) const {}
  // Where k 2t of k-step ks sits in a weight row.
  __device__ static int weight_k(int ks, int t) { return ks * 16 + 2 * t; }
  // The footprint pixel output pixel m reads at the first tap of k-step ks (+ k_half: the second).
  __device__ static int pixel_base(const Tiling& tl, int m) { return tl.pixel_base(m); }
  __device__ static int tap_base(const Tiling& tl, int ks, int k_half) {
    const int tap = 2 * ks + k_half;
    return tl.tap_offset(tap >> 2, tap & 3);
  }

  // Backward-filter: warp w's columns of dw (K x 128) are taps 4w .. 4w+3, one n-tile of 8
  // channels each; ldmatrix.trans load `load` gives n-tiles 2 load and 2 load + 1, reading the
  // footprint pixel pixel_base(m) + wgrad_tap_base(tl, w, load, k_half) (k_half: the second).
  static constexpr int kWgradNTiles = 4;
  static constexpr bool kWgradZeroUpper = false;
  __device__ static int wgrad_tap_base(const Tiling& tl, int warp, int load, int k_half) {
    const int tap = warp * 4 + 2 * load + k_half;
    return tl.tap_offset(tap >> 2, tap & 3);
  }
  // The dw column of n-tile nt's columns 2t, 2t + 1 (two channels of one tap).
  __device__ static int wgrad_column(int warp, int nt, int t) { return (warp * 4 + nt) * 8 + 2 * t; }
};

// NarrowInput: the image batch's kC (1 or 3) channels as 4-channel pixels of 8 bytes, stored
// row-major (footprint column fc_i holds input column 2 q0 - 1 + fc_i); a k-step of 16 is one
// filter row, its taps 0-1 in one ldmatrix row and 2-3 in the other (two neighbouring pixels,
// 16-byte aligned: the footprint's width is even and an output pixel's first tap column is). The
// reduction runs (r, s, c) over 4 channels; w (K, 4, 4, 8) holds zeros from channel kC on, and
// so does the footprint, so channel 3 adds nothing.
//
// Threads take pairs of neighbouring input pixels (columns 2k, 2k + 1: 2 kC halves in kC aligned
// 32-bit words, W being even), walked as GridWalk walks a grid: pair pk of footprint row
// fr_i is input pair q0 - 1 + pk, whose pixels land in footprint columns 2 pk - 1 and 2 pk (when
// inside the footprint). issue() loads the thread's pairs into registers an iteration ahead
// (cp.async cannot move 2- or 6-byte pixels); finish() stores them at the start of the tile's
// own iteration.
template <class T, int kC>
struct NarrowInput {
  static_assert(kC == 1 || kC == 3, "narrow inputs hold 1 or 3 channels");
  static constexpr bool kConverts = false;
  static constexpr int kRawHalves = 0;
  static constexpr int kPixelHalves = 4;
  static constexpr int kKSteps = 4;
  static constexpr int kWeightHalfStep = 16;  // b1's k (2t + 8) is two taps (16 halves of w) on
  // Pairs per thread, at most: a footprint's rows x (cols + 2) pairs are at most 390 under
  // choose_tiling's 520-pixel bound, but 264 for every tiling but one-column tiles (Q = 1, left
  // to cuDNN); room for a fourth pair spills registers.
  static constexpr int kPairs = 3;
  uint32_t v[kPairs][kC];
  GridWalk walk;  // over the footprint's rows of cols + 2 pairs

  __device__ explicit NarrowInput(const Tiling& tl) : walk(tl.cols + 2) {}

  __device__ __forceinline__ void issue(const T* __restrict__ x, T*, const Tiling& tl, int n, int p0, int q0) {
    const int fr = footprint_rows(tl.rows), per_row = tl.cols + 2, row_pairs = tl.W / 2;
    const uint32_t* xn = reinterpret_cast<const uint32_t*>(x) + static_cast<size_t>(n) * tl.H * row_pairs * kC;
    int r = walk.r0, c = walk.c0;
#pragma unroll
    for (int j = 0; j < kPairs; ++j) {
      const int row = 2 * p0 - 1 + r, pair = q0 - 1 + c;
      const bool inside = r < fr && row >= 0 && row < tl.H && pair >= 0 && pair < row_pairs;
      const uint32_t* src = xn + (static_cast<size_t>(inside ? row : 0) * row_pairs + (inside ? pair : 0)) * kC;
#pragma unroll
      for (int k = 0; k < kC; ++k) v[j][k] = inside ? __ldg(src + k) : 0u;
      walk.next(r, c, per_row);
    }
  }

  __device__ __forceinline__ void finish(T* in_s, const Tiling& tl) const {
    const int fr = footprint_rows(tl.rows), fc = footprint_cols(tl.cols), per_row = tl.cols + 2;
    int r = walk.r0, c = walk.c0;
#pragma unroll
    for (int j = 0; j < kPairs; ++j) {
      if (r >= fr) break;
      uint32_t h[2 * kC];  // the pair's halves, pixel-major
#pragma unroll
      for (int k = 0; k < kC; ++k) {
        h[2 * k] = v[j][k] & 0xffffu;
        h[2 * k + 1] = v[j][k] >> 16;
      }
#pragma unroll
      for (int px = 0; px < 2; ++px) {
        const int col = 2 * c - 1 + px;
        if (col < 0 || col >= fc) continue;
        const uint32_t ch0 = h[px * kC], ch1 = kC > 1 ? h[px * kC + 1] : 0u, ch2 = kC > 2 ? h[px * kC + 2] : 0u;
        *reinterpret_cast<uint2*>(in_s + (r * fc + col) * 4) = make_uint2(ch0 | (ch1 << 16), ch2);
      }
      walk.next(r, c, per_row);
    }
  }

  __device__ static int weight_k(int ks, int t) { return ks * 16 * 2 + (t >> 1) * 8 + 2 * (t & 1); }
  __device__ static int pixel_base(const Tiling& tl, int m) {
    return 2 * tl.row_of(m) * footprint_cols(tl.cols) + 2 * tl.col_of(m);
  }
  __device__ static int tap_base(const Tiling& tl, int ks, int k_half) {
    return ks * footprint_cols(tl.cols) + 2 * k_half;
  }

  // Backward-filter: warp w's columns are filter row w's four taps of 4 channels, two n-tiles
  // (taps 0-1, taps 2-3: a 16-byte footprint row each), both from one ldmatrix.trans. dw keeps
  // w's 8-channel layout: the kernel writes zeros to channels 4-7 (and channel 3 sums zeros).
  static constexpr int kWgradNTiles = 2;
  static constexpr bool kWgradZeroUpper = true;
  __device__ static int wgrad_tap_base(const Tiling& tl, int warp, int, int k_half) {
    return warp * footprint_cols(tl.cols) + 2 * k_half;
  }
  // n-tile nt's columns 2t, 2t + 1 are tap 2 nt + t / 2, channels 2 (t % 2) and the next.
  __device__ static int wgrad_column(int warp, int nt, int t) {
    return (warp * 4 + 2 * nt + (t >> 1)) * 8 + 2 * (t & 1);
  }
};

// RowsInput: NarrowInput's footprint, for tiles of whole output rows (cols == Q, so q0 is 0 and
// a footprint row is a whole input row with its two padding columns), reached another way. The
// footprint's input rows are contiguous in x and 16-byte aligned (W kC a multiple of 8), so they
// arrive as they are by cp.async, 16 bytes a copy, into a staging area after the footprint
// (zeros for rows outside the image); convert(), once they have landed, takes the thread's
// pairs from there as NarrowInput takes them from x and stores them as its finish() does. The
// same footprint, so the same products: bitwise NarrowInput's results. NarrowInput's 4-byte
// loads of 12-byte pairs use a third of each 32-byte sector they fetch, and their addresses and
// bounds cost the issue-bound forward instructions (docs/performance.md: the gain is small).
template <class T, int kC>
struct RowsInput : NarrowInput<T, kC> {
  using Narrow = NarrowInput<T, kC>;
  static constexpr bool kConverts = true;
  static constexpr int kRawHalves = 1536;  // footprint rows x W x kC, at most (rows_input_fits)
  static constexpr int kChunkSteps = 2;    // 16-byte copies a thread, at most
  static_assert(kRawHalves / 8 <= kChunkSteps * kBlockThreads, "the rows' copies must fit the threads");
  GridWalk chunks;  // over the footprint rows' 16-byte chunks, W kC / 8 a row

  __device__ explicit RowsInput(const Tiling& tl) : Narrow(tl), chunks(tl.W * kC / 8) {}

  __device__ static T* raw(T* in_s) { return in_s + kMaxFootprint * Narrow::kPixelHalves; }

  __device__ __forceinline__ void issue(const T* __restrict__ x, T* in_s, const Tiling& tl, int n, int p0, int) {
    const int fr = footprint_rows(tl.rows), row_halves = tl.W * kC, per_row = row_halves / 8;
    const T* xn = x + static_cast<size_t>(n) * tl.H * row_halves;
    const uint32_t staging = shared_address(raw(in_s));
    int r = chunks.r0, c = chunks.c0;
#pragma unroll
    for (int j = 0; j < kChunkSteps; ++j) {
      if (r < fr) {
        const int row = 2 * p0 - 1 + r;
        const bool inside = row >= 0 && row < tl.H;
        copy_async_16(staging + 2u * (r * row_halves + c * 8), xn + (inside ? row : 0) * row_halves + c * 8, inside);
      }
      chunks.next(r, c, per_row);
    }
  }
  __device__ __forceinline__ void finish(T*, const Tiling&) const {}

  // Once every thread's copies of this buffer have landed (a barrier after the wait).
  __device__ __forceinline__ void convert(T* in_s, const Tiling& tl) {
    const int fr = footprint_rows(tl.rows), per_row = tl.cols + 2, row_pairs = tl.W / 2;
    const uint32_t* rows = reinterpret_cast<const uint32_t*>(raw(in_s));
    int r = this->walk.r0, c = this->walk.c0;
#pragma unroll
    for (int j = 0; j < Narrow::kPairs; ++j) {
      const int pair = c - 1;
      const bool inside = r < fr && pair >= 0 && pair < row_pairs;
      const uint32_t* src = rows + (inside ? r * row_pairs + pair : 0) * kC;
#pragma unroll
      for (int k = 0; k < kC; ++k) this->v[j][k] = inside ? src[k] : 0u;
      this->walk.next(r, c, per_row);
    }
    Narrow::finish(in_s, tl);
  }
};

// Whether the narrow loader takes this tiling: it reads pixel pairs (W even) and holds a
// footprint's pairs in registers.
inline bool narrow_input_fits(const Tiling& tl) {
  return tl.W % 2 == 0 && footprint_rows(tl.rows) * (tl.cols + 2) <= NarrowInput<__half, 1>::kPairs * kBlockThreads;
}

// Whether RowsInput takes this tiling of an x with c (1 or 3) channels.
inline bool rows_input_fits(const Tiling& tl, int c) {
  return narrow_input_fits(tl) && tl.cols == tl.Q && (tl.W * c) % 8 == 0 &&
         footprint_rows(tl.rows) * tl.W * c <= RowsInput<__half, 1>::kRawHalves;
}

// Calls f with a null pointer to the input policy for x's c channels (1, 3 or 8; the host checks
// c is one of them) under tiling tl: `f(static_cast<Input*>(nullptr))`.
template <class T, class F>
void dispatch_input(int c, const Tiling& tl, F&& f) {
  const bool rows = (c == 1 || c == 3) && rows_input_fits(tl, c);
  if (c == 1 && rows)
    f(static_cast<RowsInput<T, 1>*>(nullptr));
  else if (c == 1)
    f(static_cast<NarrowInput<T, 1>*>(nullptr));
  else if (c == 3 && rows)
    f(static_cast<RowsInput<T, 3>*>(nullptr));
  else if (c == 3)
    f(static_cast<NarrowInput<T, 3>*>(nullptr));
  else
    f(static_cast<PaddedInput<T>*>(nullptr));
}

}  // namespace conv8
}  // namespace gpu
}  // namespace ge
