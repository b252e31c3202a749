// Casts: the bit-level half/bf16 conversions of half_bits.h against an independent computation
// in double, correct rounding from double, the CPU cast across dtypes and layouts, and the
// GPU cast against the CPU bit for bit.
#include <cfenv>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/half_bits.h"
#include "core/round_from_double.h"
#include "support/test_util.h"

using namespace ge;

namespace {

// A binary floating format: significand bits (with the implicit one), smallest normal
// exponent, largest finite value.
struct Format {
  int precision;
  int min_exponent;
  double max_finite;
};
constexpr Format kHalf = {11, -14, 65504.0};
constexpr Format kBf16 = {8, -126, 3.3895313892515355e38};  // (2 - 2^-7) * 2^127

// Round-to-nearest-even of x into fmt, computed independently of half_bits.h: scale x so the
// format's last significand bit is the units digit, round with nearbyint (which uses the
// default to-nearest-even mode), scale back. Exact in double for these formats.
double round_to(double x, const Format& fmt) {
  if (std::isnan(x) || std::isinf(x) || x == 0) return x;
  int e;
  std::frexp(x, &e);  // |x| in [2^(e-1), 2^e)
  const int quantum_exponent = std::max(e - 1, fmt.min_exponent) - (fmt.precision - 1);
  const double r = std::ldexp(std::nearbyint(std::ldexp(x, -quantum_exponent)), quantum_exponent);
  if (std::fabs(r) > fmt.max_finite) return std::copysign(HUGE_VAL, x);
  return r == 0 ? std::copysign(0.0, x) : r;
}

// The value a half bit pattern stands for, decoded from the IEEE definition.
double decode_half(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v;
  if (exp == 0x1f)
    v = mant ? std::numeric_limits<double>::quiet_NaN() : HUGE_VAL;
  else if (exp == 0)
    v = std::ldexp(mant, -24);
  else
    v = std::ldexp(1024 + mant, exp - 25);
  return sign ? -v : v;
}

// Same value and, for zeros, same sign.
bool same_value(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

float next_up(float f) { return std::nextafter(f, std::numeric_limits<float>::infinity()); }
float next_down(float f) { return std::nextafter(f, -std::numeric_limits<float>::infinity()); }

std::string host_bytes(const Tensor& t) {
  const Tensor h = t.device().is_cpu() ? t : t.to(Device::cpu());
  return std::string(static_cast<const char*>(h.data()), h.nbytes());
}

}  // namespace

TEST_CASE("cast: all 65536 f16 bit patterns decode exactly and round-trip") {
  REQUIRE(std::fegetround() == FE_TONEAREST);
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    const float f = half_bits_to_float(h);
    CAPTURE(bits);
    REQUIRE(same_value(f, decode_half(h)));
    if (std::isnan(f)) {
      CHECK(std::isnan(half_bits_to_float(float_to_half_bits(f))));
    } else {
      REQUIRE(float_to_half_bits(f) == h);
    }
  }
}

TEST_CASE("cast: all 65536 bf16 bit patterns round-trip") {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const uint16_t b = static_cast<uint16_t>(bits);
    const float f = bf16_bits_to_float(b);
    uint32_t expected_f;
    std::memcpy(&expected_f, &f, 4);
    CAPTURE(bits);
    REQUIRE(expected_f == bits << 16);  // bf16 is the top half of a float
    if (std::isnan(f))
      CHECK(std::isnan(bf16_bits_to_float(float_to_bf16_bits(f))));
    else
      REQUIRE(float_to_bf16_bits(f) == b);
  }
}

