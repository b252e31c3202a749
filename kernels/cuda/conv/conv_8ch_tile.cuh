// What the 8-channel convolution kernels (conv_8ch.cu: forward, conv_8ch_wgrad.cu:
// backward-filter) share: the tiling of a 4x4, stride-2, pad-1 convolution of an NHWC tensor
// with 8 channels (one 16-byte pixel per tap), the Tensor Core instructions, and the host-side
// choice of tiles and grid. The backward-data kernel (conv_8ch_dgrad.cu) tiles its own way and
// shares the instructions and the host-side helpers.
//
// A tile is 64 output pixels of one image: tile_rows whole output rows (when Q divides 64) or a
// 64-wide segment of one row (when 64 divides Q). Either way its pixels are consecutive in an
// NHWC output: tile pixel m is the tile's first plus m. Its input footprint, the input pixels
// its 16 taps read, is copied into shared memory once, with zeros where the padding is.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "core/fast_divmod.h"
#include "cuda/copy_async.cuh"
#include "cuda/cuda_util.cuh"
#include "cuda/kernel_launch.cuh"
#include "ganengine/ops.h"

namespace ge {
namespace gpu {
namespace conv8 {

constexpr int kTilePixels = 64;     // output pixels per tile
constexpr int kGroupChannels = 64;  // output channels a block works on
constexpr int kK = 128;             // 4 x 4 taps x 8 channels: the GEMM's reduction length
constexpr int kBlockThreads = 128;  // 4 warps
constexpr int kMaxFootprint = 520;  // input pixels a tile reads, at most (choose_tiling)

// The input pixels a tile of `rows` output rows by `cols` output columns reads.
__host__ __device__ constexpr int footprint_rows(int rows) { return 2 * rows + 2; }
__host__ __device__ constexpr int footprint_cols(int cols) { return 2 * cols + 2; }

// Where tile t of a batch starts, the tiles being `rows` x `cols` pixels, per_image of them an
// image and per_row of them across a row of tiles: image n, row r0 and column c0.
__device__ __forceinline__ void locate_tile(const FastDivmod& per_image, const FastDivmod& per_row, int rows, int cols,
                                            int t, int& n, int& r0, int& c0) {
  uint32_t image, i, row, segment;
  per_image.divmod(static_cast<uint32_t>(t), image, i);
  per_row.divmod(i, row, segment);
  n = static_cast<int>(image);
  r0 = static_cast<int>(row) * rows;
  c0 = static_cast<int>(segment) * cols;
}

struct Tiling {
  int rows = 0, cols = 0;          // of one tile, in output pixels
  int cols_log2 = 0;               // cols is a power of two (it divides 64, or is 64)
  int per_image = 0, total = 0;    // tiles
  int H = 0, W = 0, P = 0, Q = 0;  // input and output sizes
  FastDivmod per_image_div;        // by per_image
  FastDivmod segments_div;         // by Q / cols, a row's tiles
  // Where tile `t` starts: image n, output row p0 and column q0.
  __device__ __forceinline__ void locate(int t, int& n, int& p0, int& q0) const {
    locate_tile(per_image_div, segments_div, rows, cols, t, n, p0, q0);
  }
  // Where footprint column c is stored within its row: even columns first, then odd ones. A tap
  // reads every other column, so eight neighbouring output pixels then read eight neighbouring
  // 16-byte pixels (one ldmatrix without bank conflicts) instead of every other one.
  __host__ __device__ __forceinline__ int footprint_slot(int c) const {
    return (c & 1) * (footprint_cols(cols) / 2) + (c >> 1);
  }
  // Output pixel m's row and column within the tile.
  __device__ __forceinline__ int row_of(int m) const { return m >> cols_log2; }
  __device__ __forceinline__ int col_of(int m) const { return m & (cols - 1); }
  // The stored footprint pixel that output pixel m of the tile (row-major) reads at tap (r, s)
  // is pixel_base(m) + tap_offset(r, s): footprint row 2 * row_of(m) + r, column
  // 2 * col_of(m) + s, whose slot is col_of(m) + footprint_slot(s). Kernels compute both parts
  // once, outside their loops (integer division is slow on a GPU, and these sit under every
  // ldmatrix).
  __device__ __forceinline__ int pixel_base(int m) const { return 2 * row_of(m) * footprint_cols(cols) + col_of(m); }
  __device__ __forceinline__ int tap_offset(int r, int s) const { return r * footprint_cols(cols) + footprint_slot(s); }
};

// The tiling for an (N, 8, H, W) input and (N, K, P, Q) output, or false when the shape is not
// one the kernels handle (then cuDNN runs it).
inline bool choose_tiling(int64_t N, int64_t H, int64_t W, int64_t P, int64_t Q, Tiling& t) {
  if (P != H / 2 || Q != W / 2 || P < 1 || Q < 1) return false;
  if (Q <= kTilePixels && kTilePixels % Q == 0) {
    t.rows = static_cast<int>(kTilePixels / Q);
    t.cols = static_cast<int>(Q);
    if (P % t.rows != 0) return false;
  } else if (Q % kTilePixels == 0) {
    t.rows = 1;
    t.cols = kTilePixels;
  } else {
    return false;
  }
  if (footprint_rows(t.rows) * footprint_cols(t.cols) > kMaxFootprint) return false;
  while ((1 << t.cols_log2) < t.cols) ++t.cols_log2;
  const int64_t per_image = P * Q / kTilePixels, total = per_image * N;
  if (total > (int64_t{1} << 30) || H * W > (int64_t{1} << 30)) return false;
  t.per_image = static_cast<int>(per_image);
  t.total = static_cast<int>(total);
  t.per_image_div = FastDivmod(static_cast<uint32_t>(per_image));
  t.segments_div = FastDivmod(static_cast<uint32_t>(Q / t.cols));
  t.H = static_cast<int>(H);
  t.W = static_cast<int>(W);
  t.P = static_cast<int>(P);
  t.Q = static_cast<int>(Q);
  return true;
}

// The tiling of this convolution (x the 8-channel side, with 1, 3 or 8 channels in memory: the
// forward and backward-filter read all three, conv_8ch_input.cuh; y the 64k-channel side), or
// false when the kernels do not handle it (conv_8ch.h). In conv_8ch.cu.
bool tiling_for(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p, Tiling& tl);
// Its shape checks alone (the tensors' dtype, layout and alignment aside).
bool tiling_for_shapes(const Shape& x, const Shape& w, const Shape& y, const Conv2dParams& p, Tiling& tl);

// Lets `kernel` use `bytes` of dynamic shared memory on `device`: more than the 48 KB a kernel
// gets without asking needs the attribute, which belongs to the device's context. Once per
// kernel and device.
template <class Kernel>
void allow_dynamic_smem(Kernel kernel, size_t bytes, int device) {
  set_function_attribute_once(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes), device);
}

// Blocks a tile-walking kernel should launch: as many as fit on the GPU at once (each block then
// walks several tiles, loading what every tile shares once), never more than the tiles.
template <class Kernel>
int grid_blocks(Kernel kernel, size_t dynamic_smem, int device, int tiles) {
  return std::min(tiles, resident_blocks(kernel, kBlockThreads, dynamic_smem, device));
}

// Two floats rounded to the dtype (as store_float rounds each), as one 32-bit word: one
// conversion instruction and one store for two outputs.
template <class T>
__device__ __forceinline__ uint32_t pack_pair(float a, float b);
template <>
__device__ __forceinline__ uint32_t pack_pair<__half>(float a, float b) {
  __half2 h = __floats2half2_rn(a, b);
  return *reinterpret_cast<uint32_t*>(&h);
}
template <>
__device__ __forceinline__ uint32_t pack_pair<__nv_bfloat16>(float a, float b) {
  __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<uint32_t*>(&h);
}

// a and b as the dtype holds them (round_to of each), rounded together.
template <class T>
__device__ __forceinline__ void round_pair(float& a, float& b);
template <>
__device__ __forceinline__ void round_pair<__half>(float& a, float& b) {
  const float2 f = __half22float2(__floats2half2_rn(a, b));
  a = f.x;
  b = f.y;
}
template <>
__device__ __forceinline__ void round_pair<__nv_bfloat16>(float& a, float& b) {
  const float2 f = __bfloat1622float2(__floats2bfloat162_rn(a, b));
  a = f.x;
  b = f.y;
}

// The larger of each pair of 16-bit values of two words (max of two NaNs: the canonical NaN).
template <class T>
__device__ __forceinline__ uint32_t max_pair(uint32_t a, uint32_t b) {
  const Pair<T> m = __hmax2(as_pair<T>(a), as_pair<T>(b));
  return *reinterpret_cast<const uint32_t*>(&m);
}

// LeakyReLU with a slope in (0, 1] on two values, as the dtype's word: each value v rounded to
// the dtype, then max(v, round(v * slope)), where the separate activation computes v > 0 ? v :
// v * slope in float and rounds. The same bits: for v > 0, v * slope <= v and rounding keeps the
// order; for v <= 0 the product is the larger or equal (at -0 both are -0, at -inf both -inf); a
// NaN v gives NaN twice, and max of two NaNs is the canonical NaN the rounding of a NaN gives.
// Not for slope 0: -inf * 0 is NaN, which max would drop for -inf.
// Three instructions a pair fewer than the compare and select on each value (conv_8ch.cu).
template <class T>
__device__ __forceinline__ uint32_t leaky_relu_pair(float a, float b, float slope) {
  const uint32_t v = pack_pair<T>(a, b);
  const float2 f = unpack_pair<T>(v);
  return max_pair<T>(v, pack_pair<T>(f.x * slope, f.y * slope));
}

// A thread's share of a row-major grid of `per_row` columns (a footprint's pixels, or pixel
// pairs): its first item's row and column (item threadIdx.x), and how far each step of
// blockDim.x items moves. The same for every tile, so a kernel computes it once.
struct GridWalk {
  int r0, c0, step_r, step_c;
  __device__ explicit GridWalk(int per_row) {
    r0 = threadIdx.x / per_row;
    c0 = threadIdx.x % per_row;
    step_r = blockDim.x / per_row;
    step_c = blockDim.x % per_row;
  }
  // Moves row r, column c on to the thread's next item, blockDim.x items further: additions
  // only (a division per pixel is slow under cp.async).
  __device__ __forceinline__ void next(int& r, int& c, int per_row) const {
    r += step_r;
    c += step_c;
    if (c >= per_row) {
      c -= per_row;
      ++r;
    }
  }
};

// The walk over a tile's input footprint, one 16-byte pixel an item.
struct FootprintWalk : GridWalk {
  __device__ explicit FootprintWalk(const Tiling& tl) : GridWalk(footprint_cols(tl.cols)) {}
};

// Starts copying tile (n, p0, q0)'s input footprint from x (N, H, W, 8) into in_s, zeros outside.
template <class T>
__device__ __forceinline__ void load_footprint_async(const T* __restrict__ x, T* in_s, const Tiling& tl,
                                                     const FootprintWalk& walk, int n, int p0, int q0) {
  const int fr = footprint_rows(tl.rows), fc = footprint_cols(tl.cols);
  const T* xn = x + static_cast<size_t>(n) * tl.H * tl.W * 8;
  for (int fr_i = walk.r0, fc_i = walk.c0; fr_i < fr;) {
    const int r = 2 * p0 - 1 + fr_i, c = 2 * q0 - 1 + fc_i;
    const bool inside = r >= 0 && r < tl.H && c >= 0 && c < tl.W;
    copy_async_16(in_s + (fr_i * fc + tl.footprint_slot(fc_i)) * 8,
                  inside ? xn + (static_cast<size_t>(r) * tl.W + c) * 8 : xn, inside);
    walk.next(fr_i, fc_i, fc);
  }
}

// The bits of channel c of weight row k's tap `tap`, for a w (K, 4, 4, wc) holding 8 channels or
// only the input's 1 or 3 (conv_8ch.h): the channels it lacks read as zeros, as a zero-padded
// copy's would, so the kernels compute bitwise what they compute from that copy.
template <class T>
__device__ __forceinline__ uint32_t weight_bits(const T* w, int k, int tap, int c, int wc) {
  if (c >= wc) return 0u;
  return reinterpret_cast<const uint16_t*>(w)[(static_cast<size_t>(k) * 16 + tap) * wc + c];
}

// d += a * b on Tensor Cores: one m16n8k16 product, fp32 accumulation.
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

// Four 8x8 matrices of 16-bit values from shared memory: lanes 8i..8i+7 give the addresses of
// matrix i's rows (16 bytes each), and lane l receives, of every matrix, the elements (row l/4,
// columns 2(l%4) and 2(l%4)+1): an mma A fragment when the rows are A's.
// The row's address may also be given as a shared-memory address (shared_address): a loop that
// forms its addresses from one such base saves the conversion from a generic pointer under every
// ldmatrix (in conv_8ch_dgrad.cu, a large share of its instructions otherwise).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  ldmatrix_x4(r, static_cast<uint32_t>(__cvta_generic_to_shared(row)));
}

// Two 8x8 matrices of 16-bit values from shared memory: lanes 8i..8i+7 give the addresses of
// matrix i's rows (lanes 16-31 are ignored), and lane l receives, of both, the elements (row
// l/4, columns 2(l%4) and 2(l%4)+1): an mma B fragment when the rows are B's columns.
// The address as for ldmatrix_x4.
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const void* row) {
  ldmatrix_x2(r, static_cast<uint32_t>(__cvta_generic_to_shared(row)));
}

// Four 8x8 matrices of 16-bit values to shared memory, ldmatrix_x4's inverse: lanes 8i..8i+7
// give the addresses of matrix i's rows, and lane l holds in r[i] its elements (row l/4, columns
// 2(l%4) and 2(l%4)+1): the layout of an mma accumulator's pairs, so one instruction stores four
// of a thread's pairs where four 32-bit stores would need their addresses.
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(addr), "r"(r[0]), "r"(r[1]),
               "r"(r[2]), "r"(r[3])
               : "memory");
}

// Four 8x8 matrices of 16-bit values from shared memory, each transposed on the way: lanes
// 8i..8i+7 give the addresses of matrix i's rows (16 bytes each), and lane l receives, of
// every matrix, the elements (row 2(l%4), column l/4) and (row 2(l%4)+1, column l/4). The
// address as for ldmatrix_x4.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
  ldmatrix_x4_trans(r, static_cast<uint32_t>(__cvta_generic_to_shared(row)));
}

}  // namespace conv8
}  // namespace gpu
}  // namespace ge
