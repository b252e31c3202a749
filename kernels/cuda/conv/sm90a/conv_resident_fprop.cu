// y = forward(x, w) of a 4x4, stride-2, pad-1 convolution with 128 channels in x and 256 in y, x
// 16 x 16 (D's third layer at 64x64 images; with an E5M2 x, G's third layer's backward-data), from
// FP8 codes on Hopper's warpgroup MMA, with the weights resident in registers:
//  - a block forms one quarter of y's channels (64, blockIdx.x % 4) for every image it takes. Its
//    two warpgroups hold that quarter's E4M3 weights as register fragments of m64n64k32 MMAs for
//    the whole kernel, warpgroup h the taps of kernel rows 2h and 2h + 1 (32 steps of 32 channels
//    of a tap, 128 registers a thread): the weights are read once a block. Streamed once an image
//    as conv_phase_fprop.cu streams its own, they would be 512 KiB an image, as long as the half
//    pass at L2's bandwidth (docs/performance.md);
//  - an image's x codes (32 KiB) sit in shared memory as parity_tile.cuh lays them out, so that a
//    tap is a descriptor's start address: one MMA of N = 64 (the image's 8 output rows of 8
//    columns, a core matrix each) a step. Four blocks read each image, one for each quarter; the
//    next image's codes load meanwhile;
//  - each warpgroup's sums cover half of K: the two hand each other, through shared memory, their
//    sums of the output rows the other writes (0..3 or 4..7), add them to their own (a + b is b +
//    a: the same bytes whichever adds), multiply by both scale_invs, round to half and store
//    through a stage as whole 128-byte pieces.
// Compiled for sm_90a only (wgmma): CMakeLists.txt builds this folder apart.
#include <cuda_fp16.h>

#include <algorithm>
#include <limits>

#include "cuda/conv/conv_phase_dgrad.h"
#include "cuda/conv/conv_phase_fprop.h"
#include "cuda/conv/sm90a/fp8_into_f16_launch.cuh"
#include "cuda/conv/sm90a/parity_tile.cuh"
#include "cuda/conv/sm90a/phase_mma.cuh"
#include "cuda/cuda_util.cuh"
#include "cuda/kernel_launch.cuh"

