// See conv_8ch.h. Backward-data of the 8-channel layers' convolution: dx (N, 2P, 2Q, 8, or
// its first 1 or 3 channels) from dy (N, P, Q, K) and w (K, 4, 4, 8), K 64 or 128. It is D's
// first layer's input gradient and G's last layer's forward (a transposed convolution), which
// cuDNN runs with 64-channel tiles of which 8 are used, and then needs a copy trimming its 8
// channels to the image's 3; this kernel writes the image's channels directly
// (docs/performance.md). A dx with 1 or 3 channels from a dy with 64 (the default networks, as
// the layers run them) goes to conv_8ch_dgrad_narrow.cu, which computes only those channels;
// this kernel keeps an 8-channel dx and dy with 128 channels.
//
// A 4x4 stride-2 kernel splits into four 2x2 stride-1 ones, one per output phase (row parity
// py, column parity px): dx[2m+py][2j+px] sums dy[m+dm][j+dj] * w[r][s] over two row taps,
// (dm, r) = (0, 1) and (-1, 3) for py = 0, (+1, 0) and (0, 2) for py = 1, and two column taps
// alike. So an output pixel is a dot product of length 4 x K over dy pixels, for 8 channels at
// once: one m16n8k16 Tensor Core product covers 16 pixels, 16 of K and all 8 channels.
//
// A block's tile is 128 "phase pixels" (positions m, j: R rows of J columns of dy) with their
// four phases, 512 output pixels. Its dy footprint (R+2 by J+2 pixels, zeros outside) arrives in
// shared memory by cp.async while the block computes the previous tile (or after it: see
// kFootprintBuffers). A warp owns 32 phase pixels and all four phases: each of the nine shifts
// (dm, dj) of dy is read once (ldmatrix) and used by every phase and tap that reads it, 16
// products from 9 loads. The weights stay in shared memory for the block's life. Results are
// rounded to the dtype once, staged in the footprint's buffer and written as whole output rows.
//
// With an activation (D's first layer's LeakyReLU when only its input gradient is wanted: G's
// pass through D), dy is the activation's output gradient: the footprint of the activation's
// output y arrives beside dy's, and each thread turns the dy chunks it copied into the
// activation's gradient, rounded as activation_backward stores it, before the block reads them.
// Bitwise the two ops in sequence, without writing and re-reading that gradient (a 64-channel
// tensor, whose separate pass would sit on G's serial chain).
//
// An activation may also be taken on dx as it is written (conv_8ch.h's DxActivation), after each
// value is rounded to the dtype: G's Tanh on G's last layer's output, or Tanh's gradient on D's
// first layer's input gradient when that input is G's Tanh output. Bitwise the separate pass
// after the kernel, whose three passes over the image-sized tensor it saves.
#include <initializer_list>

#include "cuda/activation_math.cuh"
#include "cuda/aligned.h"
#include "cuda/conv/conv_8ch.h"
#include "cuda/conv/conv_8ch_dgrad_narrow.h"
#include "cuda/conv/conv_8ch_dx_activation.cuh"
#include "cuda/conv/conv_8ch_tile.cuh"
#include "cuda/kernel_launch.cuh"
#include "cuda/vector_pack.cuh"

