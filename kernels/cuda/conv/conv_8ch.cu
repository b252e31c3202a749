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
//    of reading the image as 8 channels, and no padding copy; faster than reading 8-channel pixels
//    through registers (docs/performance.md).
#include <initializer_list>
#include <type_traits>

#include "cuda/activation_math.cuh"
#include "cuda/conv/conv_8ch.h"
#include "cuda/conv/conv_8ch_dgrad_narrow.h"
#include "cuda/conv/conv_8ch_input.cuh"
#include "cuda/conv/conv_8ch_tile.cuh"
#include "cuda/fp8_round_trip.cuh"
#include "cuda/kernel_launch.cuh"
#include "cuda/vector_pack.cuh"

namespace ge {
namespace gpu {

namespace {

using namespace conv8;

constexpr int kOutStride = kGroupChannels + 8;  // halves per staged output row: +8 spreads rows over the banks
constexpr int kMTiles = kTilePixels / 16;

// What the kernel does to each output value on its way out: round it to the dtype, and round
// it, take ReLU or LeakyReLU (rectify, as the separate activation op) and round again, or the
// same for LeakyReLU with a slope in (0, 1] as leaky_relu_pair computes it (the same bits, fewer
// instructions).
enum class Epilogue { kRound, kRectify, kLeakyMax };
// x (N, H, W, 8 or kC), w (K, 4, 4, 8), y (N, P, Q, K), all NHWC. Grid (blocks walking the tiles,
// channel groups of 64). Five blocks per SM asked for: the padded kernel's 96 registers, as the
// compiler chooses them unbounded (six, 80 registers, spill in the narrow kernel with LeakyReLU).
// kRoundedCopy: y_rounded (y's layout) also receives y rounded to FP8 and back as `round` says, its
// amax folded into round.amax (O4: the input of the FP8 convolution after D's first layer); or,
// y_rounded nullptr, round.codes receives y's codes (that convolution's passes reading codes),
// and with round.codes_only those alone, each code's sign bit telling y > 0 for the backward
// (fp8_activation_codes_written), y not written.
template <class T, Epilogue kEpilogue, class Input, bool kRoundedCopy = false>
__global__ void __launch_bounds__(kBlockThreads, 5)
    conv_8ch_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, Tiling tl, int K, int wc,
                    ops::Activation act, float slope, T* __restrict__ y_rounded, Fp8RoundTripArgs round) {
  await_previous_kernel();
  uint32_t amax_key = 0;
  constexpr int kKSteps = Input::kKSteps, kPixel = Input::kPixelHalves;
  // This tile's footprint and the next's (each with the input's staging, if any).
  __shared__ alignas(16) T in_s[2][kMaxFootprint * kPixel + Input::kRawHalves];
  __shared__ alignas(16) T out_s[kTilePixels * kOutStride];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;                   // mma fragment row / column pair
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
      const int k = k0 + nt * 8 + g;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int j = Input::weight_k(ks, t) + half * Input::kWeightHalfStep;  // tap j / 8, channel j % 8
        if (wc == 8) {
          b[ks][nt][half] = *reinterpret_cast<const uint32_t*>(w + static_cast<size_t>(k) * kK + j);
        } else {  // w holds the input's own channels (conv_8ch.h)
          b[ks][nt][half] = weight_bits(w, k, j >> 3, j & 7, wc) | (weight_bits(w, k, j >> 3, (j & 7) + 1, wc) << 16);
        }
      }
    }
  // Lane l addresses row l % 8 of matrix l / 8 in each ldmatrix: matrices (pixels 0-7, k 0-7),
  // (pixels 8-15, k 0-7), (0-7, k 8-15), (8-15, k 8-15) of a 16-pixel m-tile are a0..a3. Its
  // footprint pixel is pixel_base[mt] + tap_base[ks].
  const int ld_row = lane & 7, ld_mat = lane >> 3;
  // Lane l's row of the epilogue's stmatrix: row l % 8 of matrix l / 8 (n-tile l / 16, pixel half
  // (l / 8) % 2) of m-tile 0, in bytes of shared memory.
  const uint32_t out_row = static_cast<uint32_t>(
      __cvta_generic_to_shared(out_s + ((ld_mat & 1) * 8 + ld_row) * kOutStride + warp * 16 + (ld_mat >> 1) * 8));
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
    // Located again rather than carried over from the previous iteration: carrying it raises
    // the unfused kernel from 96 to 127 registers (fewer blocks per SM).
    tl.locate(tile, n, p0, q0);
    copy_async_wait<1>();  // this tile's footprint has landed (for this thread's copies)
    __syncthreads();       // ... and everyone's; out_s is free again
    if constexpr (Input::kConverts) {
      input.convert(in_s[buf], tl);
      __syncthreads();
    }
    // (The footprint's shared-memory address once: a generic pointer under each ldmatrix costs a
    // 64-bit add and a conversion there.)
    const uint32_t in = shared_address(in_s[buf]);

