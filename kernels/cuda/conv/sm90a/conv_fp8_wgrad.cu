// dw = backward_filter(x, dy) of a 4x4, stride-2, pad-1 convolution with 64 channels in x and 128
// in dy, x 32 x 32 (D's second layer at 64x64 images), from FP8 codes on Hopper's warpgroup MMA.
// For each tap (kh, kw) it is a GEMM over an image's 256 output pixels (a, b):
//   dw[co][kh][kw][ci] += sum over (a, b) of dy[a][b][co] * x[2a + kh - 1][2b + kw - 1][ci],
// M = co (A = dy), N = ci (B = x), K = pixels; x and dy each E4M3 or E5M2 (D's second layer: x
// E4M3, dy E5M2; G's fourth layer, whose filter gradient this is with the roles swapped: its output
// gradient, E5M2, as x and its input, E4M3, as dy).
//  - FP8 MMAs take both operands K-major, pixels consecutive, and NHWC holds channels consecutive.
//    Each image is staged as it is (cp.async, two images ahead of its MMAs); dy's A fragments come
//    from the staged copy through ldmatrix.trans of its 16-bit channel pairs and two byte permutes
//    (dy_fragment), and x is transposed by the threads into a shared-memory B tile (16 pixels x 4
//    channels a thread: sixteen 4-byte loads, 32 byte permutes, four 16-byte stores) while the
//    MMAs of the image before run. The tile is 16 groups of 8 channels, each 16 core matrices
//    (output rows a) of 8 channels x 16 bytes (columns b): K steps of 32 are two output rows, in
//    the pixel order ldmatrix hands a thread (pixel_at);
//  - a block takes one tap row kh and one column parity: the taps (kh, 1 - q) and (kh, 3 - q),
//    whose x columns 2b - q and 2b + 2 - q form the N = 128 of one m64n128k32 MMA; each of its two
//    warpgroups forms 64 of the 128 co, eight MMAs an image. 8 such tap pairs x image splits of
//    the batch make the grid, one block an SM;
//  - each image's sums (K = 256) are added into f32 registers of their own: Hopper's FP8 MMAs add
//    at less than f32's precision (docs/performance.md, "Accumulation"), so a block's sum over
//    its images is f32 as cuDNN's and the CPU's are;
//  - the splits' sums go to a scratch in f32 and a second kernel adds them in split order (the
//    same bytes every run), times both scale_invs, onto beta * dw (or into an f16 dw, rounded once).
// Compiled for sm_90a only (wgmma): CMakeLists.txt builds this folder apart.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "cuda/conv/conv_8ch_tile.cuh"
#include "cuda/conv/conv_fp8_wgrad.h"
#include "cuda/conv/conv_phase_dgrad.h"
#include "cuda/conv/sm90a/wgmma.cuh"
#include "cuda/copy_async.cuh"
#include "cuda/cuda_util.cuh"
#include "cuda/kernel_launch.cuh"