namespace ge {
namespace gpu {

namespace {

using namespace conv8;

constexpr int kPhasePixels = 128;  // per tile: 4 warps x 2 m-tiles of 16
constexpr int kMaxPhaseCols = 32;  // J: Q when it is 8, 16 or 32, else 32-wide segments of a row

struct DgradTiling {
  int P = 0, Q = 0, H = 0, W = 0;         // dy's and dx's sizes
  int rows = 0, cols = 0, cols_log2 = 0;  // R, J
  int fc = 0, fp_pixels = 0;              // footprint columns J + 2, pixels (R + 2)(J + 2)
  int per_image = 0, total = 0;           // tiles
  FastDivmod per_image_div;               // by per_image
  FastDivmod segments_div;                // by Q / J, a row's tiles
  // Where tile t starts: image n, dy row m0 and column j0.
  __device__ __forceinline__ void locate(int t, int& n, int& m0, int& j0) const {
    locate_tile(per_image_div, segments_div, rows, cols, t, n, m0, j0);
  }
};

bool choose_dgrad_tiling(int64_t N, int64_t P, int64_t Q, int64_t H, int64_t W, DgradTiling& t) {
  if (H != 2 * P || W != 2 * Q || Q < 8) return false;
  // Eight neighbouring phase pixels lie in one dy row (one conflict-free ldmatrix).
  if (Q <= kMaxPhaseCols) {
    if ((Q & (Q - 1)) != 0) return false;
    t.cols = static_cast<int>(Q);
  } else {
    if (Q % kMaxPhaseCols != 0) return false;
    t.cols = kMaxPhaseCols;
  }
  t.rows = kPhasePixels / t.cols;
  if (P % t.rows != 0) return false;
  while ((1 << t.cols_log2) < t.cols) ++t.cols_log2;
  const int64_t per_image = (P / t.rows) * (Q / t.cols), total = per_image * N;
  // Offsets within one image's dy (at most 128 channels) in 32 bits.
  if (total > (int64_t{1} << 30) || P * Q > (int64_t{1} << 24)) return false;
  t.P = static_cast<int>(P);
  t.Q = static_cast<int>(Q);
  t.H = static_cast<int>(H);
  t.W = static_cast<int>(W);
  t.fc = t.cols + 2;
  t.fp_pixels = (t.rows + 2) * t.fc;
  t.per_image = static_cast<int>(per_image);
  t.total = static_cast<int>(total);
  t.per_image_div = FastDivmod(static_cast<uint32_t>(per_image));
  t.segments_div = FastDivmod(static_cast<uint32_t>(Q / t.cols));
  return true;
}

// The footprint of the largest tile (R = 4 rows of J = 32): the shared memory to allow for.
constexpr int kMaxFootprintPixels = (kPhasePixels / kMaxPhaseCols + 2) * (kMaxPhaseCols + 2);

// The weight tap (r for rows, s for columns) with which phase p reads shift index d (dm + 1),
// or -1 when it does not read that shift.
__host__ __device__ constexpr int tap_of(int p, int d) {
  return p == 0 ? (d == 0 ? 3 : d == 1 ? 1 : -1) : (d == 0 ? -1 : d == 1 ? 2 : 0);
}

// Footprint buffers: two, the next tile's footprint copied while this one computes; one with an
// activation and kK 64, the next tile's copied after this one's output is written. That leaves
// room for a third block an SM (shared memory: with two buffers and y's footprint, two blocks),
// which makes G's pass through D's first layer faster (docs/performance.md).
template <int kK, bool kActivation>
constexpr int kFootprintBuffers = (kActivation && kK == 64) ? 1 : 2;

template <int kK, bool kActivation>
constexpr size_t dgrad_smem_bytes(int fp_pixels) {
  // The weights, as 16 taps x 8 channels x kK (+8 halves a row: rows in different banks), then
  // the footprint buffers, and with an activation one for y's footprint.
  constexpr int kBuffers = kFootprintBuffers<kK, kActivation> + (kActivation ? 1 : 0);
  return (16 * 8 * (kK + 8) + kBuffers * static_cast<size_t>(fp_pixels) * kK) * 2;
}

// With 1 or 3 channels a tile's 512 output pixels are written two at a time, pair tid and pair
// tid + kBlockThreads of each thread, as kC 32-bit words each (pixels pair up along a row, so a
// pair starts at an even pixel: 4-byte aligned). For the activation's gradient a thread loads
// y's words of its pairs when the tile starts, so that they arrive while the tile computes:
// loaded as the words are written, they would hold up the writes.
constexpr int kPairsPerThread = 2 * kPhasePixels / kBlockThreads;
static_assert(kPairsPerThread * kBlockThreads == 2 * kPhasePixels, "whole pairs a thread");
constexpr int kMaxNarrowC = 3;
using PairWords = uint32_t[kPairsPerThread][kMaxNarrowC];

template <class T, class PixelAt>
__device__ __forceinline__ void load_pair_y_words(const DxActivationArgs<T>& act, int C, int tid,
                                                  const PixelAt& pixel_at, PairWords& words) {
#pragma unroll
  for (int k = 0; k < kPairsPerThread; ++k) {
    const size_t first = pixel_at(2 * (tid + k * kBlockThreads)) * C;
#pragma unroll
    for (int w = 0; w < kMaxNarrowC; ++w)
      if (w < C) words[k][w] = act.y_word(first + 2 * w);
  }
}

// Writes a tile's staged output pixels (8 channels each in out_s) with their first kC channels
// to dx, neighbouring threads writing neighbouring words; y_words: load_pair_y_words' with a
// gradient activation.
template <int kC, class T, class PixelAt>
__device__ __forceinline__ void write_pixel_pairs(const T* out_s, T* dx, int tid, const PixelAt& pixel_at,
                                                  const DxActivationArgs<T>& act, const PairWords& y_words) {
  const uint16_t* staged = reinterpret_cast<const uint16_t*>(out_s);
#pragma unroll
  for (int k = 0; k < kPairsPerThread; ++k) {
    const int pair = tid + k * kBlockThreads;
    const uint16_t* two = staged + pair * 16;
    uint32_t* dst = reinterpret_cast<uint32_t*>(dx + pixel_at(2 * pair) * kC);
#pragma unroll
    for (int w = 0; w < kC; ++w) {
      const int lo = 2 * w, hi = 2 * w + 1;  // halves of the pair's 2 kC, pixel-major
      const uint32_t word = two[(lo / kC) * 8 + lo % kC] | (static_cast<uint32_t>(two[(hi / kC) * 8 + hi % kC]) << 16);
      dst[w] = act.on ? act.apply(word, y_words[k][w]) : word;
    }
  }
}

// dy (N, P, Q, kK), w (kK, 4, 4, 8), dx (N, H, W, C), NHWC, C 1, 3 or 8; with kActivation, y_act
// (N, P, Q, kK) the activation's output and dy its gradient. One-dimensional grid of blocks
// walking the tiles.
// The launch bounds name the blocks an SM holds (shared memory is the limit: three with kK 64,
// one with 128), so the compiler may use the registers that leaves: left alone it chooses 96 and
// spills, slower than with 161 (docs/performance.md). (A single footprint buffer, four blocks an
// SM with kK 64, is no faster.)
template <class T, int kK, bool kActivation>
__global__ void __launch_bounds__(kBlockThreads, kK == 64 ? 3 : 1)
    conv_8ch_dgrad_kernel(const T* __restrict__ dy, const T* __restrict__ w, T* __restrict__ dx, DgradTiling tl, int C,
                          int wc, const T* __restrict__ y_act, ops::Activation act, float slope,
                          DxActivationArgs<T> dx_act) {
  await_previous_kernel();
  constexpr int kBuffers = kFootprintBuffers<kK, kActivation>;
  constexpr int kChunks = kK / 8;  // 16-byte chunks of a dy pixel
  constexpr int kWStride = kK + 8;
  constexpr int kPixelStep = kBlockThreads / kChunks;  // footprint pixels between a thread's chunks
  extern __shared__ __align__(16) unsigned char smem[];
  T* w_s = reinterpret_cast<T*>(smem);
  // Buffer b (computed, not an array: a runtime index would put it in local memory).
  auto in_s = [&](int b) { return w_s + 16 * 8 * kWStride + b * tl.fp_pixels * kK; };
  T* const y_s = in_s(kBuffers);  // with kActivation

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // The footprint's pixels are stored row-major, chunk c of pixel column fc at chunk c ^ (fc % 8):
  // eight neighbouring pixels' same chunk then fall in eight different banks. A thread copies
  // chunk `chunk` of every kPixelStep-th pixel, starting at pixel tid / kChunks.
  // The walk is the same for every tile but for where the footprint sits in dy, so it runs on
  // additions and 32-bit offsets within an image's dy (choose_dgrad_tiling), the destination as
  // a shared-memory address: this loop takes more of the kernel's issue slots than any other
  // part.
  const int chunk = tid % kChunks, first_pixel = tid / kChunks;
  const int first_row = first_pixel / tl.fc, first_col = first_pixel % tl.fc;
  // Both footprints of a tile (y's with kActivation) use the same offsets: a thread's own
  // copies are the chunks it later turns into the activation's gradient.
  auto issue = [&](int tile, uint32_t buf, uint32_t y_buf) {
    int n, m0, j0;
    tl.locate(tile, n, m0, j0);
    const size_t image = static_cast<size_t>(n) * tl.P * tl.Q * kK + chunk * 8;
    const T* dyn = dy + image;
    const T* yn = kActivation ? y_act + image : nullptr;
    int fcol = first_col;
    int r = m0 - 1 + first_row, c = j0 - 1 + first_col;            // the dy pixel footprint pixel px reads
    uint32_t offset = (first_pixel * kK + chunk * 8) * sizeof(T);  // in the buffer, unswizzled
    for (int px = first_pixel; px < tl.fp_pixels; px += kPixelStep) {
      const bool inside = static_cast<unsigned>(r) < static_cast<unsigned>(tl.P) &&
                          static_cast<unsigned>(c) < static_cast<unsigned>(tl.Q);
      const uint32_t pixel = inside ? (r * tl.Q + c) * kK : 0;
      // The swizzle, chunk ^ (fcol % 8) where chunk stood: the pixel's own bits start above the
      // chunk's (a pixel is 128 or 256 bytes).
      const uint32_t at = offset ^ ((fcol & 7) * 8 * sizeof(T));
      copy_async_16(buf + at, dyn + pixel, inside);
      if constexpr (kActivation) copy_async_16(y_buf + at, yn + pixel, inside);
      offset += kPixelStep * kK * sizeof(T);
      fcol += kPixelStep;
      c += kPixelStep;
      while (fcol >= tl.fc) {  // kPixelStep (8 or 16) may exceed a footprint row (J + 2, 10 at least)
        fcol -= tl.fc;
        c -= tl.fc;
        ++r;
      }
    }
  };

  const uint32_t in_s_address = shared_address(in_s(0)), buffer_bytes = tl.fp_pixels * kK * sizeof(T);
  const uint32_t y_address = shared_address(y_s);
  // The first tile's footprint is on its way while the weights are read.
  if (blockIdx.x < tl.total) issue(blockIdx.x, in_s_address, y_address);
  copy_async_commit();

  // w_s[tap][c][k] = w[k][tap][c], written once per block: a thread reads one (k, tap)'s 8
  // channels as one 16-byte load and stores them down a column of w_s, consecutive threads
  // taking consecutive k (neighbouring halves of a row: no bank conflicts). Reading w's halves
  // one at a time in w's order and storing each 72 halves from its neighbour's (8-way bank
  // conflicts) costs the kernel noticeably (docs/performance.md). A thread's loads
  // all go out before its stores (which might alias them, for all the compiler knows).
  constexpr int kWeightPacks = kK * 16 / kBlockThreads;
  if (wc == 8) {
    Pack<T, 8> w_packs[kWeightPacks];
#pragma unroll
    for (int j = 0; j < kWeightPacks; ++j) {
      const int i = tid + j * kBlockThreads, k = i % kK, tap = i / kK;
      w_packs[j] = *reinterpret_cast<const Pack<T, 8>*>(w + (k * 16 + tap) * 8);
    }
#pragma unroll
    for (int j = 0; j < kWeightPacks; ++j) {
      const int i = tid + j * kBlockThreads, k = i % kK, tap = i / kK;
#pragma unroll
      for (int c = 0; c < 8; ++c) w_s[(tap * 8 + c) * kWStride + k] = w_packs[j].v[c];
    }
  } else {  // w holds only dx's 1 or 3 channels (conv_8ch.h): read a value at a time
    uint16_t* w_bits = reinterpret_cast<uint16_t*>(w_s);
    for (int i = tid; i < kK * 16; i += kBlockThreads) {
      const int k = i % kK, tap = i / kK;
#pragma unroll
      for (int c = 0; c < 8; ++c)
        w_bits[(tap * 8 + c) * kWStride + k] = static_cast<uint16_t>(weight_bits(w, k, tap, c, wc));
    }
  }

  // A fragments: lane l gives row l % 8 of matrix l / 8 of each ldmatrix, the matrices being
  // (phase pixels 0-7, k 0-7), (8-15, k 0-7), (0-7, k 8-15), (8-15, k 8-15) of an m-tile. Its
  // footprint pixel at shift (0, 0) is pixel_base[mt]; its column's low bits are those of
  // ld_row (J is at least 8), which the swizzle needs.
  const int ld_row = lane & 7, ld_mat = lane >> 3, k_half = ld_mat >> 1;
  int pixel_base[2];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
    const int i = warp * 32 + mt * 16 + (ld_mat & 1) * 8 + ld_row;
    pixel_base[mt] = ((i >> tl.cols_log2) + 1) * tl.fc + (i & (tl.cols - 1)) + 1;
  }
  // B fragments (k x 8 channels) from w_s: lanes 0-7 address channel rows for k 0-7 of the
  // k-step, lanes 8-15 for k 8-15 (lanes 16-31 repeat them; ldmatrix .x2 ignores them).
  const uint32_t w_lane = shared_address(w_s + (lane & 7) * kWStride + ((lane >> 3) & 1) * 8);
  const int g = lane >> 2, t = lane & 3;  // accumulator fragment: pixel row g (+8), channels 2t, 2t+1

