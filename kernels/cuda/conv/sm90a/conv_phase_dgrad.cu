// dx = backward-data(dy, w) of a 4x4, stride-2, pad-1 convolution with 64 channels in dx and 128
// in dy, dy 16 x 16 (the DCGAN's second layer at 64x64 images, whose backward-data is also G's
// fourth layer's forward), on Hopper's warpgroup MMA. cuDNN's best kernel for this shape (an
// implicit GEMM of 256 x 64 tiles) leaves the Tensor Cores idle much of the time: docs/performance.md.
//
// Output pixel (2a + pa, 2b + pb) takes exactly four taps, two rows by two columns: row
// a + pa + th - 1 with kernel row kh = 3 - pa - 2 th (th = 0, 1), columns alike. So each output
// phase (pa, pb) is a 16 x 16 grid computed as a GEMM with M = 64 output channels, N = the
// phase's 256 pixels and K = 4 taps x 128 channels, written transposed (d = w^T dy^T) so that the
// 64 channels fill the MMA's M and the pixels its N:
//  - an image's dy (64 KiB) sits in shared memory once, with a zero border, as 16-byte pieces in
//    [channel group of 8][row + 1][column + 1] order, so that the 8 pixels a..a+7 of a row (any
//    shift by a tap) are one 128-byte core matrix and rows are a fixed stride apart: a tap is
//    only a descriptor's start address;
//  - a phase is two MMAs of N = 128 (columns 0..7 and 8..15 of its grid) per 16 channels of a
//    tap: 32 steps of two m64n128k16;
//  - w arrives as register fragments, rearranged by phase_weights_kernel (FP8 codes: laid out
//    ahead, or now, by weight_fragments.h) into the order each thread loads them in (16 bytes a
//    thread a step, from L2), kAhead steps ahead;
//  - persistent blocks of two warpgroups, one an SM, each warpgroup taking half of an item's
//    phases; the next item's dy loads into a second tile meanwhile; results leave through
//    shared-memory stages (stmatrix, transposed) as whole 128-byte pixels, stored to dx while the
//    warpgroup's next phase runs;
//  - as G's fourth layer, the kernel also forms its output's per-channel moments for the
//    BatchNorm after it (from the values as rounded to half), so that pass need not read dx.
// With FP8 operands (O4's codes, ops::fp8_conv2d_backward_data) the same structure holds with
// half the bytes: 16 channels a piece (dy's tile 32 KiB), 32 channels a step (16 steps of two
// m64n128k32 with E4M3 weights in registers), each sum times both scale_invs before its rounding.
// Compiled for sm_90a only (wgmma): CMakeLists.txt builds this folder apart.
#include <cuda_fp16.h>

#include <algorithm>
#include <initializer_list>

#include "cuda/aligned.h"
#include "cuda/conv/conv_phase_dgrad.h"
#include "cuda/conv/sm90a/phase_mma.cuh"
#include "cuda/conv/sm90a/weight_fragments.cuh"
#include "cuda/copy_async.cuh"
#include "cuda/cuda_util.cuh"
#include "cuda/kernel_launch.cuh"

