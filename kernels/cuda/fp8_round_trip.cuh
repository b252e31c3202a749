// The FP8 round trip of values a kernel holds (ops::fp8_round_trip: core/fp8_scaling_math.h's
// fp8_round_trip_of_code of each value's fp8_quantize_element, bitwise) on Hopper's conversion
// instructions, and the amax of those values folded into a device scalar: for fp8_cast.cu's
// round-trip kernel and for the kernels that round what they write (ops::Fp8RoundTrip: the
// BatchNorm backward's dx).
#pragma once
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "core/fp8_scaling_math.h"
#include "cuda/aligned.h"
#include "cuda/vector_pack.cuh"

namespace ge {
namespace gpu {

// ops::Fp8RoundTrip as a kernel takes it: device pointers, scale null for no rounding, amax
// (fp8_amax_key bits) null for none recorded, codes null for none written.
struct Fp8RoundTripArgs {
  const float* scale = nullptr;
  const float* scale_inv = nullptr;
  uint32_t* amax = nullptr;
  Fp8Format format = Fp8Format::E4M3;
  uint8_t* codes = nullptr;
  bool codes_only = false;  // codes 8-byte aligned, for fp8_store_written's packs of 8
};

inline Fp8RoundTripArgs fp8_round_trip_args(const ops::Fp8RoundTrip* r) {
  if (!r) return {};
  return {r->scale.data_as<const float>(),
          r->scale_inv.data_as<const float>(),
          r->amax.defined() ? static_cast<uint32_t*>(r->amax.data()) : nullptr,
          r->format,
          r->codes.defined() ? r->codes.data_as<uint8_t>() : nullptr,
          r->codes_only && r->codes.defined() && aligned_to(r->codes.data(), 8)};
}

// fp8_quantize_element of two f32 products (scaled values), two codes in one word, the first in
// the lowest byte: Hopper's conversion instruction (cvt.rn.satfinite, round to nearest even with
// saturation, as fp8_bits.h does) for finite products, the element function for the others.
template <Fp8Format F>
__device__ __forceinline__ uint32_t fp8_codes_pair(float2 scaled, float a, float b, float s) {
  constexpr __nv_fp8_interpretation_t kFormat = F == Fp8Format::E4M3 ? __NV_E4M3 : __NV_E5M2;
  uint32_t codes = __nv_cvt_float2_to_fp8x2(scaled, __NV_SATFINITE, kFormat);
  if (!fp8_math::is_finite(scaled.x)) codes = (codes & 0xff00u) | fp8_quantize_element(a, s, F);
  if (!fp8_math::is_finite(scaled.y)) codes = (codes & 0x00ffu) | uint32_t{fp8_quantize_element(b, s, F)} << 8;
  return codes;
}

// fp8_round_trip_of_code of two values: the f32 products to two E4M3 or E5M2 codes
// (cvt.rn.satfinite rounds to nearest even and saturates, as fp8_bits.h does), the codes to two
// halves (exact: every value of both formats is a half), each times scale_inv. The bit
// arithmetic of fp8_bits.h made a round trip bound by its instructions, not by memory
// (docs/performance.md, "FP8 convolutions"). Non-finite inputs pass through and a NaN result is
// the canonical one, as fp8_round_trip_of_code returns them.
template <Fp8Format F>
__device__ __forceinline__ float2 fp8_round_trip_pair(float2 v, float s, float s_inv) {
  constexpr __nv_fp8_interpretation_t kFormat = F == Fp8Format::E4M3 ? __NV_E4M3 : __NV_E5M2;
  const float2 scaled = make_float2(fmul_rn(v.x, s), fmul_rn(v.y, s));
  const __half2 values =
      __half2(__nv_cvt_fp8x2_to_halfraw2(__nv_cvt_float2_to_fp8x2(scaled, __NV_SATFINITE, kFormat), kFormat));
  const float2 w = __half22float2(values);
  const auto finish = [&](float x, float fp8_value) {
    if (!fp8_math::is_finite(x)) return x;
    const float r = fmul_rn(fp8_value, s_inv);
    return fp8_math::is_nan(r) ? bits_float(fp8_math::kCanonicalNanBits) : r;
  };
  return make_float2(finish(v.x, w.x), finish(v.y, w.y));
}

// The bits of a 16-bit float type with the sign cleared order as the magnitudes do: infinity is
// kInf, every NaN above it. kMaxFinite: the largest finite value's f32 bits.
template <class T>
struct Magnitude16;
template <>
struct Magnitude16<__half> {
  static constexpr uint32_t kInf = 0x7c00u, kMaxFinite = 0x477fe000u;  // 65504
};
template <>
struct Magnitude16<__nv_bfloat16> {
  static constexpr uint32_t kInf = 0x7f80u, kMaxFinite = 0x7f7f0000u;
};

// The largest magnitude in a pack of 16-bit values, as Magnitude16's bits: two values a max.u16x2,
// instead of a key and a max per value.
template <class T, int V>
__device__ __forceinline__ uint32_t largest_magnitude(const Pack<T, V>& p) {
  static_assert(sizeof(T) == 2 && V % 2 == 0, "two 16-bit values a word");
  uint32_t m = 0;
#pragma unroll
  for (int j = 0; j < V / 2; ++j) m = __vmaxu2(m, reinterpret_cast<const uint32_t*>(p.v)[j] & 0x7fff7fffu);
  return max(m & 0xffffu, m >> 16);
}

// fp8_amax_key of a value whose magnitude is `bits` (largest_magnitude): the integer max of the
// keys is the key of the largest magnitude, so a pack folds one key.
template <class T>
__device__ __forceinline__ uint32_t amax_key_of_magnitude(uint32_t bits) {
  if (bits > Magnitude16<T>::kInf) return fp8_math::kCanonicalNanBits;
  if constexpr (std::is_same_v<T, __half>)
    return float_bits(__half2float(__ushort_as_half(static_cast<unsigned short>(bits))));
  else
    return bits << 16;
}

// Whether x * s rounds to a finite f32 for every finite x of type T (rounding is monotonic, so the
// largest x decides): then every finite x's code is cvt.rn.satfinite's, no check per value.
template <class T>
__device__ __forceinline__ bool products_finite(float s) {
  return fp8_math::is_finite(fmul_rn(bits_float(Magnitude16<T>::kMaxFinite), s));
}

// The codes of two finite f32 products, the first in the lowest byte (fp8_codes_pair without its
// checks).
template <Fp8Format F>
__device__ __forceinline__ uint32_t fp8_codes_of_finite(float2 scaled) {
  return __nv_cvt_float2_to_fp8x2(scaled, __NV_SATFINITE, F == Fp8Format::E4M3 ? __NV_E4M3 : __NV_E5M2);
}

// The codes of an even pack's values times s, pair_codes(scaled pair, a, b) giving each pair's two,
// into words (V / 4 words, zeroed by the caller; the first code in the lowest byte).
template <class T, int V, class PairCodes>
__device__ __forceinline__ void pack_codes(const Pack<T, V>& p, float s, uint32_t (&words)[(V + 3) / 4],
                                           PairCodes pair_codes) {
#pragma unroll
  for (int j = 0; j < V; j += 2) {
    const float a = load_float(&p.v[j]), b = load_float(&p.v[j + 1]);
    words[j / 4] |= pair_codes(make_float2(fmul_rn(a, s), fmul_rn(b, s)), a, b) << (16 * (j / 2 % 2));
  }
}

// The round trip of a pack's values (each already a T) in place, folding their amax keys into
// key, and with `codes` their V codes there (the codes of the values before rounding); an odd
// pack's last value goes with a zero, which adds nothing to the amax. A pack of 16-bit values that
// are finite, with finite products and scale_inv, takes one conversion to codes and one back a
// pair and no check per value (a NaN result needs a non-finite value, product or scale_inv).
template <Fp8Format F, class T, int V>
__device__ __forceinline__ void fp8_round_trip_pack(Pack<T, V>& p, float s, float s_inv, uint32_t& key,
                                                    uint8_t* codes = nullptr) {
  if constexpr (sizeof(T) == 2 && V % 2 == 0) {
    const uint32_t magnitude = largest_magnitude(p);
    key = max(key, amax_key_of_magnitude<T>(magnitude));
    if (magnitude < Magnitude16<T>::kInf && products_finite<T>(s) && fp8_math::is_finite(s_inv)) {
      constexpr __nv_fp8_interpretation_t kFormat = F == Fp8Format::E4M3 ? __NV_E4M3 : __NV_E5M2;
      uint32_t words[(V + 3) / 4] = {};
      pack_codes(p, s, words, [](float2 scaled, float, float) { return fp8_codes_of_finite<F>(scaled); });
#pragma unroll
      for (int j = 0; j < V; j += 2) {
        const auto pair = static_cast<__nv_fp8x2_storage_t>(words[j / 4] >> (16 * (j / 2 % 2)));
        const float2 w = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pair, kFormat)));
        store_float2(&p.v[j], fmul_rn(w.x, s_inv), fmul_rn(w.y, s_inv));
      }
      if (codes) {
        if constexpr (V == 8) {
          if (aligned_to(codes, 8)) {
            *reinterpret_cast<uint2*>(codes) = make_uint2(words[0], words[1]);
            return;
          }
        }
#pragma unroll
        for (int j = 0; j < V; ++j) codes[j] = static_cast<uint8_t>(words[j / 4] >> (8 * (j % 4)));
      }
      return;
    }
  }