  // With kActivation: dy's chunks this thread copied into buffer b become the activation's
  // gradient (y's footprint holds the matching chunks), rounded to T as activation_backward
  // stores it; zeros outside dy stay zeros.
  auto activation_gradient = [&](int b) {
    T* in = in_s(b);
    int fcol = first_col;
    uint32_t offset = first_pixel * kK + chunk * 8;  // in halves, unswizzled
    for (int px = first_pixel; px < tl.fp_pixels; px += kPixelStep) {
      const uint32_t at = offset ^ ((fcol & 7) * 8);
      Pack<T, 8>* g = reinterpret_cast<Pack<T, 8>*>(in + at);
      *g = activate_grad_pack(act, *reinterpret_cast<const Pack<T, 8>*>(y_s + at), *g, slope);
      offset += kPixelStep * kK;
      fcol += kPixelStep;
      while (fcol >= tl.fc) fcol -= tl.fc;
    }
  };

  int buf = 0;
  for (int tile = blockIdx.x; tile < tl.total; tile += gridDim.x, buf ^= kBuffers - 1) {
    int n, m0, j0;
    tl.locate(tile, n, m0, j0);
    const int out_cols_log2 = tl.cols_log2 + 1;
    auto out_pixel = [&](int o) {  // index of output pixel o of the tile in dx, in pixels
      return (static_cast<size_t>(n) * tl.H + 2 * m0 + (o >> out_cols_log2)) * tl.W + 2 * j0 +
             (o & ((1 << out_cols_log2) - 1));
    };
    PairWords y_words;
    if (dx_act.gradient && C != 8) load_pair_y_words(dx_act, C, tid, out_pixel, y_words);
    copy_async_wait<0>();
    // A thread's own copies have landed: with an activation it turns them into the gradient.
    if constexpr (kActivation) activation_gradient(buf);
    // This tile's footprint (and gradient) is in for every thread; the other buffer's output is
    // written, and y's buffer read.
    __syncthreads();
    if (kBuffers == 2 && tile + gridDim.x < tl.total)
      issue(tile + gridDim.x, in_s_address + (buf ^ 1) * buffer_bytes, y_address);
    copy_async_commit();
    const uint32_t in = in_s_address + buf * buffer_bytes;  // ldmatrix addresses from one base

    float acc[2][2][2][4] = {};  // [py][px][m-tile][fragment]
#pragma unroll
    for (int sy = 0; sy < 3; ++sy)
#pragma unroll
      for (int sx = 0; sx < 3; ++sx) {
        const int shift = (sy - 1) * tl.fc + (sx - 1);
        const int swizzle = (ld_row + sx) & 7;  // (column + 1 + dj) % 8
#pragma unroll
        for (int ks = 0; ks < kK / 16; ++ks) {
          uint32_t a[2][4];
#pragma unroll
          for (int mt = 0; mt < 2; ++mt)
            ldmatrix_x4(a[mt], in + ((pixel_base[mt] + shift) * kK + (((2 * ks + k_half) ^ swizzle) * 8)) * sizeof(T));
#pragma unroll
          for (int py = 0; py < 2; ++py)
#pragma unroll
            for (int px = 0; px < 2; ++px) {
              const int r = tap_of(py, sy), s = tap_of(px, sx);
              if (r < 0 || s < 0) continue;
              uint32_t b[2];
              ldmatrix_x2(b, w_lane + ((r * 4 + s) * 8 * kWStride + ks * 16) * sizeof(T));
#pragma unroll
              for (int mt = 0; mt < 2; ++mt) mma_16816<T>(acc[py][px][mt], a[mt], b);
            }
        }
      }

    __syncthreads();       // every warp has read the footprint: its buffer stages the output
    T* out_s = in_s(buf);  // the tile's 2R x 2J output pixels, 8 channels each
#pragma unroll
    for (int py = 0; py < 2; ++py)
#pragma unroll
      for (int px = 0; px < 2; ++px)
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int i = warp * 32 + mt * 16 + g + 8 * h;
            const int o = ((2 * (i >> tl.cols_log2) + py) << (tl.cols_log2 + 1)) + 2 * (i & (tl.cols - 1)) + px;
            *reinterpret_cast<uint32_t*>(out_s + o * 8 + 2 * t) =
                pack_pair<T>(acc[py][px][mt][2 * h], acc[py][px][mt][2 * h + 1]);
          }
    __syncthreads();
    if (C == 8) {
      for (int o = tid; o < 4 * kPhasePixels; o += kBlockThreads) {
        const size_t first = out_pixel(o) * 8;
        uint4 v = *reinterpret_cast<const uint4*>(out_s + o * 8);
        if (dx_act.on) {
          v.x = dx_act.apply(v.x, dx_act.y_word(first));
          v.y = dx_act.apply(v.y, dx_act.y_word(first + 2));
          v.z = dx_act.apply(v.z, dx_act.y_word(first + 4));
          v.w = dx_act.apply(v.w, dx_act.y_word(first + 6));
        }
        *reinterpret_cast<uint4*>(dx + first) = v;
      }
    } else if (C == 3) {
      write_pixel_pairs<3>(out_s, dx, tid, out_pixel, dx_act, y_words);
    } else {
      write_pixel_pairs<1>(out_s, dx, tid, out_pixel, dx_act, y_words);
    }
    if (kBuffers == 1) {
      __syncthreads();  // the one buffer's output is written
      if (tile + gridDim.x < tl.total) issue(tile + gridDim.x, in_s_address, y_address);
      copy_async_commit();
    }
  }
}

template <class T, int kK, bool kActivation>
void launch_dgrad(const Tensor& dy, const Tensor& w, Tensor& dx, const DgradTiling& tl, const Tensor* y_act,
                  ops::Activation act, float slope, const DxActivation* dx_act, CudaContext& ctx) {
  const DxActivationArgs<T> dx_args = dx_activation_args<T>(dx_act);
  auto kernel = conv_8ch_dgrad_kernel<T, kK, kActivation>;
  const size_t smem = dgrad_smem_bytes<kK, kActivation>(tl.fp_pixels);
  allow_dynamic_smem(kernel, dgrad_smem_bytes<kK, kActivation>(kMaxFootprintPixels), dy.device().index);
  const int blocks = grid_blocks(kernel, smem, dy.device().index, tl.total);
  launch_kernel(kernel, static_cast<unsigned>(blocks), kBlockThreads, smem, ctx.stream(), dy.data_as<T>(),
                w.data_as<T>(), dx.data_as<T>(), tl, static_cast<int>(dx.dim(1)), static_cast<int>(w.dim(1)),
                y_act ? y_act->data_as<T>() : nullptr, act, slope, dx_args);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

bool conv2d_backward_data_8ch_applies(const Tensor& dy, const Tensor& w, const Tensor& dx, const Conv2dParams& p,
                                      const ops::FusedActivation* act, const Tensor* y_act,
                                      const DxActivation* dx_act) {
  const DType dt = dy.dtype();
  if ((dt != DType::F16 && dt != DType::BF16) || w.dtype() != dt || dx.dtype() != dt) return false;
  for (const Tensor* t : std::initializer_list<const Tensor*>{&dy, &w, &dx})
    if (t->rank() != 4 || t->format() != MemoryFormat::NHWC || !aligned16(t->data())) return false;
  // The activations whose gradient needs only the sign of y (activate_grad); Tanh's goes apart.
  // y_act as the codes written with codes_only: the narrow kernel's alone.
  const bool y_codes = act && y_act && y_act->dtype() == DType::U8;
  if (act && (act->kind == ops::Activation::Tanh || !y_act || y_act->shape() != dy.shape() ||
              (y_act->dtype() != dt && !y_codes) || y_act->format() != MemoryFormat::NHWC ||
              !aligned_to(y_act->data(), y_codes ? 8 : 16)))
    return false;
  const int64_t K = w.dim(0), C = dx.dim(1);
  if ((K != 64 && K != 128) || dy.dim(1) != K || (w.dim(1) != 8 && w.dim(1) != C) || w.dim(2) != 4 || w.dim(3) != 4 ||
      (C != 1 && C != 3 && C != 8) || p.stride != 2 || p.pad != 1 || dy.dim(0) != dx.dim(0))
    return false;
  if (dx_act && dx_act->y) {
    const Tensor& y = *dx_act->y;
    if (y.shape() != dx.shape() || y.dtype() != dt || y.format() != MemoryFormat::NHWC || !aligned16(y.data()))
      return false;
  }
  DgradTiling tl;
  return conv2d_backward_data_narrow_applies(dy, dx) ||
         (!y_codes && choose_dgrad_tiling(dy.dim(0), dy.dim(2), dy.dim(3), dx.dim(2), dx.dim(3), tl));
}

bool conv2d_backward_data_8ch(const Tensor& dy, const Tensor& w, Tensor& dx, const Conv2dParams& p,
                              const ops::FusedActivation* act, const Tensor* y_act, const DxActivation* dx_act) {
  if (!conv2d_backward_data_8ch_applies(dy, w, dx, p, act, y_act, dx_act)) return false;
  // A dx with an image's 1 or 3 channels goes to the kernel that computes only those, where it
  // takes the shape (conv_8ch_dgrad_narrow.cu).
  if (conv2d_backward_data_narrow(dy, w, dx, act, y_act, dx_act)) return true;
  const DType dt = dy.dtype();
  const int64_t K = w.dim(0);
  DgradTiling tl;
  choose_dgrad_tiling(dy.dim(0), dy.dim(2), dy.dim(3), dx.dim(2), dx.dim(3), tl);
  CudaContext& ctx = context(dy.device().index);
  const ops::Activation kind = act ? act->kind : ops::Activation::ReLU;
  const float slope = act ? act->negative_slope : 0.f;
  GE_DISPATCH_HALF(dt, T, {
    if (K == 64 && act)
      launch_dgrad<T, 64, true>(dy, w, dx, tl, y_act, kind, slope, dx_act, ctx);
    else if (K == 64)
      launch_dgrad<T, 64, false>(dy, w, dx, tl, nullptr, kind, slope, dx_act, ctx);
    else if (act)
      launch_dgrad<T, 128, true>(dy, w, dx, tl, y_act, kind, slope, dx_act, ctx);
    else
      launch_dgrad<T, 128, false>(dy, w, dx, tl, nullptr, kind, slope, dx_act, ctx);
  });
  return true;
}

}  // namespace gpu
}  // namespace ge
