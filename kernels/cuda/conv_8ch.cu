// See conv_8ch.h. An implicit GEMM on Tensor Cores (mma.sync m16n8k16, fp32 accumulation):
// y (pixels x 64 channels) = patches (pixels x 128) * w^T (128 = 4 x 4 taps x 8 channels).
// Warp w of a block owns output channels 16w..16w+15: their weight fragments stay in its
// registers for the block's whole life, and the block walks tiles of 64 output pixels
// (conv_8ch_tile.cuh). Per tile the input footprint arrives in shared memory by cp.async (or,
// for 1- and 3-channel inputs, through registers: FootprintLoader), issued while the previous
// tile is computed; each warp reads its A fragments (16 pixels by one
// tap pair) straight from the footprint with ldmatrix. The result is rounded to half once (then
// passed through the fused activation, if any, exactly as the separate activation op would),
// staged in shared memory and written as whole 128-byte pixel rows.
#include <initializer_list>
#include <type_traits>

#include "activation_math.cuh"
#include "conv_8ch.h"
#include "conv_8ch_tile.cuh"
#include "ganengine/env_choice.h"
#include "vector_pack.cuh"

namespace ge {
namespace gpu {

namespace {

using namespace conv8;

// How a tile's input footprint reaches shared memory in the forward, by the channels the input
// holds:
//  - 8 (a padded tensor): every pixel is one 16-byte cp.async, issued while the block computes
//    the previous tile (issue); nothing is left to do afterwards (finish).
//  - fewer (the image batches as they come: 1 or 3 channels, whose 2- or 6-byte pixels cp.async
//    cannot move): issue loads the thread's share of pixels into registers, and finish, at the
//    start of the tile's own iteration (a whole iteration later, as far as cp.async reaches
//    ahead), writes them to shared memory as 16-byte pixels with zeros in the missing channels.
//    So the padding copy the convolution would otherwise need is never made, and the image
//    batch is held with its own channels. (The backward-filter reads 8-channel pixels only:
//    with this loader it was slower than a padding copy and the cp.async kernel; conv.cu.)
template <class T, int kC>
struct FootprintLoader {
  static_assert(kC >= 1 && kC < 8, "8-channel inputs take the cp.async loader");
  static constexpr int kPixels = (kMaxFootprint + kBlockThreads - 1) / kBlockThreads;  // per thread, at most
  static constexpr int kWords = (kC + 1) / 2;  // two channels a register: fewer registers, more blocks per SM
  uint32_t v[kPixels][kWords];

  // The thread's pixels are the footprint's chunks threadIdx.x, + blockDim.x, ...: walked as
  // load_footprint_async walks them (FootprintWalk::next; a division per pixel made this loader
  // slower than the padding copy it replaces).
  __device__ __forceinline__ void issue(const T* __restrict__ x, T*, const Tiling& tl, const FootprintWalk& walk,
                                        int n, int p0, int q0) {
    const int fr = footprint_rows(tl.rows), fc = footprint_cols(tl.cols);
    const uint16_t* xn = reinterpret_cast<const uint16_t*>(x) + static_cast<size_t>(n) * tl.H * tl.W * kC;
    int fr_i = walk.r0, fc_i = walk.c0;
#pragma unroll
    for (int k = 0; k < kPixels; ++k) {
      const int r = 2 * p0 - 1 + fr_i, c = 2 * q0 - 1 + fc_i;
      const bool inside = fr_i < fr && r >= 0 && r < tl.H && c >= 0 && c < tl.W;
      const uint16_t* px = xn + (static_cast<size_t>(inside ? r : 0) * tl.W + (inside ? c : 0)) * kC;
#pragma unroll
      for (int j = 0; j < kWords; ++j) {
        const uint32_t lo = inside ? __ldg(px + 2 * j) : 0u;
        const uint32_t hi = inside && 2 * j + 1 < kC ? __ldg(px + 2 * j + 1) : 0u;
        v[k][j] = lo | (hi << 16);
      }
      walk.next(fr_i, fc_i, fc);
    }
  }

