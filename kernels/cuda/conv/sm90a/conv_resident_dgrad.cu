// dx = backward-data(dy, w) of a 4x4, stride-2, pad-1 convolution with 128 channels in dx and 256
// in dy, dy 8 x 8 (D's third layer's input gradient at 64x64 images; with E4M3 codes, G's third
// layer's forward), from FP8 codes on Hopper's warpgroup MMA, with the weights resident in
// registers (as conv_resident_fprop.cu holds the same layer's for its forward):
//  - output pixel (2a + pa, 2b + pb) takes four taps, two rows by two columns: dy row
//    a + pa + th - 1 with kernel row 3 - pa - 2 th (th = 0, 1), columns alike (conv_phase_dgrad.cu).
//    So each output phase (pa, pb) is a GEMM with M = 64 of dx's channels, N = the phase's 64
//    pixels (8 rows of 8, a core matrix each) and K = 4 taps x 256 channels: 32 m64n64k32 steps;
//  - a block takes one half of dx's channels (blockIdx.x % 2) and two of the four phases
//    (blockIdx.x / 2 % 2), one a warpgroup, for every image it takes. Each warpgroup holds its
//    phase's E4M3 weights for its 64 channels as register fragments for the whole kernel (128
//    registers a thread): the weights are read once a block, not streamed once an image;
//  - an image's dy codes (16 KiB) sit in shared memory once, with a zero border, as 16-byte pieces
//    (16 channels) in [channel group][row + 1][column + 1] order, so that the 8 pixels of a row
//    (shifted by any tap) are one core matrix and rows lie a fixed stride apart: a tap is a
//    descriptor's start address. Four blocks read each image; the next image's codes load meanwhile;
//  - each sum is multiplied by both scale_invs and rounded to half, and leaves through a
//    shared-memory stage as whole 128-byte pieces of 64 channels.
// Compiled for sm_90a only (wgmma): CMakeLists.txt builds this folder apart.
#include <cuda_fp16.h>

#include <algorithm>
#include <limits>

#include "cuda/conv/conv_phase_dgrad.h"
#include "cuda/conv/sm90a/fp8_into_f16_launch.cuh"
#include "cuda/conv/sm90a/phase_mma.cuh"
#include "cuda/cuda_util.cuh"
#include "cuda/kernel_launch.cuh"

