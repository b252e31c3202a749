// FP8 convolutions as implicit GEMMs on Hopper's warpgroup MMA: rows are output positions, columns
// output channels, K the taps times the input channels, read as bytes straight from the NHWC FP8
// tensors (a 16-byte piece of K is 16 channels of one input pixel at one tap, so K-major operands,
// as FP8 MMAs need them, are what NHWC already is).
//
//  - A block takes 128 rows by N = 128 or 64 columns, one warpgroup a 64-row half, with
//    m64nNk32 MMAs from shared memory; K moves through a ring of kStages stages of 64 bytes,
//    filled by cp.async kStages - 2 stages ahead, out-of-range chunks (the padding border, rows
//    past the end) zero-filled. The index arithmetic is cuda/conv/fp8_conv_tiling.h.
//  - The forward is one such GEMM. The backward-data of the 4x4, stride-2, pad-1 convolution is
//    four (blockIdx.z, the output phases): dx pixel (2a + pa, 2b + pb) takes exactly two rows
//    and two columns of taps, dy row a + pa + th - 1 with kernel row 3 - pa - 2 th (th = 0, 1),
//    so each phase is a 2x2 stride-1 convolution of dy with its own rearranged weights.
//  - The sums stay in the MMAs' f32 accumulators, multiplied by both scale_invs at the end and
//    written as f32 or rounded once to half.
// Compiled for sm_90a only (wgmma): CMakeLists.txt builds this folder apart.
#include <cuda_fp16.h>

#include "cuda/aligned.h"
#include "cuda/conv/conv_phase_dgrad.h"
#include "cuda/conv/conv_phase_fprop.h"
#include "cuda/conv/fp8_conv_tiling.h"
#include "cuda/conv/fp8_conv_wgmma.h"
#include "cuda/conv/sm90a/wgmma.cuh"
#include "cuda/copy_async.cuh"
#include "cuda/cuda_util.cuh"
#include "cuda/kernel_launch.cuh"

namespace ge {
namespace gpu {
namespace {

using fp8_conv::Geometry;
using fp8_conv::kStageK;
using fp8_conv::kTileRows;
constexpr int kThreads = fp8_conv::kThreads;
static_assert(kThreads == 2 * kWarpgroupThreads, "a warpgroup for each 64-row half of the tile");
constexpr int kStages = 6;
template <int N>
constexpr size_t kShared = size_t{kStages} * fp8_conv::stage_bytes(N);
static_assert(2 * kShared<128> <= 227 * 1024, "two blocks an SM");

__device__ __forceinline__ void store_pair(float* at, float a, float b) { *reinterpret_cast<float2*>(at) = {a, b}; }
__device__ __forceinline__ void store_pair(__half* at, float a, float b) {
  *reinterpret_cast<__half2*>(at) = __floats2half2_rn(a, b);
}

// This thread's cp.async copies, a stage at a time (fp8_conv::ThreadChunks): two of A's rows and
// N / 64 of B's, all at one chunk column, whose cursor moves along K.
template <int N>
struct StageLoader {
  const uint8_t* x;
  const uint8_t* w;  // the block's phase and first column's weights
  fp8_conv::ThreadChunks chunks;
  fp8_conv::RowOrigin rows[2];
  fp8_conv::KCursor k;

  __device__ StageLoader(const uint8_t* x_, const uint8_t* w_, const Geometry& g, int64_t row0, int phase)
      : x(x_), w(w_), chunks(threadIdx.x), k(16 * chunks.chunk, g) {
#pragma unroll
    for (int i = 0; i < 2; ++i) rows[i] = fp8_conv::row_origin(row0 + chunks.row(i), g, phase);
  }