  __device__ __forceinline__ void finish(T* in_s, const Tiling& tl, const FootprintWalk& walk) const {
    const int fr = footprint_rows(tl.rows), fc = footprint_cols(tl.cols);
    int fr_i = walk.r0, fc_i = walk.c0;
#pragma unroll
    for (int k = 0; k < kPixels; ++k) {
      if (fr_i >= fr) break;
      uint32_t word[4] = {};
#pragma unroll
      for (int j = 0; j < kWords; ++j) word[j] = v[k][j];
      *reinterpret_cast<uint4*>(in_s + (fr_i * fc + tl.footprint_slot(fc_i)) * 8) =
          make_uint4(word[0], word[1], word[2], word[3]);
      walk.next(fr_i, fc_i, fc);
    }
  }
};

template <class T>
struct FootprintLoader<T, 8> {
  __device__ __forceinline__ void issue(const T* __restrict__ x, T* in_s, const Tiling& tl, const FootprintWalk& walk,
                                        int n, int p0, int q0) {
    load_footprint_async(x, in_s, tl, walk, n, p0, q0);
  }
  __device__ __forceinline__ void finish(T*, const Tiling&, const FootprintWalk&) const {}
};

// Calls f with the channel count of the kernel instantiation for c (1, 3 or 8; the host checks
// c is one of them): `f(std::integral_constant<int, C>{})`.
template <class F>
void dispatch_channels(int c, F&& f) {
  if (c == 1)
    f(std::integral_constant<int, 1>{});
  else if (c == 3)
    f(std::integral_constant<int, 3>{});
  else
    f(std::integral_constant<int, 8>{});
}

constexpr int kOutStride = kGroupChannels + 8;  // halves per staged output row: +8 spreads rows over the banks
constexpr int kKSteps = kK / 16;                // mma k-steps: two taps each
constexpr int kMTiles = kTilePixels / 16;
// x (N, H, W, kC), w (K, 4, 4, 8), y (N, P, Q, K), all NHWC; channels kC..7 of x are zeros
// (FootprintLoader). Grid (blocks walking the tiles, channel groups of 64). The launch bounds ask
// for five blocks per SM with 8-channel inputs (96 registers, as the compiler chose them before
// there was a bound) and four with 1 or 3 channels (left alone, the register loader's variants
// took up to 158 registers: three blocks; bounded, 128 and a few spilled words).
template <class T, bool kActivation, int kC>
__global__ void __launch_bounds__(kBlockThreads, kC == 8 ? 5 : 4)
    conv_8ch_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, Tiling tl, int K,
                    ops::Activation act, float slope) {
  __shared__ alignas(16) T in_s[2][kMaxFootprint * 8];  // this tile's footprint and the next's
  __shared__ alignas(16) T out_s[kTilePixels * kOutStride];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;  // mma fragment row / column pair
  const int k0 = blockIdx.y * kGroupChannels + warp * 16;  // this warp's first output channel

  const FootprintWalk walk(tl);
  FootprintLoader<T, kC> footprint;
  int n, p0, q0;
  if (blockIdx.x < tl.total) {
    tl.locate(blockIdx.x, n, p0, q0);
    footprint.issue(x, in_s[0], tl, walk, n, p0, q0);
  }
  copy_async_commit();

  // B fragments (k x channel) of this warp's 16 channels, for every k-step: b0 holds k 2t, 2t+1
  // of channel g, b1 k 2t+8, 2t+9. A weight row is the 128 k of one channel.
  uint32_t b[kKSteps][2][2];
#pragma unroll
  for (int ks = 0; ks < kKSteps; ++ks)
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      const T* row = w + static_cast<size_t>(k0 + nt * 8 + g) * kK + ks * 16 + 2 * t;
      b[ks][nt][0] = *reinterpret_cast<const uint32_t*>(row);
      b[ks][nt][1] = *reinterpret_cast<const uint32_t*>(row + 8);
    }
  // Lane l addresses row l % 8 of matrix l / 8 in each ldmatrix: matrices (pixels 0-7, tap a),
  // (pixels 8-15, a), (0-7, a+1), (8-15, a+1) of a 16-pixel m-tile are a0..a3. Its footprint
  // pixel is pixel_base[mt] + tap_base[ks].
  const int ld_row = lane & 7, ld_mat = lane >> 3;
  int pixel_base[kMTiles], tap_base[kKSteps];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) pixel_base[mt] = tl.pixel_base(mt * 16 + (ld_mat & 1) * 8 + ld_row);
#pragma unroll
  for (int ks = 0; ks < kKSteps; ++ks) {
    const int tap = 2 * ks + (ld_mat >> 1);
    tap_base[ks] = tl.tap_offset(tap >> 2, tap & 3);
  }

  int buf = 0;
  for (int tile = blockIdx.x; tile < tl.total; tile += gridDim.x, buf ^= 1) {
    // This tile's footprint, issued an iteration ago, lands (registers to shared memory; nothing
    // to do for cp.async) before the next one's is issued. The next tile's goes into the other
    // buffer, which every thread finished reading before the previous tile's second barrier.
    footprint.finish(in_s[buf], tl, walk);
    const int next = tile + gridDim.x;
    if (next < tl.total) {
      int nn, np0, nq0;
      tl.locate(next, nn, np0, nq0);
      footprint.issue(x, in_s[buf ^ 1], tl, walk, nn, np0, nq0);
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
        ldmatrix_x4(a, in + (pixel_base[mt] + tap_base[ks]) * 8);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) mma_16816<T>(acc[mt][nt], a, b[ks][nt]);
      }

    // d0, d1: pixel g of the m-tile, channels 2t, 2t+1 of the n-tile; d2, d3: pixel g + 8.
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            float v = acc[mt][nt][2 * h + j];
            if (kActivation) v = activate(act, round_to<T>(v), slope);
            store_float(out_s + (mt * 16 + g + 8 * h) * kOutStride + warp * 16 + nt * 8 + 2 * t + j, v);
          }
    __syncthreads();
    const int kg = blockIdx.y * kGroupChannels;
    for (int i = tid; i < kTilePixels * (kGroupChannels / 8); i += kBlockThreads) {
      const int m = i / (kGroupChannels / 8), chunk = i % (kGroupChannels / 8);
      const int p = p0 + tl.row_of(m), q = q0 + tl.col_of(m);
      T* dst = y + ((static_cast<size_t>(n) * tl.P + p) * tl.Q + q) * K + kg + chunk * 8;
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(out_s + m * kOutStride + chunk * 8);
    }
  }
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
  const ops::Activation kind = act ? act->kind : ops::Activation::ReLU;
  const float slope = act ? act->negative_slope : 0.f;
  GE_DISPATCH_HALF(x.dtype(), T, {
    dispatch_channels(static_cast<int>(x.dim(1)), [&](auto channels) {
      constexpr int kC = decltype(channels)::value;
      auto kernel = act ? conv_8ch_kernel<T, true, kC> : conv_8ch_kernel<T, false, kC>;
      const dim3 grid(static_cast<unsigned>(grid_blocks(kernel, 0, x.device().index, tl.total)),
                      static_cast<unsigned>(K / kGroupChannels));
      kernel<<<grid, kBlockThreads, 0, stream_of(x)>>>(x.data_as<T>(), w.data_as<T>(), y.data_as<T>(), tl, K, kind,
                                                       slope);
    });
  });
  CUDA_CHECK_LAUNCH();
  return true;
}

}  // namespace gpu
}  // namespace ge