namespace ge {
namespace gpu {
namespace {

constexpr int kInChannels = 64, kOutChannels = 128;
constexpr int kSide = 32, kOutSide = 16, kPixels = kOutSide * kOutSide;
constexpr int kWeights = kOutChannels * 16 * kInChannels;
constexpr int kTapPairs = 8;  // 4 tap rows x 2 column parities
constexpr int kThreads = 2 * kWarpgroupThreads;
constexpr int kKSteps = kPixels / 32;  // two output rows an MMA
// x's tile (B): 16 groups of 8 channels (the pair's first tap's 64, then its second's), a group 16
// core matrices of 128 bytes (output row a) and 16 bytes more, so that the 16-byte stores of a
// warp (two lanes a group) fall in every bank evenly.
constexpr int kGroupStride = kOutSide * 128 + 16;
constexpr int kTileBytes = 16 * kGroupStride;
// An image staged as copied: dy's 256 pixels x 128 channels, the 16-byte piece c of pixel p at
// piece c ^ (p % 8) (so that ldmatrix's eight pixel rows fall in different banks); x's 16 rows the
// tap row reads (row 2a + kh - 1 at output row a; zeros where that is the border) x 18 columns
// (column 2m + q at m + 1, m = 0 .. 15; the border columns m = -1 and 16 zero) x 64 channels.
constexpr int kStagedColumns = kOutSide + 2;
constexpr int kStagedDyBytes = kPixels * kOutChannels;
constexpr int kStagedXBytes = kOutSide * kStagedColumns * kInChannels;
constexpr int kStagedBytes = kStagedDyBytes + kStagedXBytes;
constexpr int kStages = 3;  // image k's MMAs read stage k % 3 while k + 1's x is transposed and k + 2's lands
constexpr size_t kShared = 2 * size_t{kTileBytes} + kStages * size_t{kStagedBytes};
static_assert(kShared <= 227 * 1024, "two x tiles and three staged images fit an H100/H200 block");
static_assert(kThreads / 32 * 2 == kOutSide, "each warp transposes two output rows of x");

// The MMAs' K order within an output row: position k holds pixel b = pi(k) = 2 (k / 4) + k % 2 +
// 8 ((k / 2) % 2), the order in which ldmatrix.trans hands a thread its dy bytes (below); x's tile
// is written in the same order.
__host__ __device__ constexpr int pixel_at(int k) { return 2 * (k / 4) + k % 2 + 8 * ((k / 2) % 2); }

// The 16 4-byte words of one x transposing unit, word[b] = 4 channels of pixel b of an output
// row, as 4 rows of 16 bytes (one channel's 16 pixels in the MMAs' K order) stored 16 bytes
// apart from `row`.
__device__ __forceinline__ void store_transposed(char* row, const uint32_t (&word)[16]) {
  uint32_t out[4][4];  // out[channel][positions 4p .. 4p + 3]
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const uint32_t w0 = word[pixel_at(4 * p)], w1 = word[pixel_at(4 * p + 1)];
    const uint32_t w2 = word[pixel_at(4 * p + 2)], w3 = word[pixel_at(4 * p + 3)];
    const uint32_t lo01 = __byte_perm(w0, w1, 0x5140), hi01 = __byte_perm(w0, w1, 0x7362);
    const uint32_t lo23 = __byte_perm(w2, w3, 0x5140), hi23 = __byte_perm(w2, w3, 0x7362);
    out[0][p] = __byte_perm(lo01, lo23, 0x5410);
    out[1][p] = __byte_perm(lo01, lo23, 0x7632);
    out[2][p] = __byte_perm(hi01, hi23, 0x5410);
    out[3][p] = __byte_perm(hi01, hi23, 0x7632);
  }
#pragma unroll
  for (int c = 0; c < 4; ++c)
    *reinterpret_cast<uint4*>(row + 16 * c) = make_uint4(out[c][0], out[c][1], out[c][2], out[c][3]);
}

struct ImageOperands {
  const uint8_t* x;
  const uint8_t* dy;
  int kh, q;
  int tid;

  // Issues the copies of `image` into `staged` as one cp.async group (an empty one past the end).
  __device__ __forceinline__ void stage(int image, int images, char* staged) const {
    if (image < images) {
      const uint8_t* dy_image = dy + static_cast<size_t>(image) * kStagedDyBytes;
#pragma unroll
      for (int i = 0; i < kStagedDyBytes / 16 / kThreads; ++i) {
        const int c = tid + i * kThreads, pixel = c / 8;
        copy_async_16(staged + pixel * 128 + ((c % 8) ^ (pixel % 8)) * 16, dy_image + 16 * c, true);
      }
      const uint8_t* x_image = x + static_cast<size_t>(image) * kSide * kSide * kInChannels;
#pragma unroll
      for (int i = 0; i < kOutSide * kOutSide * 4 / kThreads; ++i) {
        const int c = tid + i * kThreads, a = c / 64, m = (c / 4) % 16, part = c % 4, row = 2 * a + kh - 1;
        const bool inside = row >= 0 && row < kSide;
        copy_async_16(staged + kStagedDyBytes + ((a * kStagedColumns + m + 1) * kInChannels + 16 * part),
                      x_image + ((inside ? row : 0) * kSide + 2 * m + q) * kInChannels + 16 * part, inside);
      }
    }
    copy_async_commit();
  }