  __device__ __forceinline__ void load(uint32_t stage, const Geometry& g) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int64_t at = fp8_conv::a_source(rows[i], k, g);
      copy_async_16(stage + chunks.offset(i), at >= 0 ? x + at : x, at >= 0);
    }
#pragma unroll
    for (int i = 0; i < N / 64; ++i) {
      const int64_t at = fp8_conv::b_source(chunks.row(i), k, g);
      copy_async_16(stage + kTileRows * kStageK + chunks.offset(i), at >= 0 ? w + at : w, at >= 0);
    }
    k.advance(g);
  }
};

template <int N, Fp8Format A, class Out>
__global__ void __launch_bounds__(kThreads, 2)
    fp8_conv_kernel(const uint8_t* __restrict__ x, const uint8_t* __restrict__ w, const float* __restrict__ x_scale_inv,
                    const float* __restrict__ w_scale_inv, Out* __restrict__ y, Geometry g) {
  extern __shared__ __align__(128) uint8_t smem[];
  await_previous_kernel();
  const int phase = blockIdx.z, col0 = blockIdx.x * N;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTileRows;
  const int k_stages = g.k_stages();
  StageLoader<N> loader(x, w + fp8_conv::block_weights(phase, col0, g), g, row0, phase);
  const uint32_t base = shared_address(smem);
  auto stage_at = [&](int k) { return base + (k % kStages) * fp8_conv::stage_bytes(N); };

  for (int k = 0; k < kStages - 2; ++k) {
    if (k < k_stages) loader.load(stage_at(k), g);
    copy_async_commit();
  }
  const int wg = threadIdx.x / kWarpgroupThreads;
  float d[N / 2] = {};  // written by the first MMA (accumulate false); zeroed for the compiler
#pragma unroll 1
  for (int k = 0; k < k_stages; ++k) {
    copy_async_wait<kStages - 3>();  // this thread's chunks of stage k are in
    // Written through the generic proxy, read by the MMAs through the async one.
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    // Every thread's chunks of stage k are in, and both warpgroups have waited for their MMAs
    // of stage k - 2, whose slot the load below refills.
    __syncthreads();
    if (k + kStages - 2 < k_stages) loader.load(stage_at(k + kStages - 2), g);
    copy_async_commit();
    const uint32_t a = stage_at(k) + wg * 64 * kStageK, b = stage_at(k) + kTileRows * kStageK;
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < fp8_conv::kStageChunks / 2; ++j)  // 32 bytes of K, two chunks, an MMA
      wgmma_fp8<N, A>(d, smem_descriptor(a + 256 * j, fp8_conv::kLeadingBytes, fp8_conv::kStrideBytes),
                      smem_descriptor(b + 256 * j, fp8_conv::kLeadingBytes, fp8_conv::kStrideBytes), k > 0 || j > 0);
    wgmma_commit();
    wgmma_wait<1>();
  }
  wgmma_wait<0>();

  const float alpha = *x_scale_inv * *w_scale_inv;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t m = row0 + fp8_conv::accumulator_row(threadIdx.x, h);
    if (m >= g.positions()) continue;
    Out* out = y + fp8_conv::output_pixel(m, g, phase) + col0 + fp8_conv::accumulator_column(threadIdx.x, 0, 0);
#pragma unroll
    for (int j = 0; j < N / 8; ++j) store_pair(out + 8 * j, d[4 * j + 2 * h] * alpha, d[4 * j + 2 * h + 1] * alpha);
  }
}

__global__ void fp8_phase_weights_kernel(const uint8_t* __restrict__ w, uint8_t* __restrict__ wp, int out_channels,
                                         int in_channels) {
  await_previous_kernel();
  const int64_t total = int64_t{16} * out_channels * in_channels;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x)
    wp[i] = w[fp8_conv::phase_weight_source(i, out_channels, in_channels)];
}

// One warpgroup: a's 64 rows and b's 64 into a stage's layout, one MMA, d out.
__global__ void fp8_mma_tile_kernel(const uint8_t* __restrict__ a, const uint8_t* __restrict__ b,
                                    float* __restrict__ d) {
  __shared__ __align__(128) uint8_t tile[2 * 64 * fp8_conv::kStageK];
  await_previous_kernel();
  const int t = threadIdx.x;
  for (int i = t; i < 2 * 64 * 32; i += kWarpgroupThreads) {
    const int operand = i / (64 * 32), r = i / 32 % 64, k = i % 32;
    tile[operand * 64 * fp8_conv::kStageK + fp8_conv::stage_byte(r, k)] = (operand ? b : a)[r * 32 + k];
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  const uint32_t base = shared_address(tile);
  float acc[32] = {};
  wgmma_fence();
  wgmma_fp8<64, Fp8Format::E4M3>(
      acc, smem_descriptor(base, fp8_conv::kLeadingBytes, fp8_conv::kStrideBytes),
      smem_descriptor(base + 64 * fp8_conv::kStageK, fp8_conv::kLeadingBytes, fp8_conv::kStrideBytes), false);
  wgmma_commit();
  wgmma_wait<0>();
  for (int h = 0; h < 2; ++h)
    for (int j = 0; j < 8; ++j)
      for (int e = 0; e < 2; ++e)
        d[fp8_conv::accumulator_row(t, h) * 64 + fp8_conv::accumulator_column(t, j, e)] = acc[4 * j + 2 * h + e];
}

template <int N, Fp8Format A, class Out>
void launch(const uint8_t* x, const uint8_t* w, const Tensor& x_scale_inv, const Tensor& w_scale_inv, Tensor& y,
            const Geometry& g) {
  auto kernel = fp8_conv_kernel<N, A, Out>;
  const int device = y.device().index;
  set_function_attribute_once(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kShared<N>),
                              device);
  const dim3 grid(static_cast<unsigned>(g.out_c / N), static_cast<unsigned>(ceil_div(g.positions(), kTileRows)),
                  static_cast<unsigned>(g.phases));
  launch_kernel(kernel, grid, kThreads, kShared<N>, stream_of(y), x, w, x_scale_inv.data_as<float>(),
                w_scale_inv.data_as<float>(), y.data_as<Out>(), g);
  CUDA_CHECK_LAUNCH();
}

