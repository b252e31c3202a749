// See conv_8ch.h. An implicit GEMM on Tensor Cores (mma.sync m16n8k16, fp32 accumulation):
// a block takes 64 output pixels of one image and 64 output channels. K = 4 x 4 taps x 8
// channels = 128, and one tap's 8 channels are one 16-byte NHWC pixel, so the block copies the
// input rows its pixels read (with zeros for the padding) and the 64 x 128 weights into shared
// memory once, and each warp multiplies 16 pixels by all 64 channels from there. The result is
// rounded to half once, staged in shared memory and written as whole 128-byte pixel rows.
#include <initializer_list>

#include "conv_8ch.h"
#include "ganengine/env_choice.h"
#include "cuda_util.cuh"
#include "vector_pack.cuh"

namespace ge {
namespace gpu {

namespace {

constexpr int kTilePixels = 64;    // output pixels per block
constexpr int kTileChannels = 64;  // output channels per block
constexpr int kK = 128;            // 4 * 4 taps * 8 channels
constexpr int kBlockThreads = 128;      // 4 warps, 16 pixels each
constexpr int kWeightStride = kK + 8;         // halves per weight row: +8 spreads the rows over the banks
constexpr int kOutStride = kTileChannels + 8;  // the same for the staged output
constexpr int kMaxFootprint = 520;             // input pixels a tile reads, at most (see footprint())

// The input pixels a tile of `rows` output rows by `cols` output columns reads.
__host__ __device__ constexpr int footprint_rows(int rows) { return 2 * rows + 2; }
__host__ __device__ constexpr int footprint_cols(int cols) { return 2 * cols + 2; }

template <class T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]);

template <>
__device__ __forceinline__ void mma_16816<__half>(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4],
                                                         const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// x (N, H, W, 8), w (K, 4, 4, 8), y (N, P, Q, K), all NHWC. Block (tile, n, channel group).
// A tile is tile_rows whole output rows (tile_cols == Q) or a tile_cols-wide segment of one row.
template <class T>
__global__ void __launch_bounds__(kBlockThreads)
    conv_8ch_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, int H, int W, int P, int Q,
                    int K, int tile_rows, int tile_cols) {
  __shared__ alignas(16) T in_s[kMaxFootprint * 8];
  __shared__ alignas(16) T w_s[kTileChannels * kWeightStride];
  __shared__ alignas(16) T out_s[kTilePixels * kOutStride];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int n = blockIdx.y, k0 = blockIdx.z * kTileChannels;
  const int segments = Q / tile_cols;  // tiles along a row (1 when a tile holds whole rows)
  const int p0 = (blockIdx.x / segments) * tile_rows, q0 = (blockIdx.x % segments) * tile_cols;
  const int fr = footprint_rows(tile_rows), fc = footprint_cols(tile_cols);

  // Input rows 2*p0-1 .. 2*(p0+tile_rows-1)+2, columns 2*q0-1 .. 2*(q0+tile_cols-1)+2, zero outside.
  using Chunk = uint4;  // one pixel's 8 channels
  const T* xn = x + static_cast<size_t>(n) * H * W * 8;
  for (int i = tid; i < fr * fc; i += kBlockThreads) {
    const int r = 2 * p0 - 1 + i / fc, c = 2 * q0 - 1 + i % fc;
    Chunk v = make_uint4(0, 0, 0, 0);
    if (r >= 0 && r < H && c >= 0 && c < W) v = *reinterpret_cast<const Chunk*>(xn + (static_cast<size_t>(r) * W + c) * 8);
    *reinterpret_cast<Chunk*>(in_s + i * 8) = v;
  }
  // This block's 64 output channels: 64 rows of 128 halves (16 chunks each).
  for (int i = tid; i < kTileChannels * (kK / 8); i += kBlockThreads) {
    const int row = i / (kK / 8), chunk = i % (kK / 8);
    *reinterpret_cast<Chunk*>(w_s + row * kWeightStride + chunk * 8) =
        *reinterpret_cast<const Chunk*>(w + static_cast<size_t>(k0 + row) * kK + chunk * 8);
  }
  __syncthreads();

  // mma fragments: g = lane / 4 picks a row (pixel) of A and a column (channel) of B,
  // t = lane % 4 a pair of k (channels within a tap).
  const int g = lane >> 2, t = lane & 3;
  // The two pixels this thread holds A values of: m and m + 8 within the warp's 16.
  int base[2];
  for (int h = 0; h < 2; ++h) {
    const int m = warp * 16 + g + 8 * h;
    const int pr = m / tile_cols, pc = m % tile_cols;  // position inside the tile
    base[h] = (2 * pr) * fc + 2 * pc;                  // footprint pixel of tap (0, 0)
  }
  float acc[kTileChannels / 8][4] = {};
#pragma unroll
  for (int ks = 0; ks < kK / 16; ++ks) {
    // k 0..7 of this step: tap 2*ks; k 8..15: tap 2*ks + 1 (taps are r * 4 + s).
    uint32_t a[4];
#pragma unroll
    for (int half_k = 0; half_k < 2; ++half_k) {
      const int tap = 2 * ks + half_k, r = tap >> 2, s = tap & 3;
#pragma unroll
      for (int h = 0; h < 2; ++h)
        a[2 * half_k + h] = *reinterpret_cast<const uint32_t*>(in_s + (base[h] + r * fc + s) * 8 + 2 * t);
    }
#pragma unroll
    for (int nt = 0; nt < kTileChannels / 8; ++nt) {
      const T* wrow = w_s + (nt * 8 + g) * kWeightStride + ks * 16 + 2 * t;
      const uint32_t b[2] = {*reinterpret_cast<const uint32_t*>(wrow), *reinterpret_cast<const uint32_t*>(wrow + 8)};
      mma_16816<T>(acc[nt], a, b);
    }
  }

  // d0, d1: pixel g, channels 2t, 2t+1 of the n-tile; d2, d3: pixel g + 8.
#pragma unroll
  for (int nt = 0; nt < kTileChannels / 8; ++nt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      T* o = out_s + (warp * 16 + g + 8 * h) * kOutStride + nt * 8 + 2 * t;
      store_float(o, acc[nt][2 * h]);
      store_float(o + 1, acc[nt][2 * h + 1]);
    }
  __syncthreads();
  for (int i = tid; i < kTilePixels * (kTileChannels / 8); i += kBlockThreads) {
    const int m = i / (kTileChannels / 8), chunk = i % (kTileChannels / 8);
    const int p = p0 + m / tile_cols, q = q0 + m % tile_cols;
    T* dst = y + ((static_cast<size_t>(n) * P + p) * Q + q) * K + k0 + chunk * 8;
    *reinterpret_cast<Chunk*>(dst) = *reinterpret_cast<const Chunk*>(out_s + m * kOutStride + chunk * 8);
  }
}