#pragma unroll
  for (int j = 0; j < V; j += 2) {
    const float a = load_float(&p.v[j]), b = j + 1 < V ? load_float(&p.v[j + 1]) : 0.f;
    key = max(key, max(fp8_amax_key(a), fp8_amax_key(b)));
    if (codes) {
      const uint32_t pair = fp8_codes_pair<F>(make_float2(fmul_rn(a, s), fmul_rn(b, s)), a, b, s);
      codes[j] = static_cast<uint8_t>(pair);
      if (j + 1 < V) codes[j + 1] = static_cast<uint8_t>(pair >> 8);
    }
    const float2 r = fp8_round_trip_pair<F>(make_float2(a, b), s, s_inv);
    if (j + 1 < V)
      store_float2(&p.v[j], r.x, r.y);
    else
      store_float(&p.v[j], r.x);
  }
}

// fp8_quantize_element of eight 16-bit values into eight codes (the first in the lowest byte),
// folding their amax keys into key: without a check per value where the values and their products
// are finite (as fp8_round_trip_pack), else fp8_codes_pair two at a time.
template <Fp8Format F, class T>
__device__ __forceinline__ uint2 fp8_quantize_pack(const Pack<T, 8>& p, float s, uint32_t& key) {
  const uint32_t magnitude = largest_magnitude(p);
  key = max(key, amax_key_of_magnitude<T>(magnitude));
  uint32_t words[2] = {0u, 0u};
  if (magnitude < Magnitude16<T>::kInf && products_finite<T>(s))
    pack_codes(p, s, words, [](float2 scaled, float, float) { return fp8_codes_of_finite<F>(scaled); });
  else
    pack_codes(p, s, words, [s](float2 scaled, float a, float b) { return fp8_codes_pair<F>(scaled, a, b, s); });
  return make_uint2(words[0], words[1]);
}