  // x's tile from a staged image: warp w takes output rows w and w + 8, lane l channels
  // 4 (l % 16) .. 4 (l % 16) + 3 at the pair's tap l / 16, whose column at pixel b is
  // 2b + 2 (l / 16) - q (staged at m = b + l / 16 - q); they are rows 4 (l % 2) .. of group l / 2.
  __device__ __forceinline__ void transpose_x(const char* staged, char* tile) const {
    const int warp = tid / 32, lane = tid % 32, tap = lane / 16;
    const char* from = staged + kStagedDyBytes + (tap - q + 1) * kInChannels + 4 * (lane % 16);
    char* to = tile + (lane / 2) * kGroupStride + 4 * (lane % 2) * 16;
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int a = warp + 8 * u;
      uint32_t word[16];
#pragma unroll
      for (int b = 0; b < 16; ++b)
        word[b] = *reinterpret_cast<const uint32_t*>(from + (a * kStagedColumns + b) * kInChannels);
      store_transposed(to + a * 128, word);
    }
  }
};

// Warpgroup wg's A fragment of K step s (output rows 2s and 2s + 1) from a staged dy: its warp w
// takes channels 64 wg + 16 w .. + 15 as 8 pairs. ldmatrix.trans of the 16-bit pairs gives lane l
// the pair l / 4 at pixels 2 (l % 4) and + 1 of each 8-pixel matrix (b 0..7, b 8..15 of each row),
// and the byte permutes split the pair: the fragment's row 16 w + l / 4 is channel
// 64 wg + 16 w + 2 (l / 4), its row + 8 the next channel, and its K positions 4 (l % 4) .. + 3
// pixels 2 (l % 4), + 1, + 8, + 9 (pixel_at).
__device__ __forceinline__ uint4 dy_fragment(uint32_t staged_dy, int wg, int t, int s) {
  const int w = t / 32, lane = t % 32, matrix = lane / 8, row = lane % 8;
  const int pixel = (2 * s + matrix / 2) * kOutSide + 8 * (matrix % 2) + row;
  uint32_t m[4];
  conv8::ldmatrix_x4_trans(m, staged_dy + pixel * 128 + (((4 * wg + w) ^ row) * 16));
  return make_uint4(__byte_perm(m[0], m[1], 0x6420), __byte_perm(m[0], m[1], 0x7531), __byte_perm(m[2], m[3], 0x6420),
                    __byte_perm(m[2], m[3], 0x7531));
}

// Block (pair, split): pair = kh * 2 + q, the taps (kh, 1 - q) and (kh, 3 - q); split s the images
// s, s + splits, ... Its sums, unscaled, go to partial[s] in dw's order.
template <Fp8Format XFormat, Fp8Format DyFormat>
__global__ void __launch_bounds__(kThreads, 1)
    fp8_wgrad_kernel(const uint8_t* __restrict__ x, const uint8_t* __restrict__ dy, float* __restrict__ partial,
                     int images) {
  extern __shared__ __align__(128) char smem[];  // two x tiles, then three staged images
  const int tid = threadIdx.x, wg = tid / kWarpgroupThreads, t = tid % kWarpgroupThreads;
  const int pair = blockIdx.x % kTapPairs, split = blockIdx.x / kTapPairs, splits = gridDim.x / kTapPairs;
  const ImageOperands operands{x, dy, pair / 2, pair % 2, tid};
  auto tile = [&](int k) { return smem + (k % 2) * kTileBytes; };  // local image k's
  auto staged = [&](int k) { return smem + 2 * kTileBytes + (k % kStages) * kStagedBytes; };
  // The staged x's border columns stay zero; the copies fill the rest.
  for (int i = tid; i < kStages * kOutSide * 2 * (kInChannels / 16); i += kThreads) {
    const int stage = i / (kOutSide * 2 * 4), row = (i / 8) % kOutSide, side = (i / 4) % 2, part = i % 4;
    *reinterpret_cast<uint4*>(staged(stage) + kStagedDyBytes +
                              ((row * kStagedColumns + side * (kStagedColumns - 1)) * kInChannels + 16 * part)) =
        make_uint4(0, 0, 0, 0);
  }
  await_previous_kernel();
  float total[64], d[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) total[i] = 0.f;
  operands.stage(split, images, staged(0));
  operands.stage(split + splits, images, staged(1));
  copy_async_wait<1>();
  __syncthreads();
  if (split < images) operands.transpose_x(staged(0), tile(0));
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // the tile, seen by the MMAs
  __syncthreads();
  operands.stage(split + 2 * splits, images, staged(2));
  for (int k = 0, image = split; image < images; ++k, image += splits) {
    const uint32_t staged_dy = shared_address(staged(k)), x_tile = shared_address(tile(k));
    uint4 a[kKSteps];
#pragma unroll
    for (int s = 0; s < kKSteps; ++s) a[s] = dy_fragment(staged_dy, wg, t, s);
    wgmma_fence();
#pragma unroll
    for (int s = 0; s < kKSteps; ++s)  // B: both taps' 64 channels at output rows 2s, 2s + 1
      wgmma_fp8_m64n128k32_a_registers<XFormat, DyFormat>(
          d, a[s], smem_descriptor(x_tile + 2 * s * 128, 128, kGroupStride), s > 0);
    wgmma_commit();
    // The next image's copies (issued two images back) have landed: its x is transposed while
    // the MMAs run.
    copy_async_wait<1>();
    __syncthreads();
    if (image + splits < images) operands.transpose_x(staged(k + 1), tile(k + 1));
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < 64; ++i) total[i] += d[i];
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();  // the next tile is whole; this image's tile and staged copy are no longer read
    operands.stage(image + 3 * splits, images, staged(k + 3));
  }
  // Accumulator layout (wgmma.cuh): d[4j + e] row 16 w + l / 4 (+ 8 for e >= 2), column
  // 8 j + 2 (l % 4) + e % 2. Row 16 w + g (+ 8) is channel 64 wg + 16 w + 2g (+ 1) (dy_fragment);
  // column n is tap n / 64's channel n % 64.
  const int w = t / 32, l = t % 32, kh = pair / 2, q = pair % 2;
  float* out = partial + static_cast<size_t>(split) * kWeights;
#pragma unroll
  for (int j = 0; j < 16; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int co = 64 * wg + 16 * w + 2 * (l / 4) + h, tap = 4 * kh + (1 - q) + 2 * (j / 8);
      const int ci = 8 * (j % 8) + 2 * (l % 4);
      *reinterpret_cast<float2*>(out + (co * 16 + tap) * kInChannels + ci) =
          make_float2(total[4 * j + 2 * h], total[4 * j + 2 * h + 1]);
    }
}