    float acc[kMTiles][2][4] = {};
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int ks = 0; ks < kKSteps; ++ks) {
        uint32_t a[4];
        ldmatrix_x4(a, in + 2u * (pixel_base[mt] + tap_base[ks]) * kPixel);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) mma_16816<T>(acc[mt][nt], a, b[ks][nt]);
      }
    }

    // d0, d1: pixel g of the m-tile, channels 2t, 2t+1 of the n-tile; d2, d3: pixel g + 8. The
    // two channels are rounded together (per value, these conversions and 2-byte stores take a
    // large share of the fused kernel's issue slots), and an m-tile's four 8 x 8 blocks (n-tile
    // nt, pixel half h) leave in one stmatrix, as matrix 2 nt + h.
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      uint32_t words[4];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float v0 = acc[mt][nt][2 * h], v1 = acc[mt][nt][2 * h + 1];
          if constexpr (kEpilogue == Epilogue::kLeakyMax) {
            words[2 * nt + h] = leaky_relu_pair<T>(v0, v1, slope);
          } else {
            if constexpr (kEpilogue == Epilogue::kRectify) {  // (the host applies Tanh after the kernel)
              round_pair<T>(v0, v1);
              v0 = rectify(act, v0, slope);
              v1 = rectify(act, v1, slope);
            }
            words[2 * nt + h] = pack_pair<T>(v0, v1);
          }
        }
      stmatrix_x4(out_row + mt * 16 * kOutStride * 2, words);
    }
    __syncthreads();
    // The tile's first output in 64-bit arithmetic once, each pixel's offset from it in 32-bit
    // (within a tile's rows: far below 2^31). The tile's pixels are consecutive in y
    // (conv_8ch_tile.cuh), pixel m K values after its first: thread tid moves 16-byte chunk
    // tid % 8 of pixels tid / 8 + 16 j. (Working out each pixel's row and column again instead
    // stalls the kernel noticeably.)
    constexpr int kChunks = kGroupChannels / 8, kPixelsPerPass = kBlockThreads / kChunks;
    const size_t at = ((static_cast<size_t>(n) * tl.P + p0) * tl.Q + q0) * K + blockIdx.y * kGroupChannels +
                      (tid / kChunks) * K + (tid % kChunks) * 8;
    const T* src = out_s + (tid / kChunks) * kOutStride + (tid % kChunks) * 8;
#pragma unroll
    for (int j = 0; j < kTilePixels / kPixelsPerPass; ++j) {
      const uint4 v = *reinterpret_cast<const uint4*>(src + j * kPixelsPerPass * kOutStride);
      if (!kRoundedCopy || !round.codes_only) *reinterpret_cast<uint4*>(y + at + j * kPixelsPerPass * K) = v;
      if constexpr (kRoundedCopy) {
        Pack<T, 8> r;
        *reinterpret_cast<uint4*>(&r) = v;
        if (y_rounded) {
          fp8_round_trip_written(r, round, fp8_round_trip_scales(round), 0, amax_key);
          *reinterpret_cast<Pack<T, 8>*>(y_rounded + at + j * kPixelsPerPass * K) = r;
        } else if (round.codes_only) {
          fp8_activation_codes_written(r, round, *round.scale, at + j * kPixelsPerPass * K, amax_key);
        } else {
          fp8_codes_written(r, round, *round.scale, at + j * kPixelsPerPass * K, amax_key);
        }
      }
    }
  }
  if constexpr (kRoundedCopy)
    if (round.amax) fold_amax_key(amax_key, round.amax);
}

// Whether leaky_relu_pair computes this activation (its slope's range).
bool leaky_max_applies(const ops::FusedActivation& act) {
  return act.kind == ops::Activation::LeakyReLU && act.negative_slope > 0.f && act.negative_slope <= 1.f;
}

}  // namespace

bool conv8::tiling_for(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p, Tiling& tl) {
  const DType dt = x.dtype();
  if ((dt != DType::F16 && dt != DType::BF16) || w.dtype() != dt || y.dtype() != dt) return false;
  for (const Tensor* t : std::initializer_list<const Tensor*>{&x, &w, &y})
    if (t->rank() != 4 || t->format() != MemoryFormat::NHWC || !aligned16(t->data())) return false;
  return tiling_for_shapes(x.shape(), w.shape(), y.shape(), p, tl);
}

