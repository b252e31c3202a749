// y = forward(x, w) of a 4x4, stride-2, pad-1 convolution with 64 channels in x and 128 in y, x
// 32 x 32 (D's second layer at 64x64 images, whose forward is also G's fourth layer's
// backward-data), from FP8 codes on Hopper's warpgroup MMA, the phase kernels' structure
// (phase_mma.cuh) with the columns split by parity instead of the outputs by phase:
//  - an image's x codes (64 KiB) sit in shared memory once, as parity_tile.cuh lays them out, so
//    that a tap is only a descriptor's start address;
//  - each warpgroup forms 64 of y's 128 channels for the image's 256 pixels: two MMAs of N = 128
//    (output columns 0..7 and 8..15, all 16 rows) per 32 channels of a tap, 32 steps of two
//    m64n128k32 with E4M3 weights in registers (phase_mma::a_fragment), kAhead steps ahead;
//  - persistent blocks of two warpgroups, one an SM, an image an item; the next image's x loads
//    into a second tile meanwhile; results leave through shared-memory stages as whole 128-byte
//    pieces, stored to y while the warpgroup's next image's MMAs run; each sum is multiplied by both
//    scale_invs before its rounding to half.
// FP8 only: the tile in half (128 KiB) would leave no room for a second. Compiled for sm_90a only
// (wgmma): CMakeLists.txt builds this folder apart.
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

constexpr FragmentLayout kLayout = FragmentLayout::PhaseForward;
constexpr FragmentWeight kWeight = fragment_weight(kLayout);
constexpr int kInChannels = kWeight.in_channels, kOutChannels = kWeight.out_channels;
static_assert(kOutChannels == 2 * kChannels, "each warpgroup forms half of the output channels");
constexpr int kSide = 32;            // x's height and width
constexpr int kOutSide = kSide / 2;  // y's
using Tile = ParityTile<kSide, kInChannels>;
constexpr int kSlices = Tile::kSlices;
constexpr int kSteps = 16 * kSlices;  // an image's: taps x slices
constexpr int kThreads = 2 * kWarpgroup;
constexpr size_t kShared = 2 * size_t{Tile::kPieces} * 16 + 2 * kWarpgroupStageBytes;
static_assert(kShared <= 227 * 1024, "two x tiles and four stages fit an H100/H200 block");
static_assert(kSteps % kRing == 0, "an image's steps must fill the ring whole");
static_assert(kSteps >= kPendingPerThread, "an image's steps carry the last one's stores");