namespace ge {
namespace gpu {
namespace {

using namespace phase_mma;

constexpr FragmentLayout kLayout = FragmentLayout::ResidentBackwardData;
constexpr FragmentWeight kWeight = fragment_weight(kLayout);
constexpr int kDyChannels = kWeight.out_channels, kDxChannels = kWeight.in_channels;
constexpr int kHalves = kDxChannels / kChannels;  // of dx's channels
constexpr int kBlocksPerImage = 2 * kHalves;      // two phases a block
constexpr int kSide = 8;                          // dy's height and width
constexpr int kPitch = kSide + 2;                 // a row with its zero border
constexpr int kPlane = kPitch * kPitch;           // a channel group's pieces
constexpr int kGroups = kDyChannels / 16;         // 16-byte pieces a dy pixel
constexpr int kTilePieces = kGroups * kPlane;
constexpr int kSlices = kDyChannels / 32;  // MMA steps a tap
constexpr int kSteps = 4 * kSlices;        // a phase's: taps x slices
constexpr int kPixels = kSide * kSide;     // a phase's: the MMA's N
constexpr int kThreads = 2 * kWarpgroup;
constexpr size_t kPhaseStageBytes = size_t{kPixels} * kChannels * 2;
constexpr size_t kShared = 2 * size_t{kTilePieces} * 16 + 2 * kPhaseStageBytes;
static_assert(kShared <= 227 * 1024, "two dy tiles and two stages fit an H100/H200 block");

// Where step s of phase (pa, pb) starts, in 16-byte pieces, from pa rows and pb pieces into the
// tile: tap (th, tw) = (s / kSlices / 2, s / kSlices % 2) of output pixel (0, 0) reads dy row
// pa + th - 1 and column pb + tw - 1 (tile row pa + th, column pb + tw), channel groups 2 slice and
// 2 slice + 1 (the descriptor's leading stride apart). Output pixel (a, b) of the phase reads a rows
// and b pieces on.
__host__ __device__ constexpr int step_offset(int s) {
  const int tap = s / kSlices, slice = s % kSlices;
  return 2 * slice * kPlane + tap / 2 * kPitch + tap % 2;
}

// Persistent blocks of two warpgroups, one an SM, a multiple of four of them: block q forms dx's
// channels 64 (q % 2) .. + 63 of phases 2 (q / 2 % 2) + warpgroup, for images q / 4,
// q / 4 + gridDim.x / 4, ... (frag: w's codes as weight_fragments::resident_backward_data lays
// them out). The sums are multiplied by *dy_scale_inv * *w_scale_inv.
template <Fp8Format DyFormat>
__global__ void __launch_bounds__(kThreads, 1)
    resident_dgrad_kernel(const uint8_t* __restrict__ dy, const uint4* __restrict__ frag, __half* __restrict__ dx,
                          int images, const float* __restrict__ dy_scale_inv, const float* __restrict__ w_scale_inv) {
  extern __shared__ __align__(128) uint4 smem[];  // two tiles of kTilePieces 16-byte pieces, a stage a warpgroup
  auto tile = [&](int k) { return smem + (k % 2) * kTilePieces; };  // item k's
  const int tid = threadIdx.x, wg = tid / kWarpgroup, t = tid % kWarpgroup;
  const int q = static_cast<int>(blockIdx.x), half = q % kHalves, phase = q / kHalves % 2 * 2 + wg;
  const int pa = phase / 2, pb = phase % 2;
  const int stride = static_cast<int>(gridDim.x) / kBlocksPerImage;
  char* stage = reinterpret_cast<char*>(smem + 2 * kTilePieces) + wg * kPhaseStageBytes;
  // The border rows and columns stay zero; the interiors take each image's dy.
  for (int i = tid; i < 2 * kTilePieces; i += kThreads) {
    const int at = i % kPlane, row = at / kPitch, col = at % kPitch;
    if (row == 0 || row == kPitch - 1 || col == 0 || col == kPitch - 1) smem[i] = make_uint4(0, 0, 0, 0);
  }
  await_previous_kernel();
  uint4 a[kSteps];
  const uint4* fp = frag + static_cast<size_t>(half * 4 + phase) * kSteps * kWarpgroup + t;
#pragma unroll
  for (int s = 0; s < kSteps; ++s) a[s] = __ldg(fp + s * kWarpgroup);
  const float scale = *dy_scale_inv * *w_scale_inv;
  auto load = [&](int image, uint4* into) {
    const char* src = reinterpret_cast<const char*>(dy + static_cast<size_t>(image) * kPixels * kDyChannels);
    for (int i = tid; i < kPixels * kGroups; i += kThreads) {
      const int pixel = i / kGroups, group = i % kGroups;
      copy_async_16(&into[group * kPlane + (pixel / kSide + 1) * kPitch + pixel % kSide + 1], src + size_t{16} * i,
                    true);
    }
    copy_async_commit();
  };
  const uint32_t stage_row = stage_row_address(stage, t);
  int image = q / kBlocksPerImage;
  if (image < images) load(image, tile(0));
  for (int k = 0; image < images; ++k, image += stride) {
    await_tile();
    if (image + stride < images) load(image + stride, tile(k + 1));
    // N: the phase's rows a = 0..7 (core matrices a tile row apart), columns 0..7 (8 pieces).
    const uint64_t phase_desc = smem_descriptor(shared_address(tile(k) + pa * kPitch + pb), 16 * kPlane, 16 * kPitch);
    float d[32];
    wgmma_fence();
#pragma unroll
    for (int s = 0; s < kSteps; ++s)
      wgmma_fp8_m64n64k32_a_registers<DyFormat>(d, a[s], phase_desc + step_offset(s), s > 0);
    wgmma_commit();
    wgmma_wait<0>();
    uint32_t words[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const __half2 h = __floats2half2_rn(d[2 * i] * scale, d[2 * i + 1] * scale);
      words[i] = *reinterpret_cast<const uint32_t*>(&h);
    }
    stage_results(stage_row, words);  // the phase's pixel 8 a + b a 128-byte row
    warpgroup_barrier(1 + wg);        // the stage is whole
    // 64 pixels of 8 chunks: thread t's chunk t % 8 of pixels t / 8 + 16 i. The stage is next
    // written past the next await_tile, after these reads.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int pixel = t / 8 + 16 * i, part = t % 8;
      const uint4 v = *reinterpret_cast<const uint4*>(stage + pixel * 128 + (part ^ (pixel % 8)) * 16);
      const size_t out =
          static_cast<size_t>(image) * 4 * kPixels + (2 * (pixel / kSide) + pa) * 2 * kSide + 2 * (pixel % kSide) + pb;
      *reinterpret_cast<uint4*>(dx + out * kDxChannels + kChannels * half + 8 * part) = v;
    }
  }
}

constexpr Fp8IntoF16Launch kLaunch = {
    kLayout, resident_dgrad_kernel<Fp8Format::E4M3>, resident_dgrad_kernel<Fp8Format::E5M2>, kBlocksPerImage, kThreads,
    kShared};

}  // namespace

bool fp8_conv2d_backward_data_resident_takes(const Shape& dy, const Shape& w, const Shape& dx, const Conv2dParams& p,
                                             Device device) {
  if (dy.size() != 4 || w.size() != 4 || dx.size() != 4) return false;
  if (p.stride != 2 || p.pad != 1 || w != kWeight.shape() || dy != Shape{dy[0], kDyChannels, kSide, kSide} ||
      dx != Shape{dy[0], kDxChannels, 2 * kSide, 2 * kSide})
    return false;
  if (dy[0] < 1 || dy[0] > std::numeric_limits<int>::max()) return false;  // images counted in int
  return device.is_cuda() && device_is_sm90(device.index);
}

bool fp8_conv2d_backward_data_resident(const Fp8Tensor& dy, const Fp8Tensor& w, Tensor& dx, const Conv2dParams& p) {
  if (!fp8_operands_into_f16(dy, w, dx) ||
      !fp8_conv2d_backward_data_resident_takes(dy.data.shape(), w.data.shape(), dx.shape(), p, dx.device()))
    return false;
  launch_fp8_into_f16(kLaunch, dy, w, dx);
  return true;
}

}  // namespace gpu
}  // namespace ge
