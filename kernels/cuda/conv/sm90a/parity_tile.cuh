// An image's x codes in shared memory as the FP8 forwards of the 4x4, stride-2, pad-1 layers hold
// them (conv_phase_fprop.cu, conv_resident_fprop.cu): output pixel (a, b) reads x row 2a + kh - 1
// and column 2b + kw - 1 at tap (kh, kw), so the codes sit with a zero border as 16-byte pieces
// (16 channels) in [channel group][row + 1][column parity][column / 2] order, the odd columns -1,
// 1, .., kSide - 1 first, then the even ones 0, 2, .., kSide. At any tap, 8 consecutive output
// columns read 8 consecutive pieces of one parity (one 128-byte core matrix) and output rows lie a
// fixed two tile rows apart, so a tap is only a descriptor's start address.
#pragma once
#include <cstdint>

#include "cuda/conv/sm90a/wgmma.cuh"
#include "cuda/copy_async.cuh"

namespace ge {
namespace gpu {

template <int kSide, int kInChannels>
struct ParityTile {
  static constexpr int kParityColumns = kSide / 2 + 1;   // a parity's columns with its border column
  static constexpr int kRowPieces = 2 * kParityColumns;  // a row: both parities
  static constexpr int kRows = kSide + 2;                // with the border rows
  static constexpr int kPlane = kRows * kRowPieces;      // a channel group's pieces
  static constexpr int kGroups = kInChannels / 16;       // 16-byte pieces a pixel
  static constexpr int kPieces = kGroups * kPlane;
  static constexpr int kSlices = kInChannels / 32;  // MMA steps (32 channels each) a tap

  // The piece holding x column c (-1 .. kSide) of tile row `row` (x row + 1), group g.
  __host__ __device__ static constexpr int piece_of(int g, int row, int c) {
    return g * kPlane + row * kRowPieces + (c % 2 != 0 ? (c + 1) / 2 : kParityColumns + c / 2);
  }

  // Where the B operand of tap `tap` (kh = tap / 4, kw = tap % 4) and channel slice `slice` starts,
  // in pieces: output pixel (0, 0)'s, reading tile row kh (x row kh - 1) and x column kw - 1 in
  // channel groups 2 slice and 2 slice + 1 (the descriptor's leading stride apart). Pixel (a, b)
  // reads 2a rows and b pieces further on.
  __host__ __device__ static constexpr int tap_offset(int tap, int slice) {
    return piece_of(2 * slice, tap / 4, tap % 4 - 1);
  }

  // The descriptor of a tile's B operands: K along channel groups, N along output rows (two tile
  // rows apart), each row's 8 columns a core matrix.
  __device__ static uint64_t descriptor(const uint4* tile) {
    return smem_descriptor(shared_address(tile), 16 * kPlane, 16 * 2 * kRowPieces);
  }

  // Zeroes the border rows and columns of `tiles` consecutive tiles; the interiors take each
  // image's x.
  __device__ static void zero_borders(uint4* tiles_at, int tiles, int tid, int threads) {
    for (int i = tid; i < tiles * kPieces; i += threads) {
      const int q = i % kPlane, row = q / kRowPieces, col = q % kRowPieces;
      if (row == 0 || row == kRows - 1 || col == 0 || col == kRowPieces - 1) tiles_at[i] = make_uint4(0, 0, 0, 0);
    }
  }

  // Starts copying image `image` of x (u8 NHWC) into `into`, one commit group.
  __device__ static void load(const uint8_t* x, int image, uint4* into, int tid, int threads) {
    const char* src = reinterpret_cast<const char*>(x + static_cast<size_t>(image) * kSide * kSide * kInChannels);
    for (int q = tid; q < kSide * kSide * kGroups; q += threads) {
      const int pixel = q / kGroups, group = q % kGroups;
      copy_async_16(&into[piece_of(group, pixel / kSide + 1, pixel % kSide)], src + size_t{16} * q, true);
    }
    copy_async_commit();
  }
};

}  // namespace gpu
}  // namespace ge