namespace ge {
namespace gpu {
namespace {

using namespace phase_mma;

constexpr FragmentLayout kLayout = FragmentLayout::ResidentForward;
constexpr FragmentWeight kWeight = fragment_weight(kLayout);
constexpr int kInChannels = kWeight.in_channels, kOutChannels = kWeight.out_channels;
constexpr int kQuarters = kOutChannels / kChannels;  // the blocks that read an image
constexpr int kSide = 16;                            // x's height and width
constexpr int kOutSide = kSide / 2;                  // y's
constexpr int kPixels = kOutSide * kOutSide;         // an image's output pixels: the MMA's N
using Tile = ParityTile<kSide, kInChannels>;
constexpr int kSlices = Tile::kSlices;
constexpr int kHalfSteps = 8 * kSlices;  // a warpgroup's: two kernel rows of taps
constexpr int kThreads = 2 * kWarpgroup;
// A warpgroup's sums of the other's output rows: four n8 blocks, 16 accumulators a thread.
constexpr int kHanded = 16;
constexpr size_t kExchangeBytes = size_t{2} * kHanded * kWarpgroup * sizeof(float);
constexpr size_t kHalfStageBytes = size_t{kPixels / 2} * kChannels * 2;  // 32 pixels of 64 halves
constexpr size_t kShared = 2 * size_t{Tile::kPieces} * 16 + kExchangeBytes + 2 * kHalfStageBytes;
static_assert(kShared <= 227 * 1024, "two x tiles, the exchange and the stages fit an H100/H200 block");
static_assert(kPixels == 64 && kOutSide == 8, "one m64n64 MMA a step: an output row a core matrix");

// Persistent blocks of two warpgroups, one an SM, a multiple of four of them: block b forms y's
// channels 64 (b % 4) .. + 63 of images b / 4, b / 4 + gridDim.x / 4, ... (frag: w's codes as
// weight_fragments::resident_forward lays them out). The sums are multiplied by *x_scale_inv *
// *w_scale_inv.
template <Fp8Format XFormat>
__global__ void __launch_bounds__(kThreads, 1)
    resident_fprop_kernel(const uint8_t* __restrict__ x, const uint4* __restrict__ frag, __half* __restrict__ y,
                          int images, const float* __restrict__ x_scale_inv, const float* __restrict__ w_scale_inv) {
  // Two tiles of Tile::kPieces 16-byte pieces, the exchange ([warpgroup][kHanded][128] floats), a
  // stage a warpgroup.
  extern __shared__ __align__(128) uint4 smem[];
  auto tile = [&](int k) { return smem + (k % 2) * Tile::kPieces; };  // item k's
  float* exchange = reinterpret_cast<float*>(smem + 2 * Tile::kPieces);
  const int tid = threadIdx.x, wg = tid / kWarpgroup, t = tid % kWarpgroup;
  const int quarter = static_cast<int>(blockIdx.x) % kQuarters;
  const int stride = static_cast<int>(gridDim.x) / kQuarters;
  char* stage = reinterpret_cast<char*>(exchange) + kExchangeBytes + wg * kHalfStageBytes;
  Tile::zero_borders(smem, 2, tid, kThreads);
  await_previous_kernel();
  uint4 a[kHalfSteps];
  const uint4* fp = frag + static_cast<size_t>(quarter * 2 + wg) * kHalfSteps * kWarpgroup + t;
#pragma unroll
  for (int s = 0; s < kHalfSteps; ++s) a[s] = __ldg(fp + s * kWarpgroup);
  const float scale = *x_scale_inv * *w_scale_inv;
  auto load = [&](int image, uint4* into) { Tile::load(x, image, into, tid, kThreads); };
  const uint32_t stage_row = stage_row_address(stage, t);
  float* handed = exchange + wg * kHanded * kWarpgroup;                // this warpgroup's to the other
  const float* received = exchange + (1 - wg) * kHanded * kWarpgroup;  // the other's to this one
  int image = static_cast<int>(blockIdx.x) / kQuarters;
  if (image < images) load(image, tile(0));
  for (int k = 0; image < images; ++k, image += stride) {
    await_tile();
    if (image + stride < images) load(image + stride, tile(k + 1));
    // N: output rows a = 0..7 (core matrices two tile rows apart), columns 0..7 (8 pieces).
    // Warpgroup wg's taps are kernel rows 2 wg and 2 wg + 1: its B operands start 2 wg tile rows on.
    const uint64_t half_desc = Tile::descriptor(tile(k) + 2 * wg * Tile::kRowPieces);
    float d[32];
    wgmma_fence();
#pragma unroll
    for (int s = 0; s < kHalfSteps; ++s)
      wgmma_fp8_m64n64k32_a_registers<XFormat>(d, a[s], half_desc + Tile::tap_offset(s / kSlices, s % kSlices), s > 0);
    wgmma_commit();
    wgmma_wait<0>();
    // n8 block j is output row j: warpgroup 0 writes rows 0..3 (d[0..15]), warpgroup 1 rows 4..7.
    float own[kHanded];
#pragma unroll
    for (int i = 0; i < kHanded; ++i) {
      own[i] = wg == 0 ? d[i] : d[kHanded + i];
      handed[i * kWarpgroup + t] = wg == 0 ? d[kHanded + i] : d[i];
    }
    // Both warpgroups' sums are handed over. The next image's are written only after its MMAs,
    // past the next await_tile, which every thread reaches after reading these.
    __syncthreads();
    uint32_t words[kHanded / 2];
#pragma unroll
    for (int i = 0; i < kHanded / 2; ++i) {
      const float lo = own[2 * i] + received[2 * i * kWarpgroup + t];
      const float hi = own[2 * i + 1] + received[(2 * i + 1) * kWarpgroup + t];
      const __half2 h = __floats2half2_rn(lo * scale, hi * scale);
      words[i] = *reinterpret_cast<const uint32_t*>(&h);
    }
    stage_results(stage_row, words);
    warpgroup_barrier(1 + wg);  // the stage is whole
    // 32 pixels of 8 chunks: thread t's chunk t % 8 of pixels t / 8 and t / 8 + 16. The stage is
    // next written past the next image's MMAs, after these reads.
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int pixel = t / 8 + 16 * i, part = t % 8;
      const uint4 v = *reinterpret_cast<const uint4*>(stage + pixel * 128 + (part ^ (pixel % 8)) * 16);
      const size_t out = static_cast<size_t>(image) * kPixels + kPixels / 2 * wg + pixel;
      *reinterpret_cast<uint4*>(y + out * kOutChannels + kChannels * quarter + 8 * part) = v;
    }
  }
}

constexpr Fp8IntoF16Launch kLaunch = {
    kLayout, resident_fprop_kernel<Fp8Format::E4M3>, resident_fprop_kernel<Fp8Format::E5M2>, kQuarters, kThreads,
    kShared};

}  // namespace

bool fp8_conv2d_forward_resident_takes(const Shape& x, const Shape& w, const Shape& y, const Conv2dParams& p,
                                       Device device) {
  if (x.size() != 4 || w.size() != 4 || y.size() != 4) return false;
  if (p.stride != 2 || p.pad != 1 || w != kWeight.shape() || x != Shape{x[0], kInChannels, kSide, kSide} ||
      y != Shape{x[0], kOutChannels, kOutSide, kOutSide})
    return false;
  if (x[0] < 1 || x[0] > std::numeric_limits<int>::max()) return false;  // images counted in int
  return device.is_cuda() && device_is_sm90(device.index);
}

bool fp8_conv2d_forward_resident(const Fp8Tensor& x, const Fp8Tensor& w, Tensor& y, const Conv2dParams& p) {
  if (!fp8_operands_into_f16(x, w, y) ||
      !fp8_conv2d_forward_resident_takes(x.data.shape(), w.data.shape(), y.shape(), p, y.device()))
    return false;
  launch_fp8_into_f16(kLaunch, x, w, y);
  return true;
}

}  // namespace gpu
}  // namespace ge
