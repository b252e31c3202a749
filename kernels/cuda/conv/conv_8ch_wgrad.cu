// See conv_8ch.h. Backward-filter of the 8-channel convolution as a GEMM on Tensor Cores:
// dw (64 channels x 128 = 16 taps x 8 input channels) = dy^T (64 x pixels) * patches
// (pixels x 128), the reduction running over every output pixel of the batch (a million at
// batch 1024). Each block walks tiles of 64 pixels (conv_8ch_tile.cuh): the tile's dy (and the
// fused activation's output, if any) and its input footprint arrive in shared memory by
// cp.async, issued while the previous tile is computed; dy passes through the activation's
// gradient there, and the block accumulates its share of dw in registers: warp w holds all 64
// output channels by taps 4w..4w+3 (filter row w). ldmatrix.trans turns both pixel-major tiles
// into the fragments mma wants. A 1- or 3-channel x (an image batch, or G's last layer's output
// gradient) is read as it is, as pixels of 4 channels (conv_8ch_input.cuh): half the products of
// its padded copy and no padding copy (docs/performance.md). The blocks' partial sums then go to
// a workspace and one more kernel adds them in a fixed order, so the result does not depend on
// scheduling.
#include <type_traits>

#include "cuda/activation_math.cuh"
#include "cuda/aligned.h"
#include "cuda/conv/conv_8ch.h"
#include "cuda/conv/conv_8ch_input.cuh"
#include "cuda/conv/conv_8ch_tile.cuh"
#include "cuda/kernel_launch.cuh"
#include "cuda/vector_pack.cuh"