bool enabled() {
  static const bool on = env_choice("GANENGINE_CONV_8CH", {"on", "off"}) == "on";
  return on;
}

}  // namespace

bool conv2d_forward_8ch(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p) {
  if (!enabled()) return false;
  const DType dt = x.dtype();
  if ((dt != DType::F16 && dt != DType::BF16) || w.dtype() != dt || y.dtype() != dt) return false;
  for (const Tensor* t : std::initializer_list<const Tensor*>{&x, &w, &y})
    if (t->rank() != 4 || t->format() != MemoryFormat::NHWC || !aligned16(t->data())) return false;
  if (x.dim(1) != 8 || w.dim(1) != 8 || w.dim(2) != 4 || w.dim(3) != 4 || p.stride != 2 || p.pad != 1) return false;
  const int64_t N = x.dim(0), H = x.dim(2), W = x.dim(3), K = w.dim(0), P = y.dim(2), Q = y.dim(3);
  if (K % kTileChannels != 0 || y.dim(1) != K || y.dim(0) != N || P != H / 2 || Q != W / 2) return false;
  // Tiles of whole rows (Q divides 64) or of 64-wide row segments (64 divides Q).
  int tile_rows, tile_cols;
  if (Q <= kTilePixels && kTilePixels % Q == 0) {
    tile_rows = static_cast<int>(kTilePixels / Q);
    tile_cols = static_cast<int>(Q);
    if (P % tile_rows != 0) return false;
  } else if (Q % kTilePixels == 0) {
    tile_rows = 1;
    tile_cols = kTilePixels;
  } else {
    return false;
  }
  if (footprint_rows(tile_rows) * footprint_cols(tile_cols) > kMaxFootprint) return false;
  if (N > 65535 || K / kTileChannels > 65535 || H * W > (int64_t{1} << 30)) return false;
  const dim3 grid(static_cast<unsigned>(P * Q / kTilePixels), static_cast<unsigned>(N),
                  static_cast<unsigned>(K / kTileChannels));
  auto launch = [&](auto type_tag) {
    using T = decltype(type_tag);
    conv_8ch_kernel<T><<<grid, kBlockThreads, 0, stream_of(x)>>>(
        x.data_as<T>(), w.data_as<T>(), y.data_as<T>(), static_cast<int>(H), static_cast<int>(W),
        static_cast<int>(P), static_cast<int>(Q), static_cast<int>(K), tile_rows, tile_cols);
  };
  if (dt == DType::F16)
    launch(__half{});
  else
    launch(__nv_bfloat16{});
  CUDA_CHECK_LAUNCH();
  return true;
}

}  // namespace gpu
}  // namespace ge