bool conv8::tiling_for_shapes(const Shape& x, const Shape& w, const Shape& y, const Conv2dParams& p, Tiling& tl) {
  if (x.size() != 4 || w.size() != 4 || y.size() != 4) return false;
  const int64_t C = x[1];
  if ((C != 1 && C != 3 && C != 8) || (w[1] != 8 && w[1] != C) || w[2] != 4 || w[3] != 4 || p.stride != 2 || p.pad != 1)
    return false;
  const int64_t K = w[0];
  if (K % kGroupChannels != 0 || K / kGroupChannels > 65535 || y[1] != K || y[0] != x[0]) return false;
  return choose_tiling(x[0], x[2], x[3], y[2], y[3], tl);
}

bool conv2d_activation_codes_8ch_take(const Shape& x, const Shape& w, const Shape& y, const Conv2dParams& p,
                                      const ops::FusedActivation& act) {
  if (!leaky_max_applies(act)) return false;
  Tiling tl;
  // The forward and the filter gradient read x with its own 1 or 3 channels (narrow_input_fits);
  // the input gradient is the narrow kernel's.
  return tiling_for_shapes(x, w, y, p, tl) && x[1] != 8 && narrow_input_fits(tl) && w[0] == 64 &&
         conv2d_backward_data_narrow_takes(y, x);
}

bool conv2d_forward_8ch_applies(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p) {
  Tiling tl;
  return tiling_for(x, w, y, p, tl) && (x.dim(1) == 8 || narrow_input_fits(tl));
}

bool conv2d_forward_8ch(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p,
                        const ops::FusedActivation* act, const ops::Fp8RoundTrip* round, Tensor* rounded) {
  if (!conv2d_forward_8ch_applies(x, w, y, p)) return false;
  if (round) {
    // The rounded copy (y's shape, dtype and layout) or the codes (y's layout; their shape and
    // dtype are the op's checks), 16-byte aligned.
    const Tensor& out = rounded ? *rounded : round->codes;
    const bool fits = out.defined() && out.format() == y.format() && aligned16(out.data()) &&
                      (!rounded || (rounded->shape() == y.shape() && rounded->dtype() == y.dtype()));
    if (!fits || !(act && leaky_max_applies(*act))) return false;
    // Codes alone only where the backward passes can take them as y.
    if (round->codes_only && !conv2d_activation_codes_8ch_take(x.shape(), w.shape(), y.shape(), p, *act)) return false;
  }
  Tiling tl;
  tiling_for(x, w, y, p, tl);
  const int K = static_cast<int>(w.dim(0));
  // Tanh runs after the kernel, as the separate op: inside it, tanhf inlined at each of a
  // thread's 32 outputs makes the kernel's code half again as long, where the fused LeakyReLU
  // kernel's warps already wait for instructions; steps are shorter without it
  // (docs/performance.md).
  const ops::FusedActivation* fused = act && act->kind != ops::Activation::Tanh ? act : nullptr;
  const ops::Activation kind = fused ? fused->kind : ops::Activation::ReLU;
  const float slope = fused ? fused->negative_slope : 0.f;
  const int C = static_cast<int>(x.dim(1));
  GE_DISPATCH_HALF(x.dtype(), T, {
    dispatch_input<T>(C, tl, [&](auto input) {
      using Input = std::remove_pointer_t<decltype(input)>;
      auto kernel = round                       ? conv_8ch_kernel<T, Epilogue::kLeakyMax, Input, true>
                    : !fused                    ? conv_8ch_kernel<T, Epilogue::kRound, Input>
                    : leaky_max_applies(*fused) ? conv_8ch_kernel<T, Epilogue::kLeakyMax, Input>
                                                : conv_8ch_kernel<T, Epilogue::kRectify, Input>;
      const dim3 grid(static_cast<unsigned>(grid_blocks(kernel, 0, x.device().index, tl.total)),
                      static_cast<unsigned>(K / kGroupChannels));
      launch_kernel(kernel, grid, kBlockThreads, 0, stream_of(x), x.data_as<T>(), w.data_as<T>(), y.data_as<T>(), tl, K,
                    static_cast<int>(w.dim(1)), kind, slope, rounded ? rounded->data_as<T>() : nullptr,
                    fp8_round_trip_args(round));
    });
  });
  CUDA_CHECK_LAUNCH();
  if (act && !fused) gpu::activation_forward(act->kind, y, y, act->negative_slope);
  return true;
}

}  // namespace gpu
}  // namespace ge
