// See conv_8ch.h. Implicit GEMMs on Tensor Cores (mma.sync m16n8k16, fp32 accumulation):
// y (pixels x 64 channels) = patches (pixels x 4 x 4 taps x channels) * w^T. Warp w of a block
// owns output channels 16w..16w+15: their weight fragments stay in its registers for the block's
// whole life, and the block walks tiles of 64 output pixels (conv_8ch_tile.cuh). Per tile the
// input footprint arrives in shared memory while the previous tile is computed; each warp reads
// its A fragments (16 pixels by 16 of the reduction) straight from the footprint with ldmatrix.
// The result is rounded to the dtype once (then passed through the fused activation, if any,
// exactly as the separate activation op would), staged in shared memory and written as whole
// 128-byte pixel rows. One kernel, two kinds of input (policies below):
//  - 8-channel inputs (a padded tensor): a footprint pixel is 16 bytes, one tap of one output
//    pixel, copied by cp.async; the reduction is 16 taps x 8 = 128 long.
//  - 1- or 3-channel inputs (the image batches as they come): a footprint pixel is 4 channels, 8
//    bytes with zeros after the image's own, so one 16-byte ldmatrix row holds two neighbouring
//    taps and the reduction is 16 x 4 = 64 long: half the products, shared memory and ldmatrix
//    of reading the image as 8 channels, and no padding copy. D's first layer with its
//    LeakyReLU at batch 1024 (H200, ncu): 102 us a call, against 136 us reading 8-channel pixels
//    through registers (session 5's loader) and 93 us for an already padded input (no activation).
#include <initializer_list>
#include <type_traits>

#include "activation_math.cuh"
#include "conv_8ch.h"
#include "conv_8ch_tile.cuh"
#include "ganengine/env_choice.h"
#include "kernel_launch.cuh"
#include "vector_pack.cuh"

namespace ge {
namespace gpu {

namespace {

using namespace conv8;

// How a tile's input footprint reaches shared memory, and how the kernel reads it: the two
// kinds of input (see the top of this file) as policies of one kernel.
//
// PaddedInput: 8-channel pixels of 16 bytes, one cp.async each, stored in Tiling's order (even
// footprint columns first); a k-step of 16 is two taps of 8 channels, the reduction's order
// tap-major (w (K, 4, 4, 8) as it is in memory).
template <class T>
struct PaddedInput {
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
  static constexpr int kPixelHalves = 4;
  static constexpr int kKSteps = 4;
  static constexpr int kWeightHalfStep = 16;  // b1's k (2t + 8) is two taps (16 halves of w) on
  // Pairs per thread, at most: a footprint's rows x (cols + 2) pairs are at most 390 under
  // choose_tiling's 520-pixel bound, but 264 for every tiling but one-column tiles (Q = 1, left
  // to cuDNN); room for a fourth pair spilled registers.
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
};

constexpr int kOutStride = kGroupChannels + 8;  // halves per staged output row: +8 spreads rows over the banks
constexpr int kMTiles = kTilePixels / 16;
// x (N, H, W, 8 or kC), w (K, 4, 4, 8), y (N, P, Q, K), all NHWC. Grid (blocks walking the tiles,
// channel groups of 64). Five blocks per SM asked for: the padded kernel's 96 registers, as the
// compiler chose them unbounded (six, 80 registers, spilled in the narrow kernel with LeakyReLU).
template <class T, bool kActivation, class Input>
__global__ void __launch_bounds__(kBlockThreads, 5)
    conv_8ch_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, Tiling tl, int K,
                    ops::Activation act, float slope) {
  await_previous_kernel();
  constexpr int kKSteps = Input::kKSteps, kPixel = Input::kPixelHalves;
  __shared__ alignas(16) T in_s[2][kMaxFootprint * kPixel];  // this tile's footprint and the next's
  __shared__ alignas(16) T out_s[kTilePixels * kOutStride];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;  // mma fragment row / column pair
  const int k0 = blockIdx.y * kGroupChannels + warp * 16;  // this warp's first output channel

  Input input(tl);
  int n, p0, q0;
  if (blockIdx.x < tl.total) {
    tl.locate(blockIdx.x, n, p0, q0);
    input.issue(x, in_s[0], tl, n, p0, q0);
  }
  copy_async_commit();

  // B fragments (k x channel) of this warp's 16 channels, for every k-step: b0 holds k 2t, 2t+1
  // of channel g, b1 k 2t+8, 2t+9. A weight row is the 128 k of one channel.
  uint32_t b[kKSteps][2][2];
#pragma unroll
  for (int ks = 0; ks < kKSteps; ++ks)
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      const T* row = w + static_cast<size_t>(k0 + nt * 8 + g) * kK + Input::weight_k(ks, t);
      b[ks][nt][0] = *reinterpret_cast<const uint32_t*>(row);
      b[ks][nt][1] = *reinterpret_cast<const uint32_t*>(row + Input::kWeightHalfStep);
    }
  // Lane l addresses row l % 8 of matrix l / 8 in each ldmatrix: matrices (pixels 0-7, k 0-7),
  // (pixels 8-15, k 0-7), (0-7, k 8-15), (8-15, k 8-15) of a 16-pixel m-tile are a0..a3. Its
  // footprint pixel is pixel_base[mt] + tap_base[ks].
  const int ld_row = lane & 7, ld_mat = lane >> 3;
  int pixel_base[kMTiles], tap_base[kKSteps];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) pixel_base[mt] = Input::pixel_base(tl, mt * 16 + (ld_mat & 1) * 8 + ld_row);
#pragma unroll
  for (int ks = 0; ks < kKSteps; ++ks) tap_base[ks] = Input::tap_base(tl, ks, ld_mat >> 1);

