// The index arithmetic of the FP8 warpgroup-MMA convolutions (sm90a/fp8_conv_wgmma.cu), apart from
// the kernel so that the CPU can run it too: tests/ops/test_fp8_conv_tiling.cpp moves the bytes
// the way the kernel's threads do, multiplies them the way the MMAs read them, and holds the
// result to the reference convolution.
//
// The implicit GEMM: row m is an output position (oh, ow) of image n, column an output channel,
// K the taps (r, s) times the input channels c, c fastest, read as bytes from NHWC FP8 tensors; a
// 16-byte chunk of K is 16 channels of one input pixel at one tap. A block takes kTileRows rows
// and N columns; K moves through stages of kStageK bytes.
#pragma once
#include <cstdint>

#include "ganengine/ops.h"
#include "ganengine/tensor.h"

#if defined(__CUDACC__)
#define GE_FP8_CONV_HD __host__ __device__ __forceinline__
#else
#define GE_FP8_CONV_HD inline
#endif

namespace ge {
namespace gpu {
namespace fp8_conv {

constexpr int kThreads = 256;   // two warpgroups, 64 rows of the tile each
constexpr int kTileRows = 128;  // GEMM rows a block
constexpr int kStageK = 64;     // bytes of K a stage: two k32 MMAs
constexpr int kStageChunks = kStageK / 16;
// An operand's stage holds its rows' 16-byte chunks as the MMAs' core matrices: (row group g of
// 8 rows, chunk c) at byte (g * kStageChunks + c) * 128, row r % 8 of the group 16 (r % 8) bytes
// in. So along K the next core matrix is 128 bytes on (the descriptors' leading offset), along
// the rows 8 rows are kStageChunks * 128 bytes on (their stride offset).
constexpr uint32_t kLeadingBytes = 128;
constexpr uint32_t kStrideBytes = kStageChunks * 128;
// Byte k of row `row` of an operand's stage.
GE_FP8_CONV_HD uint32_t stage_byte(int row, int k) {
  return static_cast<uint32_t>((row / 8 * kStageChunks + k / 16) * 128 + row % 8 * 16 + k % 16);
}
// A stage: A's kTileRows rows, then B's n.
constexpr uint32_t stage_bytes(int n) { return static_cast<uint32_t>((kTileRows + n) * kStageK); }

// Where the GEMM's rows read and write. With phases (the backward-data), phase z = (pa, pb) =
// (z / 2, z % 2) reads input (oh in_stride + in_off_h + pa + r, ...) and writes output pixel
// (oh out_stride + pa, ow out_stride + pb), with its own weights.
struct Geometry {
  int images;
  int in_h, in_w, in_c;  // the A operand, NHWC bytes; in_c a multiple of 32
  int taps_h, taps_w;
  int grid_h, grid_w;  // positions per image
  int in_stride;       // tap (r, s) of position (oh, ow) reads input (oh in_stride + in_off_h + r, ...)
  int in_off_h, in_off_w;
  int out_h, out_w, out_c;
  int out_stride;  // position (oh, ow) writes output pixel (oh out_stride, ow out_stride)
  int phases;      // 1, or 4 for the backward-data