// dw[i] = beta * dw[i] + (the splits' sums, in split order) * x_scale_inv * dy_scale_inv, four
// values a thread; an f16 dw (beta 0) takes the f32 result rounded once.
__device__ __forceinline__ void store_four(float4* dw, int i, float4 r) { dw[i] = r; }
__device__ __forceinline__ void store_four(__half* dw, int i, float4 r) {
  const __half2 lo = __floats2half2_rn(r.x, r.y), hi = __floats2half2_rn(r.z, r.w);
  reinterpret_cast<uint2*>(dw)[i] =
      make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
}

template <class Out>
__global__ void fp8_wgrad_sum_kernel(const float4* __restrict__ partial, int splits, Out* dw, float beta,
                                     const float* __restrict__ x_scale_inv, const float* __restrict__ dy_scale_inv) {
  await_previous_kernel();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= kWeights / 4) return;
  float4 sum = partial[i];
  for (int s = 1; s < splits; ++s) {
    const float4 v = partial[static_cast<size_t>(s) * (kWeights / 4) + i];
    sum.x += v.x;
    sum.y += v.y;
    sum.z += v.z;
    sum.w += v.w;
  }
  const float scale = *x_scale_inv * *dy_scale_inv;
  float4 r = make_float4(sum.x * scale, sum.y * scale, sum.z * scale, sum.w * scale);
  if constexpr (std::is_same_v<Out, float4>) {
    if (beta != 0.f) {
      const float4 old = dw[i];
      r = make_float4(old.x + r.x, old.y + r.y, old.z + r.z, old.w + r.w);
    }
  }
  store_four(dw, i, r);
}

