// Hopper's warpgroup MMA (wgmma, sm_90a): the shared-memory matrix descriptor, the fence, commit
// and wait of the asynchronous MMAs, and the FP8 MMAs of the FP8 convolutions. A warpgroup is
// four consecutive warps (128 threads); every thread of it issues each of these together.
//
// Operands in shared memory are K-major and unswizzled: a core matrix is 8 rows (of M or N) of 16
// bytes of K (8 halves, 16 FP8 values) in 128 contiguous bytes, and a descriptor gives where the
// first one starts and how far apart core matrices lie along K (leading) and along M or N
// (stride). An m64nNk16 f16 MMA and an m64nNk32 FP8 MMA both read two core matrices along K.
//
// The accumulators of an m64nN MMA, f32: thread t of the warpgroup (warp w = t / 32, lane l)
// holds d[4j .. 4j + 3] of n8 block j = 0 .. N/8 - 1 as (row 16 w + l / 4, columns 8 j + 2 (l % 4)
// and + 1), then (row + 8, the same columns).
#pragma once
#include <cstdint>

#include "ganengine/fp8.h"

namespace ge {
namespace gpu {

constexpr int kWarpgroupThreads = 128;

// start, leading and stride in bytes, multiples of 16.
__device__ __forceinline__ uint64_t smem_descriptor(uint32_t start, uint32_t leading, uint32_t stride) {
  return static_cast<uint64_t>((start >> 4) & 0x3fff) | static_cast<uint64_t>((leading >> 4) & 0x3fff) << 16 |
         static_cast<uint64_t>((stride >> 4) & 0x3fff) << 32;
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most kPending of the warpgroup's committed MMA groups are still running.
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// The 64 f32 accumulators a thread holds of an m64n128 MMA, d[0..63]: the register list the
// instruction names (operands %0..%63) and the in-out constraints binding them.
#define GE_WGMMA_D64_REGISTERS                                                                           \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, "     \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, " \
  "%41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, " \
  "%61, %62, %63}, "
#define GE_WGMMA_D64_OPERANDS                                                                                 \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), \
      "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),  \
      "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), \
      "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), \
      "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), \
      "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), \
      "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// d (+)= a * b over 32 FP8 values of K, f32 accumulators: a (64 x 32) and b (32 x N, held as N
// rows of K) K-major in shared memory through their descriptors; accumulate false: d = a * b.
// `types` names the formats of a and b: ".e4m3.e4m3" or ".e5m2.e4m3".
#define GE_WGMMA_FP8_M64N128K32(types)                                               \
  asm volatile(                                                                      \
      "{\n"                                                                          \
      ".reg .pred p;\n"                                                              \
      "setp.ne.b32 p, %66, 0;\n"                                                     \
      "wgmma.mma_async.sync.aligned.m64n128k32.f32" types " " GE_WGMMA_D64_REGISTERS \
      "%64, %65, p, 1, 1;\n"                                                         \
      "}\n"                                                                          \
      : GE_WGMMA_D64_OPERANDS                                                        \
      : "l"(a_desc), "l"(b_desc), "r"(static_cast<int>(accumulate)))

#define GE_WGMMA_FP8_M64N64K32(types)                                                                               \
  asm volatile(                                                                                                     \
      "{\n"                                                                                                         \
      ".reg .pred p;\n"                                                                                             \
      "setp.ne.b32 p, %34, 0;\n"                                                                                    \
      "wgmma.mma_async.sync.aligned.m64n64k32.f32" types                                                            \
      " "                                                                                                           \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, "            \
      "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "                                                    \
      "%32, %33, p, 1, 1;\n"                                                                                        \
      "}\n"                                                                                                         \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), \
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),      \
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),     \
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])                   \
      : "l"(a_desc), "l"(b_desc), "r"(static_cast<int>(accumulate)))

// One m64nNk32 FP8 MMA, N = 128 or 64; b is always E4M3 (the convolutions' weights), a E4M3
// (activations) or E5M2 (gradients).
template <int N, Fp8Format A>
__device__ __forceinline__ void wgmma_fp8(float (&d)[N / 2], uint64_t a_desc, uint64_t b_desc, bool accumulate) {
  static_assert(N == 128 || N == 64, "m64n128k32 and m64n64k32 only");
  if constexpr (N == 128 && A == Fp8Format::E4M3)
    GE_WGMMA_FP8_M64N128K32(".e4m3.e4m3");
  else if constexpr (N == 128)
    GE_WGMMA_FP8_M64N128K32(".e5m2.e4m3");
  else if constexpr (A == Fp8Format::E4M3)
    GE_WGMMA_FP8_M64N64K32(".e4m3.e4m3");
  else
    GE_WGMMA_FP8_M64N64K32(".e5m2.e4m3");
}

// d (+)= a * b, a (64 x K) in registers, b (K x 128) K-major in shared memory through its
// descriptor, d in the warpgroup's 64 accumulators a thread; accumulate false: d = a * b. Warp w
// of the warpgroup holds rows 16 w .. 16 w + 15 of a, lane l rows r = 16 w + l / 4 and r + 8:
//  - f16, m64n128k16: the m16n8k16 fragment order, registers {a0 a1} {a2 a3} {a4 a5} {a6 a7} =
//    (r, k) (r, k+1) | (r+8, k) (r+8, k+1) | (r, k+8) (r, k+9) | (r+8, k+8) (r+8, k+9), k = 2 (l % 4);
//  - FP8, m64n128k32: four bytes a register, (r, k..k+3), (r + 8, k..), (r, k + 16..),
//    (r + 8, k + 16..), k = 4 (l % 4), the lowest k in the lowest byte.
// `shape_types` names the shape and formats; `tail` the immediates after the scales (f16: b not
// transposed; FP8 takes none).
#define GE_WGMMA_M64N128_A_REGISTERS(shape_types, tail)                                                                \
  asm volatile(                                                                                                        \
      "{\n"                                                                                                            \
      ".reg .pred p;\n"                                                                                                \
      "setp.ne.b32 p, %69, 0;\n"                                                                                       \
      "wgmma.mma_async.sync.aligned." shape_types " " GE_WGMMA_D64_REGISTERS "{%64, %65, %66, %67}, %68, p, 1, 1" tail \
      ";\n"                                                                                                            \
      "}\n"                                                                                                            \
      : GE_WGMMA_D64_OPERANDS                                                                                          \
      : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "l"(b_desc), "r"(static_cast<int>(accumulate)))

__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], const uint4& a, uint64_t b_desc, bool accumulate) {
  GE_WGMMA_M64N128_A_REGISTERS("m64n128k16.f32.f16.f16", ", 0");
}