namespace ge {
namespace gpu {

namespace {

using namespace conv8;

constexpr int kDyStride = kGroupChannels + 8;  // halves per staged dy row: conflict-free ldmatrix rows
constexpr int kPartial = kGroupChannels * kK;  // floats of one block's partial dw

// Each block walks at least this many tiles where the batch is small enough that the resident
// blocks would walk fewer: every block writes 32 KB of partial sums for the next kernel to add,
// at batch 64 (1024 tiles) more than a third of the traffic with three blocks per SM. Four gives
// shorter steps at batch 64 than three blocks per SM, eight none shorter than four
// (docs/performance.md); from batch 128 on there are more tiles than that.
constexpr int kMinTilesPerBlock = 4;

// Shared memory, two of each (this tile's and the next's, filled by cp.async): the input
// footprint, the dy tile and, with an activation, its output's tile.
constexpr int kFootprintBytes = kMaxFootprint * 8 * 2;
static_assert((kMaxFootprint * 4 + RowsInput<__half, 3>::kRawHalves) * 2 <= kFootprintBytes,
              "RowsInput's 4-channel footprint and staging fit a buffer sized for 8-channel pixels");
constexpr int kDyTileBytes = kTilePixels * kDyStride * 2;
constexpr size_t smem_bytes(bool activation) { return 2 * (kFootprintBytes + kDyTileBytes * (activation ? 2 : 1)); }

// Starts copying the 64 x 64 tile of t (N, P, Q, K) at image n, output row p0, column q0 and
// channel k0 into rows of kDyStride halves.
template <class T>
__device__ __forceinline__ void load_dy_tile_async(const T* __restrict__ t, T* tile_s, const Tiling& tl, int K, int n,
                                                   int p0, int q0, int k0) {
  // The tile's pixels are consecutive in t (conv_8ch_tile.cuh): its first value in 64-bit
  // arithmetic once, each pixel K values further.
  const T* tile_t = t + ((static_cast<size_t>(n) * tl.P + p0) * tl.Q + q0) * K + k0;
  // (A constant stride, the block's: the compiler unrolls the four copies a thread and forms
  // their addresses by adding; with blockDim.x this loop's index arithmetic stalls the kernel
  // noticeably.)
  for (int i = threadIdx.x; i < kTilePixels * (kGroupChannels / 8); i += kBlockThreads) {
    const int m = i / (kGroupChannels / 8), chunk = i % (kGroupChannels / 8);
    copy_async_16(tile_s + m * kDyStride + chunk * 8, tile_t + m * K + chunk * 8, true);
  }
}

// The same tile of the activation's output as FP8 codes (ops::conv2d_activation_forward's
// codes_only), each pixel's 64 codes at the byte offset where its 64 halves would begin.
__device__ __forceinline__ void load_codes_tile_async(const uint8_t* __restrict__ codes, uint8_t* tile_s,
                                                      const Tiling& tl, int K, int n, int p0, int q0, int k0) {
  const uint8_t* tile_t = codes + ((static_cast<size_t>(n) * tl.P + p0) * tl.Q + q0) * K + k0;
  for (int i = threadIdx.x; i < kTilePixels * (kGroupChannels / 8); i += kBlockThreads) {
    const int m = i / (kGroupChannels / 8), chunk = i % (kGroupChannels / 8);
    copy_async_8(shared_address(tile_s + m * kDyStride + chunk * 8), tile_t + m * K + chunk * 8, true);
  }
}

// x (N, H, W, 8, or its Input's 1 or 3 channels), dy and y_act (N, P, Q, K), NHWC. Grid (blocks
// walking the tiles, channel groups of 64). partial: (groups, gridDim.x, 64, 128) floats.
// kYCodes: y_act is the activation's output as the FP8 codes whose sign bits tell y > 0.
template <class T, bool kActivation, class Input, bool kYCodes = false>
__global__ void __launch_bounds__(kBlockThreads)
    conv_8ch_wgrad_kernel(const T* __restrict__ x, const T* __restrict__ dy,
                          const std::conditional_t<kYCodes, uint8_t, T>* __restrict__ y_act,
                          float* __restrict__ partial, Tiling tl, int K, ops::Activation act, float slope) {
  await_previous_kernel();
  extern __shared__ __align__(16) unsigned char smem[];
  // Buffer b of each kind (computed, not an array: a runtime index would put it in local memory).
  auto in_s = [&](int b) { return reinterpret_cast<T*>(smem + b * kFootprintBytes); };
  auto dy_s = [&](int b) { return reinterpret_cast<T*>(smem + 2 * kFootprintBytes + b * kDyTileBytes); };
  auto y_s = [&](int b) { return reinterpret_cast<T*>(smem + 2 * kFootprintBytes + (2 + b) * kDyTileBytes); };

  constexpr int kNTiles = Input::kWgradNTiles, kPixel = Input::kPixelHalves;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int k0 = blockIdx.y * kGroupChannels;
  float acc[kGroupChannels / 16][kNTiles][4] = {};
  Input input(tl);
  // Tile `tile`'s footprint (for the narrow input: into registers, stored by finish() at the
  // start of its own iteration), dy and y_act tiles, into buffer buf.
  auto issue_tile = [&](int tile, int buf) {
    int n, p0, q0;
    tl.locate(tile, n, p0, q0);
    input.issue(x, in_s(buf), tl, n, p0, q0);
    load_dy_tile_async(dy, dy_s(buf), tl, K, n, p0, q0, k0);
    if constexpr (kActivation && kYCodes)
      load_codes_tile_async(y_act, reinterpret_cast<uint8_t*>(y_s(buf)), tl, K, n, p0, q0, k0);
    else if constexpr (kActivation)
      load_dy_tile_async(y_act, y_s(buf), tl, K, n, p0, q0, k0);
  };

  // Lane l addresses row l % 8 of matrix l / 8 in each ldmatrix_x4_trans; for B its footprint
  // pixel is pixel_base[ks] + tap_base[load].
  const int row = lane & 7, mat = lane >> 3;
  int pixel_base[kTilePixels / 16], tap_base[kNTiles / 2];
#pragma unroll
  for (int ks = 0; ks < kTilePixels / 16; ++ks) pixel_base[ks] = Input::pixel_base(tl, ks * 16 + (mat & 1) * 8 + row);
#pragma unroll
  for (int load = 0; load < kNTiles / 2; ++load) tap_base[load] = Input::wgrad_tap_base(tl, warp, load, mat >> 1);

  if (blockIdx.x < tl.total) issue_tile(blockIdx.x, 0);
  copy_async_commit();
  int buf = 0;
  for (int tile = blockIdx.x; tile < tl.total; tile += gridDim.x, buf ^= 1) {
    input.finish(in_s(buf), tl);  // that buffer was last read two iterations ago (barrier below)
    if (tile + gridDim.x < tl.total) issue_tile(tile + gridDim.x, buf ^ 1);
    copy_async_commit();
    copy_async_wait<1>();
    __syncthreads();
    if constexpr (Input::kConverts) {
      input.convert(in_s(buf), tl);
      if (!kActivation) __syncthreads();  // (else the activation's barrier below)
    }
    T* dyt = dy_s(buf);
    if (kActivation) {
      // What the separate activation backward would store, so the product is the same.
      const T* yt = y_s(buf);
      for (int i = tid; i < kTilePixels * (kGroupChannels / 8); i += kBlockThreads) {
        const int at = (i / (kGroupChannels / 8)) * kDyStride + (i % (kGroupChannels / 8)) * 8;
        Pack<T, 8>& g = *reinterpret_cast<Pack<T, 8>*>(dyt + at);
        if constexpr (kYCodes)
          g = activate_grad_pack(
              act,
              activation_signs_of_codes<T>(*reinterpret_cast<const uint2*>(reinterpret_cast<const uint8_t*>(yt) + at)),
              g, slope);
        else
          g = activate_grad_pack(act, *reinterpret_cast<const Pack<T, 8>*>(yt + at), g, slope);
      }
      __syncthreads();
    }
    const T* in = in_s(buf);

#pragma unroll
    for (int ks = 0; ks < kTilePixels / 16; ++ks) {
      // B (pixels x columns): matrices (n-tile 2l, pixels 0-7), (2l, 8-15), (2l+1, 0-7),
      // (2l+1, 8-15) of this k-step's 16 pixels give b0, b1 of two n-tiles.
      uint32_t b[kNTiles][2];
#pragma unroll
      for (int load = 0; load < kNTiles / 2; ++load) {
        uint32_t r[4];
        ldmatrix_x4_trans(r, in + (pixel_base[ks] + tap_base[load]) * kPixel);
        b[2 * load][0] = r[0];
        b[2 * load][1] = r[1];
        b[2 * load + 1][0] = r[2];
        b[2 * load + 1][1] = r[3];
      }
      // A (channels x pixels) from the pixel-major dy tile: matrices (channels c0..c0+7,
      // pixels 0-7), (c0+8.., 0-7), (c0.., 8-15), (c0+8.., 8-15) are a0..a3.
#pragma unroll
      for (int mt = 0; mt < kGroupChannels / 16; ++mt) {
        uint32_t a[4];
        ldmatrix_x4_trans(a, dyt + (ks * 16 + (mat >> 1) * 8 + row) * kDyStride + mt * 16 + (mat & 1) * 8);
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) mma_16816<T>(acc[mt][nt], a, b[nt]);
      }
    }
    __syncthreads();  // every warp is done with this buffer before the next loads refill it
  }