TEST_CASE("cast: f32 -> f16 and f32 -> bf16 round to nearest even at ties subnormals and overflow") {
  // Around every representable value: the value, the exact midpoints to both neighbours (ties)
  // and one float ulp either side of each midpoint.
  auto check_around_grid = [](const Format& fmt, auto to_bits, auto from_bits) {
    int checked = 0;
    for (uint32_t bits = 0; bits < 0x10000; ++bits) {
      const float v = from_bits(static_cast<uint16_t>(bits));
      if (!std::isfinite(v)) continue;
      const float next = from_bits(static_cast<uint16_t>(bits + 1));  // next magnitude (may be inf)
      const double mid =
          std::isfinite(next)
              ? (static_cast<double>(v) + next) / 2
              : static_cast<double>(v) + (static_cast<double>(v) - from_bits(static_cast<uint16_t>(bits - 1))) / 2;
      const float m = static_cast<float>(mid);
      REQUIRE(static_cast<double>(m) == mid);  // midpoints are floats
      for (float x : {v, m, next_up(m), next_down(m), next_up(v), next_down(v)}) {
        CAPTURE(bits);
        CAPTURE(x);
        REQUIRE(same_value(from_bits(to_bits(x)), round_to(x, fmt)));
        ++checked;
      }
    }
    return checked;
  };
  auto half_to = [](float x) { return float_to_half_bits(x); };
  auto half_from = [](uint16_t h) { return half_bits_to_float(h); };
  auto bf16_to = [](float x) { return float_to_bf16_bits(x); };
  auto bf16_from = [](uint16_t b) { return bf16_bits_to_float(b); };
  CHECK(check_around_grid(kHalf, half_to, half_from) > 300000);
  CHECK(check_around_grid(kBf16, bf16_to, bf16_from) > 300000);

  // Landmarks, spelled out.
  CHECK(float_to_half_bits(65504.f) == 0x7bff);
  CHECK(float_to_half_bits(65519.99f) == 0x7bff);
  CHECK(float_to_half_bits(65520.f) == 0x7c00);   // the tie above the largest half goes to inf
  CHECK(float_to_half_bits(0x1p-24f) == 0x0001);  // smallest subnormal
  CHECK(float_to_half_bits(0x1p-25f) == 0x0000);  // half of it: tie to even (zero)
  CHECK(float_to_half_bits(next_up(0x1p-25f)) == 0x0001);
  CHECK(float_to_half_bits(0x3p-25f) == 0x0002);  // 1.5 ulp: tie to even (2)
  CHECK(float_to_half_bits(-0.f) == 0x8000);
  CHECK(float_to_half_bits(1e-30f) == 0x0000);
  CHECK(float_to_half_bits(-1e30f) == 0xfc00);
  CHECK(float_to_bf16_bits(std::numeric_limits<float>::max()) == 0x7f80);
  CHECK(float_to_bf16_bits(1.f + 0x1p-8f) == 0x3f80);  // tie to even
  CHECK(float_to_bf16_bits(1.f + 0x3p-8f) == 0x3f82);

  // Random floats over every exponent, NaNs excluded.
  std::mt19937_64& rng = test::rng();
  for (int i = 0; i < 2000000; ++i) {
    const uint32_t bits = static_cast<uint32_t>(rng());
    float x;
    std::memcpy(&x, &bits, 4);
    if (std::isnan(x)) continue;
    CAPTURE(bits);
    REQUIRE(same_value(half_bits_to_float(float_to_half_bits(x)), round_to(x, kHalf)));
    REQUIRE(same_value(bf16_bits_to_float(float_to_bf16_bits(x)), round_to(x, kBf16)));
  }
  CHECK(std::isnan(half_bits_to_float(float_to_half_bits(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isnan(bf16_bits_to_float(float_to_bf16_bits(std::numeric_limits<float>::quiet_NaN()))));
}

TEST_CASE("cast: double -> f16 / bf16 rounds once not twice") {
  // 1 + 2^-11 + 2^-40 lies just above the half tie 1 + 2^-11: the correct half is 1 + 2^-10.
  // Rounding to float first drops the 2^-40 and turns it into a tie that goes down to 1.
  const double above_tie = 1.0 + 0x1p-11 + 0x1p-40;
  CHECK(float_to_half_bits(static_cast<float>(above_tie)) == 0x3c00);  // the trap
  CHECK(double_to_half_bits(above_tie) == 0x3c01);
  CHECK(double_to_half_bits(1.0 + 0x1p-11 - 0x1p-40) == 0x3c00);
  CHECK(double_to_half_bits(1.0 + 0x1p-11) == 0x3c00);  // exact tie: even
  CHECK(double_to_bf16_bits(1.0 + 0x1p-8 + 0x1p-40) == 0x3f81);
  CHECK(double_to_half_bits(1e300) == 0x7c00);
  CHECK(double_to_bf16_bits(-1e300) == 0xff80);
  CHECK(double_to_half_bits(1e-300) == 0x0000);
  CHECK(double_to_half_bits(-1e-300) == 0x8000);
  CHECK(double_to_half_bits(0x1p-25 + 0x1p-60) == 0x0001);  // just above the smallest tie
  CHECK(double_to_bf16_bits(0x1p-134 + 0x1p-170) == 0x0001);

  std::mt19937_64& rng = test::rng();
  for (int i = 0; i < 1000000; ++i) {
    // Doubles near the target grids, with low bits that a float would cut off.
    const double base =
        std::ldexp(1.0 + static_cast<double>(rng() >> 11) * 0x1p-53, static_cast<int>(rng() % 300) - 150);
    const double x = i % 2 ? -base : base;
    CAPTURE(x);
    REQUIRE(same_value(decode_half(double_to_half_bits(x)), round_to(x, kHalf)));
    REQUIRE(same_value(bf16_bits_to_float(double_to_bf16_bits(x)), round_to(x, kBf16)));
    REQUIRE(same_value(double_to_float_round_odd(x), x) == (static_cast<double>(static_cast<float>(x)) == x));
  }
}

TEST_CASE("cast: CPU cast across dtypes and memory formats") {
  const Shape shape = {3, 5, 4, 7};
  const std::vector<DType> dtypes = {DType::F32, DType::F16, DType::BF16, DType::F64};
  const std::vector<double> values = test::random_values(shape_numel(shape), -70000.0, 70000.0);
  for (DType from : dtypes) {
    for (DType to : dtypes) {
      for (MemoryFormat from_format : {MemoryFormat::NCHW, MemoryFormat::NHWC}) {
        for (MemoryFormat to_format : {MemoryFormat::NCHW, MemoryFormat::NHWC}) {
          CAPTURE(dtype_name(from));
          CAPTURE(dtype_name(to));
          CAPTURE(format_name(from_format));
          CAPTURE(format_name(to_format));
          const Tensor src = Tensor::from_doubles(values, shape, from, Device::cpu(), from_format);
          Tensor dst = Tensor::empty(shape, to, Device::cpu(), to_format);
          test::poison(dst);
          ops::cast(src, dst);
          CHECK(dst.format() == to_format);
          const std::vector<double> in = src.to_doubles(), out = dst.to_doubles();
          for (size_t i = 0; i < in.size(); ++i) {
            const double expected = to == DType::F16 ? decode_half(double_to_half_bits(in[i]))
                                    : to == DType::BF16
                                        ? static_cast<double>(bf16_bits_to_float(double_to_bf16_bits(in[i])))
                                    : to == DType::F32 ? static_cast<double>(static_cast<float>(in[i]))
                                                       : in[i];
            REQUIRE(same_value(out[i], expected));
          }
        }
      }
    }
  }
  // Rank other than 4 is plain row-major.
  const Tensor v = Tensor::from_doubles({1.0, -2.5, 1e-8, 70000.0}, {4}, DType::F64);
  Tensor h = Tensor::empty({4}, DType::F16);
  ops::cast(v, h);
  CHECK(h.to_doubles() == std::vector<double>{1.0, -2.5, decode_half(double_to_half_bits(1e-8)), HUGE_VAL});
}

TEST_CASE("cast: GPU cast is bitwise the CPU cast across dtypes and layouts") {
  GE_REQUIRE_GPU();
  // (N, C, 1, 1) (G's noise) and (N, 1, H, W): the same order in either layout, copied as it lies.
  const std::vector<Shape> shapes = {{2, 64, 8, 8}, {3, 5, 7, 9},    {1, 3, 33, 31}, {1001},
                                     {4096},        {37, 100, 1, 1}, {3, 1, 5, 6}};
  const std::vector<DType> dtypes = {DType::F32, DType::F16, DType::BF16};
  for (const Shape& shape : shapes) {
    for (DType from : dtypes) {
      for (DType to : dtypes) {
        for (MemoryFormat from_format : {MemoryFormat::NCHW, MemoryFormat::NHWC}) {
          for (MemoryFormat to_format : {MemoryFormat::NCHW, MemoryFormat::NHWC}) {
            if (shape.size() != 4 && (from_format != MemoryFormat::NCHW || to_format != MemoryFormat::NCHW)) continue;
            CAPTURE(shape_str(shape));
            CAPTURE(dtype_name(from));
            CAPTURE(dtype_name(to));
            CAPTURE(format_name(from_format));
            CAPTURE(format_name(to_format));
            // Wide range: exercises overflow to inf in f16 and subnormals.
            const Tensor src_cpu = test::random_tensor(shape, from, Device::cpu(), from_format, -70000.0, 70000.0);
            Tensor dst_cpu = Tensor::empty(shape, to, Device::cpu(), to_format);
            ops::cast(src_cpu, dst_cpu);
            const Tensor src_gpu = src_cpu.to(Device::cuda());
            Tensor dst_gpu = Tensor::empty(shape, to, Device::cuda(), to_format);
            test::poison(dst_gpu);
            ops::cast(src_gpu, dst_gpu);
            REQUIRE(host_bytes(dst_gpu) == host_bytes(dst_cpu));
            // Small magnitudes: f16 subnormals and bf16 rounding of tiny values.
            const Tensor tiny_cpu = Tensor::from_doubles(test::random_values(shape_numel(shape), -1e-5, 1e-5), shape,
                                                         from, Device::cpu(), from_format);
            Tensor tiny_dst_cpu = Tensor::empty(shape, to, Device::cpu(), to_format);
            ops::cast(tiny_cpu, tiny_dst_cpu);
            Tensor tiny_dst_gpu = Tensor::empty(shape, to, Device::cuda(), to_format);
            ops::cast(tiny_cpu.to(Device::cuda()), tiny_dst_gpu);
            REQUIRE(host_bytes(tiny_dst_gpu) == host_bytes(tiny_dst_cpu));
          }
        }
      }
    }
  }
}