namespace ge {
namespace gpu {
namespace {

using namespace phase_mma;

constexpr int kSide = 16;          // dy's height and width
constexpr int kPitch = kSide + 2;  // a row with its zero border
constexpr int kPlane = kPitch * kPitch;
constexpr int kThreads = 2 * kWarpgroup;  // a block: two warpgroups
// The weight, whose fragments the half kernel reads in the FP8 kernel's layout too.
constexpr FragmentLayout kLayout = FragmentLayout::PhaseBackwardData;
constexpr FragmentWeight kWeight = fragment_weight(kLayout);
constexpr int kDyChannels = kWeight.out_channels;
static_assert(kWeight.in_channels == kChannels, "a warpgroup forms all of dx's channels");
// dx pixel (2 a + pa, 2 b + pb) of the 32 x 32 image, from the phase's first pixel (pa, pb).
using PhaseStores = PendingStores<2 * 2 * kSide, 2, kChannels>;

template <class Op, int K>
constexpr int kSlices = K / Op::kSliceChannels;  // MMA steps per tap
template <class Op, int K>
constexpr int kSteps = 4 * kSlices<Op, K>;  // per phase: taps x slices
template <class Op, int K>
constexpr int kPieces = K* Op::kBytes / 16;  // 16-byte pieces a dy pixel

template <class Op, int K>
constexpr size_t kTileBytes = size_t{kPieces<Op, K>} * kPlane * 16;
template <class Op, int K>
constexpr size_t kShared = 2 * kTileBytes<Op, K> + 2 * kWarpgroupStageBytes;
static_assert(kShared<HalfOperands, kDyChannels> <= 227 * 1024, "two dy tiles and four stages fit an H100/H200 block");

// The half path's weights as fragments (the FP8 path's: weight_fragments_for), in the order
// weight_fragments::phase_backward_data gives: frag[((phase * 4 + tap) * kSlices + slice) * 128 +
// thread], the order each thread loads them in.
template <class Op, int K>
__global__ void phase_weights_kernel(const typename Op::Element* w, uint4* frag) {
  await_previous_kernel();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 16 * kSlices<Op, K> * kWarpgroup) frag[i] = weight_fragments::phase_backward_data<Op, K>(w, i);
}

// A thread's running count, mean and sum of squared deviations of the values it wrote of its
// two channels (rows 16 warp + lane / 4 and + 8 of the MMA), for the BatchNorm after G's layer.
struct ThreadMoments {
  float n = 0.f, mean[2] = {0.f, 0.f}, m2[2] = {0.f, 0.f};
  // Chan et al.'s combination with a part of count nb, mean mb and squared deviations m2b.
  __device__ __forceinline__ void merge(int j, float nb, float mb, float m2b) {
    const float total = n + nb, share = nb / total, delta = mb - mean[j];
    mean[j] += delta * share;
    m2[j] += m2b + delta * delta * n * share;
  }
};

// Adds one MMA half's results, as rounded to half for dx (words[k]: d[2k], d[2k + 1]), to the
// thread's moments: each channel's 32 values in two passes (their mean, then their squared
// deviations from it), then merged.
__device__ __forceinline__ void add_moments(const uint32_t (&words)[32], ThreadMoments& m) {
#pragma unroll
  for (int j = 0; j < 2; ++j) {  // channel row g (words 2i) and g + 8 (words 2i + 1)
    float2 v[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) v[i] = __half22float2(*reinterpret_cast<const __half2*>(&words[2 * i + j]));
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < 16; ++i) sum += v[i].x + v[i].y;
    const float mean = sum * (1.f / 32.f);
    float m2 = 0.f;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const float a = v[i].x - mean, b = v[i].y - mean;
      m2 = fmaf(a, a, m2);
      m2 = fmaf(b, b, m2);
    }
    m.merge(j, 32.f, mean, m2);
  }
  m.n += 32.f;
}

// Phases first .. first + count - 1 of one image by one warpgroup (thread t of 128): kSteps MMA
// steps each from the dy tile at shared address `tile`, then the results into the warpgroup's stages
// (`stage`), pending until the next phase (of this item or the next) stores them into dx's image
// `out`, multiplied by `scale`. The weight fragments run kAhead steps ahead across phases (a
// warpgroup's phases are consecutive, and so are their fragments).
template <class Op, int K, bool kMoments>
__device__ __forceinline__ void compute_phases(uint32_t tile, int first, int count, const uint4* __restrict__ frag,
                                               __half* __restrict__ out, char* stage, int t, int barrier, float scale,
                                               ThreadMoments& moments, PhaseStores& pending) {
  constexpr int kStepsPerPhase = kSteps<Op, K>;
  static_assert(kStepsPerPhase % kRing == 0, "a phase's steps must fill the ring whole");
  static_assert(kStepsPerPhase >= kPendingPerThread, "a phase's steps carry the last one's stores");
  const uint4* fp = frag + static_cast<size_t>(first) * kStepsPerPhase * kWarpgroup + t;
  uint4 a[kRing];
#pragma unroll
  for (int s = 0; s < kAhead; ++s) a[s] = __ldg(fp + s * kWarpgroup);
  const uint32_t stage_row = stage_row_address(stage, t);
#pragma unroll 1
  for (int phase = first; phase < first + count; ++phase, fp += kStepsPerPhase * kWarpgroup) {
    const int pa = phase / 2, pb = phase % 2;
    const bool next = phase + 1 < first + count;
    // Tap (th, tw) of slice `slice` starts at piece 2 slice kPlane + (pa + th) kPitch + pb + tw of
    // the tile: the phase's descriptor plus a constant of the step.
    const uint64_t phase_desc = smem_descriptor(tile + 16u * (pa * kPitch + pb), 16 * kPlane, 16 * kPitch);
    float d0[64], d1[64];
#pragma unroll
    for (int s = 0; s < kStepsPerPhase; ++s) {
      const int tap = s / kSlices<Op, K>, slice = s % kSlices<Op, K>;
      const uint64_t desc = phase_desc + (2 * slice * kPlane + (tap / 2) * kPitch + tap % 2);  // 16-byte units
      wgmma_fence();
      mma_step<Op>(d0, a[s % kRing], desc, s > 0);
      mma_step<Op>(d1, a[s % kRing], desc + 8, s > 0);  // columns 8..15: 8 pieces on
      wgmma_commit();
      wgmma_wait<kInFlight>();  // step s - kInFlight's MMAs are done: its fragment's registers are free
      if (s + kAhead < kStepsPerPhase || next) a[(s + kAhead) % kRing] = __ldg(fp + (s + kAhead) * kWarpgroup);
      if (s < kPendingPerThread && pending.out) pending.store(stage, t, s);
    }
    wgmma_wait<0>();
    // Every thread's pending stores have read the stages; the results go in, a pixel's 64 channels
    // a row.
    warpgroup_barrier(barrier);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      uint32_t words[32];
      results_as_halves<Op>(half ? d1 : d0, scale, words);
      if constexpr (kMoments) add_moments(words, moments);
      stage_results(stage_row + half * kStageBytes, words);
    }
    warpgroup_barrier(barrier);  // the stages are whole
    pending.out = out;
    pending.first = pa * 2 * kSide + pb;
  }
}