  GE_FP8_CONV_HD int k_bytes() const { return taps_h * taps_w * in_c; }
  GE_FP8_CONV_HD int k_stages() const { return (k_bytes() + kStageK - 1) / kStageK; }
  GE_FP8_CONV_HD int64_t positions() const { return static_cast<int64_t>(images) * grid_h * grid_w; }
};

struct Position {
  int64_t image;
  int oh, ow;
};
GE_FP8_CONV_HD Position position_of(int64_t m, const Geometry& g) {
  const int64_t per_image = static_cast<int64_t>(g.grid_h) * g.grid_w;
  const int64_t n = m / per_image;
  const int rest = static_cast<int>(m - n * per_image);
  return {n, rest / g.grid_w, rest % g.grid_w};
}

// The chunks thread t copies each stage: slot i's is chunk `chunk` of row `row(i)` of row group
// `group(i)` = warp + 8 i, with chunk 2 (lane / 16) + lane % 2 and row 8 group + (lane % 16) / 2.
// Two neighbouring lanes read one 32-byte sector, and a warp's 32 stores fill shared memory's
// banks four times over, the fewest 512 bytes can. A's rows take slots 0 and 1; B's N / 64.
struct ThreadChunks {
  int warp, chunk, row_in_group;
  GE_FP8_CONV_HD explicit ThreadChunks(int t)
      : warp(t / 32), chunk(2 * (t % 32 / 16) + t % 2), row_in_group(t % 16 / 2) {}
  GE_FP8_CONV_HD int group(int i) const { return warp + 8 * i; }
  GE_FP8_CONV_HD int row(int i) const { return 8 * group(i) + row_in_group; }
  GE_FP8_CONV_HD uint32_t offset(int i) const { return stage_byte(row(i), 16 * chunk); }
};

// A K byte (a thread's chunk in the stage about to be loaded) as tap (r, s) and channel c, moved
// a stage at a time.
struct KCursor {
  int kb, r, s, c;
  GE_FP8_CONV_HD KCursor(int first, const Geometry& g) : kb(first), r(0), s(0), c(first % g.in_c) {
    const int tap = first / g.in_c;
    r = tap / g.taps_w;
    s = tap % g.taps_w;
  }
  // kStageK bytes on, across taps (in_c >= 32: at most two) where the channels run out.
  GE_FP8_CONV_HD void advance(const Geometry& g) {
    kb += kStageK;
    c += kStageK;
    while (c >= g.in_c) {
      c -= g.in_c;
      if (++s == g.taps_w) {
        s = 0;
        ++r;
      }
    }
  }
};

// Where row m's taps read the input: its image's first byte and its (ih, iw) at tap (0, 0).
struct RowOrigin {
  int64_t image_base;
  int ih0, iw0;
  bool ok;  // m is a row of the GEMM (the last tile may run past them)
};
GE_FP8_CONV_HD RowOrigin row_origin(int64_t m, const Geometry& g, int phase) {
  RowOrigin o;
  o.ok = m < g.positions();
  const Position at = position_of(o.ok ? m : 0, g);
  o.image_base = at.image * g.in_h * g.in_w * g.in_c;
  o.ih0 = at.oh * g.in_stride + g.in_off_h + phase / 2;
  o.iw0 = at.ow * g.in_stride + g.in_off_w + phase % 2;
  return o;
}

// The byte offset in A of the chunk of row o at cursor k; -1 where the chunk is zeros (a padding
// border, a row past the end, K past its end).
GE_FP8_CONV_HD int64_t a_source(const RowOrigin& o, const KCursor& k, const Geometry& g) {
  const int ih = o.ih0 + k.r, iw = o.iw0 + k.s;
  const bool ok = o.ok && k.kb < g.k_bytes() && static_cast<unsigned>(ih) < static_cast<unsigned>(g.in_h) &&
                  static_cast<unsigned>(iw) < static_cast<unsigned>(g.in_w);
  return ok ? o.image_base + (static_cast<int64_t>(ih) * g.in_w + iw) * g.in_c + k.c : -1;
}

// The byte offset of B's chunk of column `column` of the block at cursor k, from the block's
// first column's weights (a row of k_bytes per output channel); -1 past K.
GE_FP8_CONV_HD int64_t b_source(int column, const KCursor& k, const Geometry& g) {
  return k.kb < g.k_bytes() ? static_cast<int64_t>(column) * g.k_bytes() + k.kb : -1;
}

// The weights of the block's phase and first column, from the start of the weight bytes.
GE_FP8_CONV_HD int64_t block_weights(int phase, int col0, const Geometry& g) {
  return (static_cast<int64_t>(phase) * g.out_c + col0) * g.k_bytes();
}

// The offset of the output element (GEMM row m, channel 0) in the NHWC output.
GE_FP8_CONV_HD int64_t output_pixel(int64_t m, const Geometry& g, int phase) {
  const Position at = position_of(m, g);
  const int oy = at.oh * g.out_stride + phase / 2, ox = at.ow * g.out_stride + phase % 2;
  return ((at.image * g.out_h + oy) * g.out_w + ox) * g.out_c;
}

// The accumulators: thread t of warpgroup wg (warp w = t / 32 % 4, lane l) holds, of n8 block j,
// d[4j + 2h + e] = the tile's (row 64 wg + 16 w + l / 4 + 8 h, column 8 j + 2 (l % 4) + e).
GE_FP8_CONV_HD int accumulator_row(int t, int h) { return 64 * (t / 128) + 16 * (t / 32 % 4) + t % 32 / 4 + 8 * h; }
GE_FP8_CONV_HD int accumulator_column(int t, int j, int e) { return 8 * j + 2 * (t % 4) + e; }

// The backward-data phases' weights: wp[phase][c][th][tw][k] = w[k][kh][kw][c] (w: K x 4 x 4 x C
// bytes), kh = 3 - pa - 2 th, kw = 3 - pb - 2 tw; the byte of w that wp[i] is.
GE_FP8_CONV_HD int64_t phase_weight_source(int64_t i, int out_channels, int in_channels) {
  const int k = static_cast<int>(i % out_channels);
  const int64_t rest = i / out_channels;
  const int tw = static_cast<int>(rest % 2), th = static_cast<int>(rest / 2 % 2);
  const int c = static_cast<int>(rest / 4 % in_channels), phase = static_cast<int>(rest / 4 / in_channels);
  const int kh = 3 - phase / 2 - 2 * th, kw = 3 - phase % 2 - 2 * tw;
  return ((static_cast<int64_t>(k) * 4 + kh) * 4 + kw) * in_channels + c;
}

// The GEMM rows a grid can take (gridDim.y is at most 65535 tiles).
constexpr int64_t kMaxPositions = int64_t{65535} * kTileRows;

// The forward of x (N, C, H, W) with w (K, C, R, S) into y: whether the kernel takes the shapes
// (C a multiple of 32, K of 64; the grid within bounds), and the geometry.
inline bool forward_geometry(const Shape& x, const Shape& w, const Shape& y, const Conv2dParams& p, Geometry* g) {
  if (x.size() != 4 || w.size() != 4 || y.size() != 4) return false;
  if (w[1] != x[1] || x[1] % 32 != 0 || w[0] % 64 != 0 || y[1] != w[0] || y[0] != x[0]) return false;
  if (y[2] != conv_out_size(x[2], w[2], p.stride, p.pad) || y[3] != conv_out_size(x[3], w[3], p.stride, p.pad))
    return false;
  if (y[0] * y[2] * y[3] <= 0 || y[0] * y[2] * y[3] > kMaxPositions || x[1] * w[2] * w[3] > (int64_t{1} << 30))
    return false;
  *g = Geometry{};
  g->images = static_cast<int>(x[0]);
  g->in_h = static_cast<int>(x[2]);
  g->in_w = static_cast<int>(x[3]);
  g->in_c = static_cast<int>(x[1]);
  g->taps_h = static_cast<int>(w[2]);
  g->taps_w = static_cast<int>(w[3]);
  g->grid_h = g->out_h = static_cast<int>(y[2]);
  g->grid_w = g->out_w = static_cast<int>(y[3]);
  g->out_c = static_cast<int>(w[0]);
  g->in_stride = p.stride;
  g->in_off_h = g->in_off_w = -p.pad;
  g->out_stride = 1;
  g->phases = 1;
  return true;
}

// The backward-data of the 4x4, stride-2, pad-1 convolution with w (K, C, 4, 4) from dy (N, K, P, Q)
// into dx (N, C, 2P, 2Q): four phases, each a 2x2 stride-1 convolution of dy with its weights
// (phase_weight_source). dx pixel (2a + pa, 2b + pb) takes dy rows a + pa + th - 1 and columns
// b + pb + tw - 1. K a multiple of 32, C of 64.
inline bool backward_data_geometry(const Shape& dy, const Shape& w, const Shape& dx, const Conv2dParams& p,
                                   Geometry* g) {
  if (dy.size() != 4 || w.size() != 4 || dx.size() != 4 || p.stride != 2 || p.pad != 1) return false;
  if (w[2] != 4 || w[3] != 4 || dy[1] != w[0] || dx[1] != w[1] || w[0] % 32 != 0 || w[1] % 64 != 0) return false;
  if (dx[0] != dy[0] || dx[2] != 2 * dy[2] || dx[3] != 2 * dy[3]) return false;
  if (dy[0] * dy[2] * dy[3] <= 0 || dy[0] * dy[2] * dy[3] > kMaxPositions || w[0] * 4 > (int64_t{1} << 30))
    return false;
  *g = Geometry{};
  g->images = static_cast<int>(dy[0]);
  g->in_h = g->grid_h = static_cast<int>(dy[2]);
  g->in_w = g->grid_w = static_cast<int>(dy[3]);
  g->in_c = static_cast<int>(w[0]);
  g->taps_h = g->taps_w = 2;
  g->in_stride = 1;
  g->out_h = static_cast<int>(dx[2]);
  g->out_w = static_cast<int>(dx[3]);
  g->out_c = static_cast<int>(w[1]);
  g->out_stride = 2;
  g->in_off_h = g->in_off_w = -1;
  g->phases = 4;
  return true;
}

// The tile's columns: 128 where the output channels allow, else 64.
inline int tile_columns(const Geometry& g) { return g.out_c % 128 == 0 ? 128 : 64; }

}  // namespace fp8_conv
}  // namespace gpu
}  // namespace ge

#undef GE_FP8_CONV_HD