// The instance for the tile's columns, the A operand's format and the output's dtype.
void run(const Fp8Tensor& a, const uint8_t* w, const Tensor& w_scale_inv, Tensor& y, const Geometry& g) {
  const uint8_t* x = a.data.data_as<uint8_t>();
  const bool wide = fp8_conv::tile_columns(g) == 128, e4m3 = a.format == Fp8Format::E4M3;
  const bool half = y.dtype() == DType::F16;
  using F = Fp8Format;
  if (wide && e4m3)
    half ? launch<128, F::E4M3, __half>(x, w, a.scale_inv, w_scale_inv, y, g)
         : launch<128, F::E4M3, float>(x, w, a.scale_inv, w_scale_inv, y, g);
  else if (wide)
    half ? launch<128, F::E5M2, __half>(x, w, a.scale_inv, w_scale_inv, y, g)
         : launch<128, F::E5M2, float>(x, w, a.scale_inv, w_scale_inv, y, g);
  else if (e4m3)
    half ? launch<64, F::E4M3, __half>(x, w, a.scale_inv, w_scale_inv, y, g)
         : launch<64, F::E4M3, float>(x, w, a.scale_inv, w_scale_inv, y, g);
  else
    half ? launch<64, F::E5M2, __half>(x, w, a.scale_inv, w_scale_inv, y, g)
         : launch<64, F::E5M2, float>(x, w, a.scale_inv, w_scale_inv, y, g);
}

bool nhwc_aligned(const Tensor& t, DType dtype) {
  return t.dtype() == dtype && t.rank() == 4 && t.format() == MemoryFormat::NHWC && t.device().is_cuda() &&
         aligned16(t.data());
}

// What both passes need besides the shapes: the operands' dtypes, formats and layouts, the
// output's dtype, one device, and that device a compute capability 9.0 one.
bool takes(const Fp8Tensor& a, const Fp8Tensor& w, const Tensor& out) {
  if (!nhwc_aligned(a.data, DType::U8) || !nhwc_aligned(w.data, DType::U8) || w.format != Fp8Format::E4M3) return false;
  if (out.dtype() != DType::F32 && out.dtype() != DType::F16) return false;
  if (!nhwc_aligned(out, out.dtype()) || out.device() != a.data.device() || out.device() != w.data.device())
    return false;
  return device_is_sm90(out.device().index);
}

}  // namespace

bool fp8_conv2d_forward_wgmma(const Fp8Tensor& x, const Fp8Tensor& w, Tensor& y, const Conv2dParams& p) {
  // The 64 -> 128 and 128 -> 256-channel layers', with f16 y: from an image's x held in shared
  // memory (sm90a/conv_phase_fprop.cu, sm90a/conv_resident_fprop.cu).
  if (fp8_conv2d_forward_phases(x, w, y, p) || fp8_conv2d_forward_resident(x, w, y, p)) return true;
  Geometry g{};
  if (!fp8_conv::forward_geometry(x.data.shape(), w.data.shape(), y.shape(), p, &g) || !takes(x, w, y)) return false;
  run(x, w.data.data_as<uint8_t>(), w.scale_inv, y, g);
  return true;
}

bool fp8_conv2d_backward_data_wgmma(const Fp8Tensor& dy, const Fp8Tensor& w, Tensor& dx, const Conv2dParams& p) {
  // The 128 -> 64 and 256 -> 128-channel layers', with f16 dx: phase by phase from an image's dy
  // held in shared memory (sm90a/conv_phase_dgrad.cu, sm90a/conv_resident_dgrad.cu).
  if (fp8_conv2d_backward_data_phases(dy, w, dx, p) || fp8_conv2d_backward_data_resident(dy, w, dx, p)) return true;
  Geometry g{};
  if (!fp8_conv::backward_data_geometry(dy.data.shape(), w.data.shape(), dx.shape(), p, &g) || !takes(dy, w, dx))
    return false;
  const int64_t bytes = w.data.numel();
  Tensor phase_weights = Tensor::empty({bytes}, DType::U8, dx.device());
  launch_kernel(fp8_phase_weights_kernel, grid_for(bytes, 256), 256, 0, stream_of(dx), w.data.data_as<uint8_t>(),
                phase_weights.data_as<uint8_t>(), static_cast<int>(w.data.dim(0)), static_cast<int>(w.data.dim(1)));
  CUDA_CHECK_LAUNCH();
  run(dy, phase_weights.data_as<uint8_t>(), w.scale_inv, dx, g);
  return true;
}

bool fp8_mma_tile(const Tensor& a, const Tensor& b, Tensor& d) {
  const bool shapes = a.shape() == Shape{64, 32} && b.shape() == Shape{64, 32} && d.shape() == Shape{64, 64};
  if (!shapes || a.dtype() != DType::U8 || b.dtype() != DType::U8 || d.dtype() != DType::F32 || !d.device().is_cuda() ||
      a.device() != d.device() || b.device() != d.device() || !device_is_sm90(d.device().index))
    return false;
  launch_kernel(fp8_mma_tile_kernel, 1, kWarpgroupThreads, 0, stream_of(d), a.data_as<uint8_t>(), b.data_as<uint8_t>(),
                d.data_as<float>());
  CUDA_CHECK_LAUNCH();
  return true;
}

}  // namespace gpu
}  // namespace ge