  // d0, d1: channel c0 + g, n-tile columns 2t, 2t+1; d2, d3: channel c0 + g + 8.
  const int g = lane >> 2, t = lane & 3;
  float* out = partial + (static_cast<size_t>(blockIdx.y) * gridDim.x + blockIdx.x) * kPartial;
#pragma unroll
  for (int mt = 0; mt < kGroupChannels / 16; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int c = mt * 16 + g + 8 * h, col = Input::wgrad_column(warp, nt, t);
        *reinterpret_cast<float2*>(out + c * kK + col) = make_float2(acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1]);
        if (Input::kWgradZeroUpper) *reinterpret_cast<float2*>(out + c * kK + col + 4) = make_float2(0.f, 0.f);
      }
}

// dw (K, 4, 4, 8) = beta * dw + the sum of the blocks' partials, in block order. A block of
// 32 x 8 threads: 32 consecutive outputs, each summed in 8 strided slices, then the slices. A dw
// holding only x's 1 or 3 channels (K, 4, 4, wc; conv_8ch.h) takes those of the sums.
constexpr int kSumOutputs = 32, kSumSlices = 8;

template <class T>
__global__ void __launch_bounds__(kSumOutputs* kSumSlices)
    sum_partials_kernel(const float* __restrict__ partial, int blocks, T* __restrict__ dw, int wc, float beta) {
  await_previous_kernel();
  __shared__ float part[kSumSlices][kSumOutputs];
  const int o = threadIdx.x, slice = threadIdx.y;
  const int index = blockIdx.x * kSumOutputs + o;  // into dw, (group, channel, column)
  const int group = index / kPartial, j = index % kPartial;
  const float* src = partial + static_cast<size_t>(group) * blocks * kPartial + j;
  float s = 0.f;
  for (int b = slice; b < blocks; b += kSumSlices) s += src[static_cast<size_t>(b) * kPartial];
  part[slice][o] = s;
  __syncthreads();
  if (slice != 0) return;
  const int c = index % 8;  // dw's channel; index / 8 is (output channel, tap)
  if (c >= wc) return;
  float total = 0.f;
#pragma unroll
  for (int i = 0; i < kSumSlices; ++i) total += part[i][o];
  T* out = dw + (index / 8) * wc + c;
  if (beta != 0.f) total += beta * load_float(out);
  store_float(out, total);
}

}  // namespace