// b's format and a's: E4M3 or E5M2 (a's fragment bytes are laid out alike in either).
template <Fp8Format B, Fp8Format A = Fp8Format::E4M3>
__device__ __forceinline__ void wgmma_fp8_m64n128k32_a_registers(float (&d)[64], const uint4& a, uint64_t b_desc,
                                                                 bool accumulate) {
  if constexpr (A == Fp8Format::E4M3 && B == Fp8Format::E4M3)
    GE_WGMMA_M64N128_A_REGISTERS("m64n128k32.f32.e4m3.e4m3", "");
  else if constexpr (A == Fp8Format::E4M3)
    GE_WGMMA_M64N128_A_REGISTERS("m64n128k32.f32.e4m3.e5m2", "");
  else if constexpr (B == Fp8Format::E4M3)
    GE_WGMMA_M64N128_A_REGISTERS("m64n128k32.f32.e5m2.e4m3", "");
  else
    GE_WGMMA_M64N128_A_REGISTERS("m64n128k32.f32.e5m2.e5m2", "");
}

// The FP8 m64n64k32 form of the above: d[0..31], a in registers as there.
#define GE_WGMMA_FP8_M64N64K32_A_REGISTERS(types)                                                                   \
  asm volatile(                                                                                                     \
      "{\n"                                                                                                         \
      ".reg .pred p;\n"                                                                                             \
      "setp.ne.b32 p, %37, 0;\n"                                                                                    \
      "wgmma.mma_async.sync.aligned.m64n64k32.f32" types                                                            \
      " "                                                                                                           \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, "            \
      "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "                                                    \
      "{%32, %33, %34, %35}, %36, p, 1, 1;\n"                                                                       \
      "}\n"                                                                                                         \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), \
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),      \
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),     \
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])                   \
      : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "l"(b_desc), "r"(static_cast<int>(accumulate)))

// a E4M3 (the weights), b E4M3 or E5M2.
template <Fp8Format B>
__device__ __forceinline__ void wgmma_fp8_m64n64k32_a_registers(float (&d)[32], const uint4& a, uint64_t b_desc,
                                                                bool accumulate) {
  if constexpr (B == Fp8Format::E4M3)
    GE_WGMMA_FP8_M64N64K32_A_REGISTERS(".e4m3.e4m3");
  else
    GE_WGMMA_FP8_M64N64K32_A_REGISTERS(".e4m3.e5m2");
}

#undef GE_WGMMA_FP8_M64N64K32_A_REGISTERS
#undef GE_WGMMA_FP8_M64N128K32
#undef GE_WGMMA_FP8_M64N64K32
#undef GE_WGMMA_M64N128_A_REGISTERS
#undef GE_WGMMA_D64_REGISTERS
#undef GE_WGMMA_D64_OPERANDS

}  // namespace gpu
}  // namespace ge