// Persistent blocks of two warpgroups, one block an SM: item `item` is image item /
// (4 / phases_per_item) and its phases_per_item phases from (item % (4 / phases_per_item)) *
// phases_per_item, half of them for each warpgroup. The next item's dy loads into the other tile
// while this one's MMAs run. With kMoments, block b also writes the count, mean and squared
// deviations of each channel's values it wrote to moments[field][b][channel], fields in that order
// (a fixed tree: the threads' running moments, the four threads of a row group, the two
// warpgroups). FP8 operands: the sums are multiplied by *dy_scale_inv * *w_scale_inv.
template <class Op, int K, bool kMoments>
__global__ void __launch_bounds__(kThreads, 1)
    phase_dgrad_kernel(const typename Op::Element* __restrict__ dy, const uint4* __restrict__ frag,
                       __half* __restrict__ dx, int images, int phases_per_item, float* __restrict__ moments,
                       const float* __restrict__ dy_scale_inv, const float* __restrict__ w_scale_inv) {
  extern __shared__ __align__(128) uint4 smem[];  // two tiles of [kPieces][kPitch][kPitch] 16-byte pieces, two stages
  constexpr int kGroups = kPieces<Op, K>;
  constexpr int kTilePieces = kGroups * kPlane;
  auto tile = [&](int k) { return smem + (k % 2) * kTilePieces; };  // item k's
  const int tid = threadIdx.x, wg = tid / kWarpgroup, t = tid % kWarpgroup;
  char* stage = reinterpret_cast<char*>(smem + 2 * kTilePieces) + wg * kWarpgroupStageBytes;
  const int items_per_image = 4 / phases_per_item, items = images * items_per_image;
  // The borders stay zero; the interiors take each item's dy.
  for (int i = tid; i < 2 * kTilePieces; i += kThreads) {
    const int q = i % kPlane, row = q / kPitch, col = q % kPitch;
    if (row == 0 || row == kPitch - 1 || col == 0 || col == kPitch - 1) smem[i] = make_uint4(0, 0, 0, 0);
  }
  await_previous_kernel();
  const float scale = Op::kScaled ? *dy_scale_inv * *w_scale_inv : 1.f;
  auto load = [&](int item, uint4* into) {
    const char* src =
        reinterpret_cast<const char*>(dy + static_cast<size_t>(item / items_per_image) * kSide * kSide * K);
    for (int q = tid; q < kSide * kSide * kGroups; q += kThreads) {
      const int pixel = q / kGroups, group = q % kGroups;
      copy_async_16(&into[group * kPlane + (pixel / kSide + 1) * kPitch + pixel % kSide + 1], src + size_t{16} * q,
                    true);
    }
    copy_async_commit();
  };
  ThreadMoments thread_moments;
  PhaseStores pending;
  int item = blockIdx.x;
  if (item < items) load(item, tile(0));
  for (int k = 0; item < items; ++k, item += gridDim.x) {
    await_tile();
    if (item + static_cast<int>(gridDim.x) < items) load(item + gridDim.x, tile(k + 1));
    const int image = item / items_per_image, mine = phases_per_item / 2;
    const int first = item % items_per_image * phases_per_item + wg * mine;
    __half* out = dx + static_cast<size_t>(image) * (2 * kSide) * (2 * kSide) * kChannels;
    compute_phases<Op, K, kMoments>(shared_address(tile(k)), first, mine, frag, out, stage, t, 1 + wg, scale,
                                    thread_moments, pending);
  }
  if (pending.out) {  // the last phase's results
#pragma unroll
    for (int i = 0; i < kPendingPerThread; ++i) pending.store(stage, t, i);
    warpgroup_barrier(1 + wg);  // read before the moments below reuse the stage
  }
  if constexpr (kMoments) {
    ThreadMoments& m = thread_moments;
#pragma unroll
    for (int lanes = 1; lanes <= 2; lanes *= 2) {
      const float nb = __shfl_xor_sync(0xffffffffu, m.n, lanes);
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const float mb = __shfl_xor_sync(0xffffffffu, m.mean[j], lanes);
        const float m2b = __shfl_xor_sync(0xffffffffu, m.m2[j], lanes);
        m.merge(j, nb, mb, m2b);
      }
      m.n += nb;
    }
    // Each warpgroup's 64 channels through its own stage, free after its last item.
    float* mine = reinterpret_cast<float*>(stage);
    const int lane = t % 32, warp = t / 32;
    if (lane % 4 == 0)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int c = 16 * warp + lane / 4 + 8 * j;
        mine[c] = m.n;
        mine[kChannels + c] = m.mean[j];
        mine[2 * kChannels + c] = m.m2[j];
      }
    __syncthreads();
    if (tid < kChannels) {
      const float* first = reinterpret_cast<const float*>(reinterpret_cast<char*>(smem + 2 * kTilePieces));
      const float* second =
          reinterpret_cast<const float*>(reinterpret_cast<char*>(smem + 2 * kTilePieces) + kWarpgroupStageBytes);
      ThreadMoments total;
      total.n = first[tid];
      total.mean[0] = first[kChannels + tid];
      total.m2[0] = first[2 * kChannels + tid];
      total.merge(0, second[tid], second[kChannels + tid], second[2 * kChannels + tid]);
      total.n += second[tid];
      const size_t at = static_cast<size_t>(blockIdx.x) * kChannels + tid, field = size_t{gridDim.x} * kChannels;
      moments[at] = total.n;
      moments[field + at] = total.mean[0];
      moments[2 * field + at] = total.m2[0];
    }
  }
}