// The scale and scale_inv of args, which a kernel's threads read once; zeros where nothing is rounded.
__device__ __forceinline__ float2 fp8_round_trip_scales(const Fp8RoundTripArgs& args) {
  return args.scale ? make_float2(*args.scale, *args.scale_inv) : make_float2(0.f, 0.f);
}

// A pack a kernel is about to write as elements first .. first + V - 1 of its output, under args:
// untouched without a scale, else rounded in place with its amax keys folded into key and, where
// args asks for codes, its codes written at args.codes + first. The format is chosen at run time
// (one uniform branch a pack).
template <class T, int V>
__device__ __forceinline__ void fp8_round_trip_written(Pack<T, V>& p, const Fp8RoundTripArgs& args, float2 scales,
                                                       uint64_t first, uint32_t& key) {
  if (!args.scale) return;
  uint8_t* codes = args.codes ? args.codes + first : nullptr;
  if (args.format == Fp8Format::E4M3)
    fp8_round_trip_pack<Fp8Format::E4M3>(p, scales.x, scales.y, key, codes);
  else
    fp8_round_trip_pack<Fp8Format::E5M2>(p, scales.x, scales.y, key, codes);
}

// The codes of a pack of 8 values a kernel writes as elements first .. first + 7 of its output
// (first a multiple of 8), stored at args.codes + first in one 8-byte store, their amax keys folded
// into key; the values themselves are left as they are. scale: *args.scale, read once by the
// kernel's threads.
template <class T>
__device__ __forceinline__ void fp8_codes_written(const Pack<T, 8>& p, const Fp8RoundTripArgs& args, float scale,
                                                  uint64_t first, uint32_t& key) {
  *reinterpret_cast<uint2*>(args.codes + first) = args.format == Fp8Format::E4M3
                                                      ? fp8_quantize_pack<Fp8Format::E4M3>(p, scale, key)
                                                      : fp8_quantize_pack<Fp8Format::E5M2>(p, scale, key);
}