  int buf = 0;
  for (int tile = blockIdx.x; tile < tl.total; tile += gridDim.x, buf ^= 1) {
    // This tile's footprint, issued an iteration ago, lands (registers to shared memory; nothing
    // to do for cp.async) before the next one's is issued. The next tile's goes into the other
    // buffer, which every thread finished reading before the previous tile's second barrier.
    input.finish(in_s[buf], tl);
    const int next = tile + gridDim.x;
    if (next < tl.total) {
      int nn, np0, nq0;
      tl.locate(next, nn, np0, nq0);
      input.issue(x, in_s[buf ^ 1], tl, nn, np0, nq0);
    }
    copy_async_commit();
    // Located again rather than carried over from the previous iteration: carrying it raised
    // the unfused kernel from 96 to 127 registers (fewer blocks per SM).
    tl.locate(tile, n, p0, q0);
    copy_async_wait<1>();  // this tile's footprint has landed (for this thread's copies)
    __syncthreads();       // ... and everyone's; out_s is free again
    const T* in = in_s[buf];

    float acc[kMTiles][2][4] = {};
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int ks = 0; ks < kKSteps; ++ks) {
        uint32_t a[4];
        ldmatrix_x4(a, in + (pixel_base[mt] + tap_base[ks]) * kPixel);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) mma_16816<T>(acc[mt][nt], a, b[ks][nt]);
      }

    // d0, d1: pixel g of the m-tile, channels 2t, 2t+1 of the n-tile; d2, d3: pixel g + 8. The
    // two channels are rounded and stored together (per value, these conversions and 2-byte
    // stores were a third of the fused kernel's issue slots: ncu source counters, batch 1024).
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float v0 = acc[mt][nt][2 * h], v1 = acc[mt][nt][2 * h + 1];
          if (kActivation) {  // ReLU or LeakyReLU (the host applies Tanh after the kernel)
            round_pair<T>(v0, v1);
            v0 = rectify(act, v0, slope);
            v1 = rectify(act, v1, slope);
          }
          *reinterpret_cast<uint32_t*>(out_s + (mt * 16 + g + 8 * h) * kOutStride + warp * 16 + nt * 8 + 2 * t) =
              pack_pair<T>(v0, v1);
        }
    __syncthreads();
    // The tile's first output in 64-bit arithmetic once, each pixel's offset from it in 32-bit
    // (within a tile's rows: far below 2^31).
    T* tile_y = y + ((static_cast<size_t>(n) * tl.P + p0) * tl.Q + q0) * K + blockIdx.y * kGroupChannels;
    for (int i = tid; i < kTilePixels * (kGroupChannels / 8); i += kBlockThreads) {
      const int m = i / (kGroupChannels / 8), chunk = i % (kGroupChannels / 8);
      T* dst = tile_y + (tl.row_of(m) * tl.Q + tl.col_of(m)) * K + chunk * 8;
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(out_s + m * kOutStride + chunk * 8);
    }
  }
}