// Persistent blocks of two warpgroups, one block an SM, an image an item, warpgroup wg forming y's
// channels 64 wg .. 64 wg + 63 from its kSteps fragments a thread (frag: w's codes as
// weight_fragments::phase_forward lays them out). The sums are multiplied by *x_scale_inv *
// *w_scale_inv.
template <Fp8Format XFormat>
__global__ void __launch_bounds__(kThreads, 1)
    phase_fprop_kernel(const uint8_t* __restrict__ x, const uint4* __restrict__ frag, __half* __restrict__ y,
                       int images, const float* __restrict__ x_scale_inv, const float* __restrict__ w_scale_inv) {
  using Op = Fp8Operands<XFormat>;
  extern __shared__ __align__(128) uint4 smem[];  // two tiles of Tile::kPieces 16-byte pieces, two stages a warpgroup
  auto tile = [&](int k) { return smem + (k % 2) * Tile::kPieces; };  // item k's
  const int tid = threadIdx.x, wg = tid / kWarpgroup, t = tid % kWarpgroup;
  char* stage = reinterpret_cast<char*>(smem + 2 * Tile::kPieces) + wg * kWarpgroupStageBytes;
  Tile::zero_borders(smem, 2, tid, kThreads);
  await_previous_kernel();
  const float scale = *x_scale_inv * *w_scale_inv;
  auto load = [&](int image, uint4* into) { Tile::load(x, image, into, tid, kThreads); };
  const uint4* fp = frag + static_cast<size_t>(wg) * kSteps * kWarpgroup + t;
  uint4 a[kRing];
#pragma unroll
  for (int s = 0; s < kAhead; ++s) a[s] = __ldg(fp + s * kWarpgroup);
  const uint32_t stage_row = stage_row_address(stage, t);
  // y's pixel 256 image + 16 a + b, 128 channels a pixel, from y at the warpgroup's first channel.
  PendingStores<kOutSide, 1, kOutChannels> pending;
  int image = blockIdx.x;
  if (image < images) load(image, tile(0));
  for (int k = 0; image < images; ++k, image += gridDim.x) {
    await_tile();
    if (image + static_cast<int>(gridDim.x) < images) load(image + gridDim.x, tile(k + 1));
    // N: output rows a = 0..15 (core matrices two tile rows apart), columns b..b+7 (8 pieces).
    const uint64_t image_desc = Tile::descriptor(tile(k));
    float d0[64], d1[64];
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      const uint64_t desc = image_desc + Tile::tap_offset(s / kSlices, s % kSlices);  // 16-byte units
      wgmma_fence();
      mma_step<Op>(d0, a[s % kRing], desc, s > 0);
      mma_step<Op>(d1, a[s % kRing], desc + 8, s > 0);  // columns 8..15: 8 pieces on
      wgmma_commit();
      wgmma_wait<kInFlight>();  // step s - kInFlight's MMAs are done: its fragment's registers are free
      // The fragments repeat from image to image: the last steps load the next image's first.
      a[(s + kAhead) % kRing] = __ldg(fp + ((s + kAhead) % kSteps) * kWarpgroup);
      if (s < kPendingPerThread && pending.out) pending.store(stage, t, s);
    }
    wgmma_wait<0>();
    warpgroup_barrier(1 + wg);  // every thread's pending stores have read the stages
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      uint32_t words[32];
      results_as_halves<Op>(half ? d1 : d0, scale, words);
      stage_results(stage_row + half * kStageBytes, words);
    }
    warpgroup_barrier(1 + wg);  // the stages are whole
    pending.out = y + kChannels * wg;
    pending.first = image * kOutSide * kOutSide;
  }
  if (pending.out)  // the last image's results
#pragma unroll
    for (int i = 0; i < kPendingPerThread; ++i) pending.store(stage, t, i);
}

bool fprop_geometry(const Shape& x, const Shape& w, const Shape& y, const Conv2dParams& p, Device device) {
  if (x.size() != 4 || w.size() != 4 || y.size() != 4) return false;
  if (p.stride != 2 || p.pad != 1 || w != kWeight.shape() || x != Shape{x[0], kInChannels, kSide, kSide} ||
      y != Shape{x[0], kOutChannels, kOutSide, kOutSide})
    return false;
  // The stores index y's halves in int (PendingStores).
  if (x[0] > std::numeric_limits<int>::max() / (kOutSide * kOutSide * kOutChannels)) return false;
  return device.is_cuda() && device_is_sm90(device.index);
}

constexpr Fp8IntoF16Launch kLaunch = {kLayout,
                                      phase_fprop_kernel<Fp8Format::E4M3>,
                                      phase_fprop_kernel<Fp8Format::E5M2>,
                                      /*blocks_per_image=*/1,
                                      kThreads,
                                      kShared};

}  // namespace

bool fp8_conv2d_forward_phases_takes(const Shape& x, const Shape& w, const Shape& y, const Conv2dParams& p,
                                     Device device) {
  return fprop_geometry(x, w, y, p, device);
}

bool fp8_conv2d_forward_phases(const Fp8Tensor& x, const Fp8Tensor& w, Tensor& y, const Conv2dParams& p) {
  if (!fp8_operands_into_f16(x, w, y) || !fprop_geometry(x.data.shape(), w.data.shape(), y.shape(), p, y.device()))
    return false;
  launch_fp8_into_f16(kLaunch, x, w, y);
  return true;
}

}  // namespace gpu
}  // namespace ge