// frag: w as fragments in phase_weights_kernel's order. moments: the kernel's per-block moments,
// (3, blocks, 64) f32, where asked for (nullptr: none). dy_scale_inv, w_scale_inv: FP8 operands'
// (device), nullptr for f16.
template <class Op, int K, bool kMoments>
void launch_phase_dgrad(const Tensor& dy, const Tensor& frag, Tensor& dx, Tensor* moments,
                        const float* dy_scale_inv = nullptr, const float* w_scale_inv = nullptr) {
  using Element = typename Op::Element;
  cudaStream_t stream = stream_of(dx);
  auto kernel = phase_dgrad_kernel<Op, K, kMoments>;
  const int device = dx.device().index;
  set_function_attribute_once(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kShared<Op, K>),
                              device);
  // An item is an image's four phases, or two of them where the images are fewer than the SMs.
  const int sms = sm_count(device);
  const int images = static_cast<int>(dy.dim(0));
  const int phases_per_item = images >= sms ? 4 : 2;
  const int items = images * (4 / phases_per_item);
  const int blocks = std::min(items, sms);
  float* moments_out = nullptr;
  if (kMoments) {
    *moments = Tensor::empty({3, blocks, kChannels}, DType::F32, dx.device());
    moments_out = moments->data_as<float>();
  }
  launch_kernel(kernel, static_cast<unsigned>(blocks), kThreads, kShared<Op, K>, stream,
                static_cast<const Element*>(dy.data()), static_cast<const uint4*>(frag.data()), dx.data_as<__half>(),
                images, phases_per_item, moments_out, dy_scale_inv, w_scale_inv);
  CUDA_CHECK_LAUNCH();
}

// The shapes and device the kernel takes, whatever the operands' dtypes.
bool phase_geometry(const Shape& dy, const Shape& w, const Shape& dx, const Conv2dParams& p, Device device) {
  if (dy.size() != 4 || w.size() != 4 || dx.size() != 4) return false;
  if (p.stride != 2 || p.pad != 1 || w != kWeight.shape() || dy[1] != kDyChannels || dy[2] != kSide || dy[3] != kSide ||
      dx[0] != dy[0] || dx[1] != kChannels || dx[2] != 2 * kSide || dx[3] != 2 * kSide)
    return false;
  return device.is_cuda() && device_is_sm90(device.index);
}