// Calls f with a null pointer to the input policy for x's c channels (1, 3 or 8; the host checks
// c is one of them): `f(static_cast<Input*>(nullptr))`.
template <class T, class F>
void dispatch_input(int c, F&& f) {
  if (c == 1)
    f(static_cast<NarrowInput<T, 1>*>(nullptr));
  else if (c == 3)
    f(static_cast<NarrowInput<T, 3>*>(nullptr));
  else
    f(static_cast<PaddedInput<T>*>(nullptr));
}

}  // namespace

bool conv_8ch_enabled() {
  static const bool on = env_choice("GANENGINE_CONV_8CH", {"on", "off"}) == "on";
  return on;
}

bool conv8::tiling_for(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p, Tiling& tl) {
  if (!conv_8ch_enabled()) return false;
  const DType dt = x.dtype();
  if ((dt != DType::F16 && dt != DType::BF16) || w.dtype() != dt || y.dtype() != dt) return false;
  for (const Tensor* t : std::initializer_list<const Tensor*>{&x, &w, &y})
    if (t->rank() != 4 || t->format() != MemoryFormat::NHWC || !aligned16(t->data())) return false;
  const int64_t C = x.dim(1);
  if ((C != 1 && C != 3 && C != 8) || w.dim(1) != 8 || w.dim(2) != 4 || w.dim(3) != 4 || p.stride != 2 || p.pad != 1)
    return false;
  const int64_t K = w.dim(0);
  if (K % kGroupChannels != 0 || K / kGroupChannels > 65535 || y.dim(1) != K || y.dim(0) != x.dim(0)) return false;
  return choose_tiling(x.dim(0), x.dim(2), x.dim(3), y.dim(2), y.dim(3), tl);
}

bool conv2d_forward_8ch(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p,
                        const ops::FusedActivation* act) {
  Tiling tl;
  if (!tiling_for(x, w, y, p, tl)) return false;
  const int K = static_cast<int>(w.dim(0));
  // Tanh runs after the kernel, as the separate op: inside it, tanhf inlined at each of a
  // thread's 32 outputs made the kernel's code half again as long (26 KB against 17 KB), while
  // the fused LeakyReLU kernel's warps spent a fifth of their stalls waiting for instructions
  // (ncu, batch 1024). Without it, O3 steps were 1% shorter at batch 64 (H200, side by side).
  const ops::FusedActivation* fused = act && act->kind != ops::Activation::Tanh ? act : nullptr;
  const ops::Activation kind = fused ? fused->kind : ops::Activation::ReLU;
  const float slope = fused ? fused->negative_slope : 0.f;
  const int C = static_cast<int>(x.dim(1));
  // The narrow loader reads pixel pairs (W even) and holds a footprint's pairs in registers.
  if (C != 8 && (tl.W % 2 != 0 || footprint_rows(tl.rows) * (tl.cols + 2) >
                                      NarrowInput<__half, 1>::kPairs * kBlockThreads))
    return false;
  GE_DISPATCH_HALF(x.dtype(), T, {
    dispatch_input<T>(C, [&](auto input) {
      using Input = std::remove_pointer_t<decltype(input)>;
      auto kernel = fused ? conv_8ch_kernel<T, true, Input> : conv_8ch_kernel<T, false, Input>;
      const dim3 grid(static_cast<unsigned>(grid_blocks(kernel, 0, x.device().index, tl.total)),
                      static_cast<unsigned>(K / kGroupChannels));
      launch_kernel(kernel, grid, kBlockThreads, 0, stream_of(x), x.data_as<T>(), w.data_as<T>(), y.data_as<T>(), tl, K,
                    kind, slope);
    });
  });
  CUDA_CHECK_LAUNCH();
  if (act && !fused) gpu::activation_forward(act->kind, y, y, act->negative_slope);
  return true;
}

}  // namespace gpu
}  // namespace ge
