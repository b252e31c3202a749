// What the phase kernels share (conv_phase_dgrad.cu, conv_phase_fprop.cu): an image's operand in
// shared memory once, the weights as register fragments of m64n128 MMAs (A from registers, B the
// image through a descriptor), two MMA halves of 128 pixels per step, and the results leaving
// through shared-memory stages as whole 128-byte pieces of 64 channels, stored while the
// warpgroup's next MMAs run.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/conv/sm90a/wgmma.cuh"
#include "cuda/copy_async.cuh"
#include "ganengine/fp8.h"

namespace ge {
namespace gpu {
namespace phase_mma {

constexpr int kWarpgroup = kWarpgroupThreads;
constexpr int kChannels = 64;  // the results' channels a warpgroup forms: the MMA's M
// Weight fragments are loaded kAhead MMA steps before their step; each step waits for the one
// kInFlight steps back, whose fragment's registers are then reloaded. 7 and 1 were the fastest of
// the pairs timed for the backward-data (docs/performance.md).
constexpr int kAhead = 7;
constexpr int kInFlight = 1;
constexpr int kRing = kAhead + kInFlight;

// The operands the kernels multiply: f16 (O2 and O3), or FP8 codes (O4: the image operand E4M3
// or E5M2, the weights E4M3) whose sums are multiplied by both scale_invs. A 16-byte piece holds
// 8 channels of f16 or 16 of FP8; one MMA step takes a slice of 16 or 32 channels of one tap, two
// pieces along K either way.
struct HalfOperands {
  using Element = __half;
  static constexpr int kBytes = 2;
  static constexpr int kSliceChannels = 16;
  static constexpr bool kScaled = false;
};
template <Fp8Format ImageFormat>
struct Fp8Operands {
  using Element = uint8_t;
  static constexpr int kBytes = 1;
  static constexpr int kSliceChannels = 32;
  static constexpr bool kScaled = true;
  static constexpr Fp8Format kImage = ImageFormat;
};

// The 16 bytes thread `thread` of a warpgroup holds of an A operand (64 x kSliceChannels, element
// (row, col) from `at`), in the order wgmma.cuh's register-A MMAs (wgmma_m64n128k16,
// wgmma_fp8_m64n128k32_a_registers) take it: rows r = 16 warp + lane / 4 and r + 8.
template <class Op, class At>
__device__ __forceinline__ uint4 a_fragment(int thread, const At& at) {
  const int lane = thread % 32, r = 16 * (thread / 32) + lane / 4;
  uint32_t word[4];
  if constexpr (Op::kBytes == 2) {
    const int k = 2 * (lane % 4);
    const __half h[8] = {at(r, k),     at(r, k + 1), at(r + 8, k),     at(r + 8, k + 1),
                         at(r, k + 8), at(r, k + 9), at(r + 8, k + 8), at(r + 8, k + 9)};
    for (int j = 0; j < 4; ++j)
      word[j] = static_cast<uint32_t>(__half_as_ushort(h[2 * j])) |
                static_cast<uint32_t>(__half_as_ushort(h[2 * j + 1])) << 16;
  } else {
    const int k = 4 * (lane % 4);
    for (int j = 0; j < 4; ++j) {
      const int row = r + 8 * (j % 2), col = k + 16 * (j / 2);
      word[j] = 0;
      for (int b = 0; b < 4; ++b) word[j] |= static_cast<uint32_t>(at(row, col + b)) << (8 * b);
    }
  }
  return make_uint4(word[0], word[1], word[2], word[3]);
}

// The block's next image tile is in: this thread's copies have landed, made visible to the MMAs
// (written through the generic proxy, read through the async one), and every thread is here, so
// the other tile, the previous image's, is no longer read either.
__device__ __forceinline__ void await_tile() {
  copy_async_wait<0>();
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
}

// One MMA step of either operand form: d (+)= a * b over one slice of K, b (slice x 128) K-major in
// shared memory.
template <class Op>
__device__ __forceinline__ void mma_step(float (&d)[64], const uint4& a, uint64_t b_desc, bool accumulate) {
  if constexpr (Op::kBytes == 2)
    wgmma_m64n128k16(d, a, b_desc, accumulate);
  else
    wgmma_fp8_m64n128k32_a_registers<Op::kImage>(d, a, b_desc, accumulate);
}

// Named barrier `id` over the 128 threads of one warpgroup (0 is __syncthreads').
__device__ __forceinline__ void warpgroup_barrier(int id) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(kWarpgroup) : "memory");
}

// The results of one MMA half (128 pixels x 64 channels) on their way out: a pixel a 128-byte
// row, its 16-byte chunk c at position c ^ (pixel % 8), so that stmatrix's eight rows and the
// stores' reads of a row fall in different banks. A warpgroup has two, one for each half.
constexpr size_t kStageBytes = size_t{128} * kChannels * 2;
constexpr size_t kWarpgroupStageBytes = 2 * kStageBytes;

// One MMA half's results (scaled for FP8 operands) rounded to half, as the output holds them:
// words[k] = d[2k], d[2k + 1].
template <class Op>
__device__ __forceinline__ void results_as_halves(const float (&d)[64], float scale, uint32_t (&words)[32]) {
#pragma unroll
  for (int k = 0; k < 32; ++k) {
    const __half2 h = Op::kScaled ? __floats2half2_rn(d[2 * k] * scale, d[2 * k + 1] * scale)
                                  : __floats2half2_rn(d[2 * k], d[2 * k + 1]);
    words[k] = *reinterpret_cast<const uint32_t*>(&h);
  }
}

// Thread t's stmatrix row address in a warpgroup's stages: lane 8 j + k gives row k of matrix j,
// pixel 8 (j / 2) + k (so pixel % 8 is k), chunk 2 warp + j % 2 (channels 16 warp + 8 (j % 2) ...).
__device__ __forceinline__ uint32_t stage_row_address(const char* stage, int t) {
  const int warp = t / 32, lane = t % 32, j = lane / 8, k = lane % 8;
  return shared_address(stage) + (8 * (j / 2) + k) * 128 + ((2 * warp + j % 2) ^ k) * 16;
}

// One MMA half's words (or those of kWords / 2 of its n8 blocks) into its stage, transposed (a
// row of 64 channels per pixel) for each pixel's 128 bytes to leave whole. Matrices of one
// stmatrix: n8 blocks i and i + 1 (pixel rows i, i + 1 of the half), channels 16 warp + 0..7 and
// + 8..15; words 2i, 2i + 1 hold (channel 16 warp + lane / 4, pixels 2 (lane % 4), + 1) and
// (channel + 8, the same pixels).
template <int kWords>
__device__ __forceinline__ void stage_results(uint32_t stage_row, const uint32_t (&words)[kWords]) {
  static_assert(kWords % 4 == 0, "whole stmatrix groups of two n8 blocks");
#pragma unroll
  for (int i = 0; i < kWords / 2; i += 2)
    asm volatile(
        "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(stage_row + 8 * i * 128),
        "r"(words[2 * i]), "r"(words[2 * i + 1]), "r"(words[2 * i + 2]), "r"(words[2 * i + 3])
        : "memory");
}

// A warpgroup's results in its stages, still to be stored: stored right after the MMAs that
// formed them, they would hold up the next MMAs; stored between the next MMA steps, they overlap
// those MMAs. The pixel at row a, column b of a half's 16 x 8 grid (a pixel's index in the half
// is 8 a + b) is the output's pixel first + a kRowStep + (8 half + b) kColumnStep, counted from
// `out` in pixels kPixelStride halves apart.
constexpr int kPendingPerThread = 16;  // 2 halves x 128 pixels x 8 chunks / 128 threads
template <int kRowStep, int kColumnStep, int kPixelStride>
struct PendingStores {
  __half* out = nullptr;  // the output's pixel 0 at the results' first channel; nullptr: nothing pending
  int first = 0;          // the output pixel of the results' first
  // Thread t's store i: half i / 8, pixel t / 8 + 16 (i % 8) of that half, chunk t % 8.
  __device__ __forceinline__ void store(const char* stage, int t, int i) const {
    const int half = i / 8, pixel = t / 8 + 16 * (i % 8), part = t % 8;
    const int a = pixel / 8, b = 8 * half + pixel % 8;
    const uint4 v =
        *reinterpret_cast<const uint4*>(stage + half * kStageBytes + pixel * 128 + (part ^ (pixel % 8)) * 16);
    *reinterpret_cast<uint4*>(out + (first + a * kRowStep + b * kColumnStep) * kPixelStride + 8 * part) = v;
  }
};

}  // namespace phase_mma
}  // namespace gpu
}  // namespace ge