bool wgrad_geometry(const Shape& x, const Shape& dy, const Shape& dw, const Conv2dParams& p, Device device) {
  if (x.size() != 4 || dy.size() != 4 || dw.size() != 4 || p.stride != 2 || p.pad != 1) return false;
  if (x != Shape{x[0], kInChannels, kSide, kSide} || dy != Shape{x[0], kOutChannels, kOutSide, kOutSide} ||
      dw != Shape{kOutChannels, kInChannels, 4, 4} || x[0] < 1)
    return false;
  return device.is_cuda() && device_is_sm90(device.index);
}

template <Fp8Format XFormat, Fp8Format DyFormat>
void launch_wgrad(const Fp8Tensor& x, const Fp8Tensor& dy, Tensor& dw, float beta) {
  cudaStream_t stream = stream_of(dw);
  const int device = dw.device().index;
  const int64_t images = x.data.dim(0);
  const int splits = static_cast<int>(std::min<int64_t>(images, std::max(1, sm_count(device) / kTapPairs)));
  Tensor partial = Tensor::empty({int64_t{splits} * kWeights}, DType::F32, dw.device());
  auto kernel = fp8_wgrad_kernel<XFormat, DyFormat>;
  set_function_attribute_once(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kShared), device);
  launch_kernel(kernel, static_cast<unsigned>(kTapPairs * splits), kThreads, kShared, stream, x.data.data_as<uint8_t>(),
                dy.data.data_as<uint8_t>(), partial.data_as<float>(), static_cast<int>(images));
  CUDA_CHECK_LAUNCH();
  const auto* sums = static_cast<const float4*>(partial.data());
  const float *x_scale_inv = x.scale_inv.data_as<float>(), *dy_scale_inv = dy.scale_inv.data_as<float>();
  const unsigned blocks = static_cast<unsigned>(ceil_div(kWeights / 4, 256));
  if (dw.dtype() == DType::F16)
    launch_kernel(fp8_wgrad_sum_kernel<__half>, blocks, 256, 0, stream, sums, splits, dw.data_as<__half>(), beta,
                  x_scale_inv, dy_scale_inv);
  else
    launch_kernel(fp8_wgrad_sum_kernel<float4>, blocks, 256, 0, stream, sums, splits, static_cast<float4*>(dw.data()),
                  beta, x_scale_inv, dy_scale_inv);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

bool fp8_conv2d_backward_filter_takes(const Shape& x, const Shape& dy, const Shape& dw, const Conv2dParams& p,
                                      Device device) {
  return wgrad_geometry(x, dy, dw, p, device);
}

bool fp8_conv2d_backward_filter_wgmma(const Fp8Tensor& x, const Fp8Tensor& dy, Tensor& dw, const Conv2dParams& p,
                                      float beta) {
  if (x.data.dtype() != DType::U8 || dy.data.dtype() != DType::U8 ||
      !(dw.dtype() == DType::F32 ? beta == 0.f || beta == 1.f : dw.dtype() == DType::F16 && beta == 0.f))
    return false;
  if (!phase_operands_on({&x.data, &dy.data, &dw}, {&x.scale_inv, &dy.scale_inv}, dw.device())) return false;
  if (!wgrad_geometry(x.data.shape(), dy.data.shape(), dw.shape(), p, dw.device())) return false;
  if (x.data.dim(0) > std::numeric_limits<int>::max()) return false;  // the kernel counts images in int
  constexpr Fp8Format E4M3 = Fp8Format::E4M3, E5M2 = Fp8Format::E5M2;
  if (x.format == E4M3)
    (dy.format == E5M2 ? launch_wgrad<E4M3, E5M2> : launch_wgrad<E4M3, E4M3>)(x, dy, dw, beta);
  else
    (dy.format == E5M2 ? launch_wgrad<E5M2, E5M2> : launch_wgrad<E5M2, E4M3>)(x, dy, dw, beta);
  return true;
}

}  // namespace gpu
}  // namespace ge
