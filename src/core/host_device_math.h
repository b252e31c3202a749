// What rounds and reinterprets bits the same on the host and on the device, for the code both
// backends share (core/half_bits.h, core/fp8_bits.h, core/fp8_scaling_math.h, core/philox.h):
// the GE_HD qualifier, bit casts, and single IEEE operations, each rounded to nearest once. On
// the device each names its round-to-nearest intrinsic, which nvcc never fuses into an FMA (a*b+c
// would otherwise round once instead of twice); host code built as ISO C++ (GCC's
// -ffp-contract=off) rounds each operator once.
#pragma once
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define GE_HD __host__ __device__ __forceinline__
#else
#define GE_HD inline
#endif

// The device's expression where device code is compiled, the host's elsewhere.
#if defined(__CUDA_ARCH__)
#define GE_DEVICE_OR_HOST(device, host) (device)
#else
#define GE_DEVICE_OR_HOST(device, host) (host)
#endif

namespace ge {

// The host's bit cast (std::bit_cast is C++20).
template <class To, class From>
inline To host_bit_cast(From from) {
  static_assert(sizeof(To) == sizeof(From), "a bit cast keeps the size");
  To to;
  std::memcpy(&to, &from, sizeof to);
  return to;
}

GE_HD uint32_t float_bits(float f) { return GE_DEVICE_OR_HOST(__float_as_uint(f), host_bit_cast<uint32_t>(f)); }
GE_HD float bits_float(uint32_t u) { return GE_DEVICE_OR_HOST(__uint_as_float(u), host_bit_cast<float>(u)); }
GE_HD uint64_t double_bits(double d) {
  return GE_DEVICE_OR_HOST(static_cast<uint64_t>(__double_as_longlong(d)), host_bit_cast<uint64_t>(d));
}
GE_HD double bits_double(uint64_t u) {
  return GE_DEVICE_OR_HOST(__longlong_as_double(static_cast<long long>(u)), host_bit_cast<double>(u));
}

GE_HD float fmul_rn(float a, float b) { return GE_DEVICE_OR_HOST(__fmul_rn(a, b), a * b); }
GE_HD float fdiv_rn(float a, float b) { return GE_DEVICE_OR_HOST(__fdiv_rn(a, b), a / b); }
GE_HD double dadd(double a, double b) { return GE_DEVICE_OR_HOST(__dadd_rn(a, b), a + b); }
GE_HD double dsub(double a, double b) { return GE_DEVICE_OR_HOST(__dsub_rn(a, b), a - b); }
GE_HD double dmul(double a, double b) { return GE_DEVICE_OR_HOST(__dmul_rn(a, b), a * b); }
GE_HD double ddiv(double a, double b) { return GE_DEVICE_OR_HOST(__ddiv_rn(a, b), a / b); }
// sqrtsd on the host: correctly rounded, with no errno path that could differ.
GE_HD double dsqrt(double a) { return GE_DEVICE_OR_HOST(__dsqrt_rn(a), __builtin_sqrt(a)); }

}  // namespace ge