// phase_geometry, with the layout and alignment the kernel reads and writes.
bool phase_shapes(const Tensor& dy, const Tensor& w, const Tensor& dx, const Conv2dParams& p) {
  return phase_operands_on({&dy, &w, &dx}, {}, dx.device()) &&
         phase_geometry(dy.shape(), w.shape(), dx.shape(), p, dx.device());
}

}  // namespace

// The kernels above are built for sm_90a, which runs on compute capability 9.0 only.
bool device_is_sm90(int device) {
  static int known[64] = {};  // 0: not asked yet, 1: 9.0, 2: another
  if (device < 0 || device >= 64) return false;
  if (!known[device]) {
    int major = 0, minor = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    known[device] = major == 9 && minor == 0 ? 1 : 2;
  }
  return known[device] == 1;
}

bool fp8_operands_into_f16(const Fp8Tensor& a, const Fp8Tensor& w, const Tensor& out) {
  return a.data.dtype() == DType::U8 && w.data.dtype() == DType::U8 && w.format == Fp8Format::E4M3 &&
         out.dtype() == DType::F16 &&
         phase_operands_on({&a.data, &w.data, &out}, {&a.scale_inv, &w.scale_inv}, out.device());
}

bool phase_operands_on(std::initializer_list<const Tensor*> tensors, std::initializer_list<const Tensor*> scale_invs,
                       Device device) {
  for (const Tensor* t : tensors)
    if (t->format() != MemoryFormat::NHWC || !aligned16(t->data()) || t->device() != device) return false;
  for (const Tensor* s : scale_invs)
    if (s->dtype() != DType::F32 || s->numel() != 1 || s->device() != device) return false;
  return true;
}

bool conv2d_backward_data_phases_applies(const Tensor& dy, const Tensor& w, const Tensor& dx, const Conv2dParams& p) {
  if (dy.dtype() != DType::F16 || w.dtype() != DType::F16 || dx.dtype() != DType::F16) return false;
  return phase_shapes(dy, w, dx, p);
}

bool conv2d_backward_data_phases(const Tensor& dy, const Tensor& w, Tensor& dx, const Conv2dParams& p,
                                 Tensor* moments) {
  if (!conv2d_backward_data_phases_applies(dy, w, dx, p)) return false;
  const int fragments = 16 * kSlices<HalfOperands, kDyChannels> * kWarpgroup;
  Tensor frag = Tensor::empty({int64_t{fragments} * 16}, DType::U8, dx.device());
  launch_kernel(phase_weights_kernel<HalfOperands, kDyChannels>, static_cast<unsigned>(ceil_div(fragments, 256)), 256,
                0, stream_of(dx), w.data_as<const __half>(), static_cast<uint4*>(frag.data()));
  CUDA_CHECK_LAUNCH();
  if (moments)
    launch_phase_dgrad<HalfOperands, kDyChannels, true>(dy, frag, dx, moments);
  else
    launch_phase_dgrad<HalfOperands, kDyChannels, false>(dy, frag, dx, nullptr);
  return true;
}

bool fp8_conv2d_backward_data_phases_takes(const Shape& dy, const Shape& w, const Shape& dx, const Conv2dParams& p,
                                           Device device) {
  return phase_geometry(dy, w, dx, p, device);
}

bool fp8_conv2d_backward_data_phases(const Fp8Tensor& dy, const Fp8Tensor& w, Tensor& dx, const Conv2dParams& p,
                                     Tensor* moments) {
  if (dy.data.dtype() != DType::U8 || w.data.dtype() != DType::U8 || w.format != Fp8Format::E4M3 ||
      dx.dtype() != DType::F16 || !phase_shapes(dy.data, w.data, dx, p) ||
      !phase_operands_on({}, {&dy.scale_inv, &w.scale_inv}, dx.device()))
    return false;
  const float *dy_scale_inv = dy.scale_inv.data_as<float>(), *w_scale_inv = w.scale_inv.data_as<float>();
  const Tensor frag = weight_fragments_for(kLayout, w, dx.device());
  auto launch = [&](auto operands) {
    using Op = decltype(operands);
    if (moments)
      launch_phase_dgrad<Op, kDyChannels, true>(dy.data, frag, dx, moments, dy_scale_inv, w_scale_inv);
    else
      launch_phase_dgrad<Op, kDyChannels, false>(dy.data, frag, dx, nullptr, dy_scale_inv, w_scale_inv);
  };
  if (dy.format == Fp8Format::E5M2)
    launch(Fp8Operands<Fp8Format::E5M2>{});
  else
    launch(Fp8Operands<Fp8Format::E4M3>{});
  return true;
}

}  // namespace gpu
}  // namespace ge