bool conv2d_backward_filter_8ch_applies(const Tensor& x, const Tensor& dy, const Tensor& dw, const Conv2dParams& p,
                                        const ops::FusedActivation* act, const Tensor* y_act) {
  Tiling tl;
  if (!tiling_for(x, dw, dy, p, tl)) return false;
  if (x.dim(1) != 8 && !narrow_input_fits(tl)) return false;
  // y_act: the activation's output, or (ReLU, LeakyReLU) its codes written with codes_only.
  const bool codes = y_act && y_act->dtype() == DType::U8;
  return !act || (y_act && y_act->shape() == dy.shape() && (y_act->dtype() == dy.dtype() || codes) &&
                  (!codes || act->kind != ops::Activation::Tanh) && y_act->format() == dy.format() &&
                  aligned_to(y_act->data(), codes ? 8 : 16));
}

bool conv2d_backward_filter_8ch(const Tensor& x, const Tensor& dy, Tensor& dw, const Conv2dParams& p, float beta,
                                const ops::FusedActivation* act, const Tensor* y_act) {
  if (!conv2d_backward_filter_8ch_applies(x, dy, dw, p, act, y_act)) return false;
  Tiling tl;
  tiling_for(x, dw, dy, p, tl);
  const int C = static_cast<int>(x.dim(1));
  const int K = static_cast<int>(dw.dim(0)), groups = K / kGroupChannels;
  CudaContext& ctx = context(x.device().index);
  const ops::Activation kind = act ? act->kind : ops::Activation::ReLU;
  const float slope = act ? act->negative_slope : 0.f;
  GE_DISPATCH_HALF(x.dtype(), T, {
    // As many blocks as the padded fused kernel fits at once (three per SM on H100/H200; fewer for
    // small batches, kMinTilesPerBlock), for every variant: the same blocks sum the same tiles in
    // the same order, and a block sums each dw value over its tiles' pixels in the same order
    // whichever input it reads, so the fused op is bitwise the two ops in sequence and a 1- or
    // 3-channel x bitwise its padded copy. Each block leaves 32 KB of partial sums (13 MB with
    // 132 SMs), in the cuDNN workspace the other convolutions need anyway.
    auto widest = conv_8ch_wgrad_kernel<T, true, PaddedInput<T>>;
    allow_dynamic_smem(widest, smem_bytes(true), x.device().index);
    const int blocks = std::min(grid_blocks(widest, smem_bytes(true), x.device().index, tl.total),
                                std::max(1, tl.total / kMinTilesPerBlock));
    float* partial =
        static_cast<float*>(workspace(ctx, static_cast<size_t>(groups) * blocks * kPartial * sizeof(float)));
    const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(groups));
    dispatch_input<T>(C, tl, [&](auto input) {
      using Input = std::remove_pointer_t<decltype(input)>;
      // Every variant uses more than the 48 KB of shared memory a kernel gets without asking.
      if (act && y_act->dtype() == DType::U8) {
        auto kernel = conv_8ch_wgrad_kernel<T, true, Input, true>;
        allow_dynamic_smem(kernel, smem_bytes(true), x.device().index);
        launch_kernel(kernel, grid, kBlockThreads, smem_bytes(true), ctx.stream(), x.data_as<T>(), dy.data_as<T>(),
                      y_act->data_as<uint8_t>(), partial, tl, K, kind, slope);
      } else {
        auto fused = conv_8ch_wgrad_kernel<T, true, Input>;
        auto kernel = act ? fused : conv_8ch_wgrad_kernel<T, false, Input>;
        allow_dynamic_smem(fused, smem_bytes(true), x.device().index);
        allow_dynamic_smem(conv_8ch_wgrad_kernel<T, false, Input>, smem_bytes(false), x.device().index);
        launch_kernel(kernel, grid, kBlockThreads, smem_bytes(act != nullptr), ctx.stream(), x.data_as<T>(),
                      dy.data_as<T>(), act ? y_act->data_as<T>() : nullptr, partial, tl, K, kind, slope);
      }
    });
    CUDA_CHECK_LAUNCH();
    launch_kernel(sum_partials_kernel<T>, static_cast<unsigned>(groups * kPartial / kSumOutputs),
                  dim3(kSumOutputs, kSumSlices), 0, ctx.stream(), partial, blocks, dw.data_as<T>(),
                  static_cast<int>(dw.dim(1)), beta);
    CUDA_CHECK_LAUNCH();
  });
  return true;
}

}  // namespace gpu
}  // namespace ge