// fp8_codes_written for the output of ReLU or LeakyReLU that is written as codes alone
// (ops::conv2d_activation_forward's codes_only): each code's sign bit set where its value is not
// > 0 (it is already for the negatives; the +0s and NaNs keep their values), so that the
// activation's gradient can be formed from the codes (activation_signs_of_codes).
template <class T>
__device__ __forceinline__ void fp8_activation_codes_written(const Pack<T, 8>& p, const Fp8RoundTripArgs& args,
                                                             float scale, uint64_t first, uint32_t& key) {
  uint2 codes = args.format == Fp8Format::E4M3 ? fp8_quantize_pack<Fp8Format::E4M3>(p, scale, key)
                                               : fp8_quantize_pack<Fp8Format::E5M2>(p, scale, key);
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const uint32_t sign = load_float(&p.v[e]) > 0.f ? 0u : 0x80u << (8 * (e % 4));
    if (e < 4)
      codes.x |= sign;
    else
      codes.y |= sign;
  }
  *reinterpret_cast<uint2*>(args.codes + first) = codes;
}

// A pack a kernel writes as elements first .. first + V - 1 of `out` under args: rounded as
// fp8_round_trip_written says and stored, or, where args asks for the codes alone (packs of 8),
// only its codes written (ops::Fp8RoundTrip::codes_only), the values not stored.
template <class T, int V>
__device__ __forceinline__ void fp8_store_written(Pack<T, V>& p, T* out, const Fp8RoundTripArgs& args, float2 scales,
                                                  uint64_t first, uint32_t& key) {
  if constexpr (V == 8) {
    if (args.codes_only) {
      fp8_codes_written(p, args, scales.x, first, key);
      return;
    }
  }
  fp8_round_trip_written(p, args, scales, first, key);
  *reinterpret_cast<Pack<T, V>*>(out + first) = p;
}

// Folds every thread's amax key into *amax: a warp shuffle, the block's warps through shared
// memory, then one integer atomicMax a block (exact and order-free, so any schedule gives the
// CPU's bits). Every thread of the block calls it, with any block shape up to 1024 threads.
__device__ __forceinline__ void fold_amax_key(uint32_t key, uint32_t* amax) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) key = max(key, __shfl_xor_sync(0xffffffffu, key, offset));
  __shared__ uint32_t warp_max[32];
  const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned warps = (blockDim.x * blockDim.y * blockDim.z + 31) / 32;
  if (t % 32 == 0) warp_max[t / 32] = key;
  __syncthreads();
  if (t == 0) {
    uint32_t block_max = 0;
    for (unsigned w = 0; w < warps; ++w) block_max = max(block_max, warp_max[w]);
    if (block_max != 0u) atomicMax(amax, block_max);
  }
}

}  // namespace gpu
}  // namespace ge
