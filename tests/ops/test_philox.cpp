// Philox4x32-10 and the fills built on it: the published known answers, the element/counter
// contract of ops.h, the statistics of the uniform and normal maps, and bitwise agreement of
// the GPU with the CPU.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half_bits.h"
#include "core/philox.h"
#include "support/test_util.h"

using namespace ge;

namespace {

Tensor filled_uniform(const Shape& shape, DType dtype, uint64_t seed, uint64_t offset, Device device = Device::cpu(),
                      MemoryFormat format = MemoryFormat::NCHW) {
  Tensor t = Tensor::empty(shape, dtype, device, format);
  ops::fill_uniform(t, seed, offset);
  return t;
}

Tensor filled_normal(const Shape& shape, DType dtype, uint64_t seed, uint64_t offset, float mean = 0.f,
                     float stddev = 1.f, Device device = Device::cpu(), MemoryFormat format = MemoryFormat::NCHW) {
  Tensor t = Tensor::empty(shape, dtype, device, format);
  ops::fill_normal(t, seed, offset, mean, stddev);
  return t;
}

std::string host_bytes(const Tensor& t) {
  const Tensor h = t.device().is_cpu() ? t : t.to(Device::cpu());
  return std::string(static_cast<const char*>(h.data()), h.nbytes());
}

}  // namespace

TEST_CASE("philox: Random123 known-answer vectors") {
  using philox::Block;
  struct Kat {
    Block ctr;
    uint32_t k0, k1;
    Block expected;
  };
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}},
      {{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}},
       0xffffffffu,
       0xffffffffu,
       {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}},
      // pi digits as counter, more pi digits as key
      {{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}},
       0xa4093822u,
       0x299f31d0u,
       {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}},
  };
  for (const Kat& k : kats) {
    const Block out = philox::philox4x32_10(k.ctr, k.k0, k.k1);
    for (int j = 0; j < 4; ++j) CHECK(out.w[j] == k.expected.w[j]);
  }
  // block_at puts the 64-bit counter in words 0..1 and the 64-bit seed in the key, low word first.
  const Block b = philox::block_at(0x299f31d0a4093822ull, 0x85a308d3243f6a88ull);
  const Block ref = philox::philox4x32_10({{0x243f6a88u, 0x85a308d3u, 0, 0}}, 0xa4093822u, 0x299f31d0u);
  for (int j = 0; j < 4; ++j) CHECK(b.w[j] == ref.w[j]);
}

TEST_CASE("philox: element i takes word i%4 of counter offset + i/4") {
  const uint64_t seed = 0x1234567890abcdefull, offset = 0xfffffffffull;  // crosses the 32-bit word
  const int64_t n = 23;
  const std::vector<float> u = filled_uniform({n}, DType::F32, seed, offset).to_floats();
  const std::vector<float> z = filled_normal({n}, DType::F32, seed, offset).to_floats();
  for (int64_t i = 0; i < n; ++i) {
    const philox::Block b = philox::block_at(seed, offset + static_cast<uint64_t>(i / 4));
    CHECK(u[static_cast<size_t>(i)] == static_cast<float>(b.w[i % 4] >> 8) / 16777216.f);
    float pair[4];
    philox::normals_from_block(b, pair);
    CHECK(z[static_cast<size_t>(i)] == pair[i % 4]);
  }
  CHECK(ops::philox_counters_for(0) == 0);
  CHECK(ops::philox_counters_for(1) == 1);
  CHECK(ops::philox_counters_for(4) == 1);
  CHECK(ops::philox_counters_for(5) == 2);
  CHECK(ops::philox_counters_for(6400) == 1600);
}

TEST_CASE("philox: own log and sincos are accurate to about 1e-15") {
  double worst_log = 0, worst_trig = 0;
  std::mt19937_64& rng = test::rng();
  for (int i = 0; i < 200000; ++i) {
    // u1 as Box-Muller forms it: (a + 1) 2^-32, plus values across the whole double range.
    const double u =
        i % 2 ? (static_cast<double>(rng() >> 32) + 1.0) * 0x1p-32
              : std::ldexp(1.0 + static_cast<double>(rng() >> 11) * 0x1p-53, static_cast<int>(rng() % 2000) - 1000);
    const double ref = std::log(u);
    const double err = std::fabs(philox::log_positive(u) - ref);
    worst_log = std::max(worst_log, ref != 0 ? err / std::fabs(ref) : err);
    const double t = static_cast<double>(rng() >> 32) * 0x1p-32;
    double s, c;
    philox::sincos_turns(t, &s, &c);
    // Reference in long double so its own rounding of 2*pi*t does not dominate.
    const long double angle = 2.0L * 3.141592653589793238462643383279502884L * static_cast<long double>(t);
    worst_trig = std::max({worst_trig, static_cast<double>(std::fabs(s - std::sin(angle))),
                           static_cast<double>(std::fabs(c - std::cos(angle)))});
  }
  CHECK(philox::log_positive(1.0) == 0.0);
  CHECK(worst_log < 1e-15);
  CHECK(worst_trig < 1e-15);
  MESSAGE("worst relative log error ", worst_log, ", worst absolute sin/cos error ", worst_trig);
}

TEST_CASE("philox: uniform draws lie in (0 1) with mean 1/2 and variance 1/12") {
  const int64_t n = 1000000;
  const std::vector<double> u = filled_uniform({n}, DType::F32, 42, 0).to_doubles();
  double sum = 0, sum2 = 0, lo = 1, hi = 0;
  for (double x : u) {
    sum += x;
    sum2 += x * x;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  const double mean = sum / n, var = sum2 / n - mean * mean;
  CHECK(lo >= 0.0);
  CHECK(hi < 1.0);
  CHECK(lo < 1e-4);  // both ends reached
  CHECK(hi > 1 - 1e-4);
  CHECK(std::fabs(mean - 0.5) < 5 * std::sqrt(1.0 / 12 / n));
  CHECK(std::fabs(var - 1.0 / 12) < 1e-3);
  // Ten equal bins hold ~n/10 each (5 sigma of the binomial).
  std::vector<int64_t> bins(10, 0);
  for (double x : u) ++bins[static_cast<size_t>(x * 10)];
  for (int64_t b : bins) CHECK(std::fabs(static_cast<double>(b) - n / 10.0) < 5 * std::sqrt(n * 0.09));
}

TEST_CASE("philox: normal draws have mean 0 variance 1 and Gaussian tails") {
  const int64_t n = 1000000;
  const std::vector<double> z = filled_normal({n}, DType::F32, 7, 1000).to_doubles();
  double sum = 0, sum2 = 0, sum4 = 0, worst = 0;
  int64_t beyond3 = 0, beyond4 = 0, below1 = 0;
  for (double x : z) {
    sum += x;
    sum2 += x * x;
    sum4 += x * x * x * x;
    worst = std::max(worst, std::fabs(x));
    beyond3 += std::fabs(x) > 3;
    beyond4 += std::fabs(x) > 4;
    below1 += x < -1;
  }
  const double mean = sum / n, var = sum2 / n - mean * mean;
  CHECK(std::fabs(mean) < 5.0 / std::sqrt(static_cast<double>(n)));
  CHECK(std::fabs(var - 1) < 5 * std::sqrt(2.0 / n));
  CHECK(std::fabs(sum4 / n - 3) < 0.05);  // kurtosis of a Gaussian
  // P(|z| > 3) = 0.0026998, P(|z| > 4) = 6.334e-5, P(z < -1) = 0.158655: within 5 sigma.
  auto near = [&](int64_t count, double p) { return std::fabs(count - n * p) < 5 * std::sqrt(n * p * (1 - p)); };
  CHECK(near(beyond3, 0.0026998));
  CHECK(near(beyond4, 6.334e-5));
  CHECK(near(below1, 0.158655));
  CHECK(worst <= std::sqrt(-2 * std::log(0x1p-32)) + 1e-6);  // the largest value Box-Muller can give
  CHECK(worst > 4.4);

  // mean and stddev are applied in float after the standard draw.
  const std::vector<float> std_z = filled_normal({1001}, DType::F32, 7, 1000).to_floats();
  const std::vector<float> shifted = filled_normal({1001}, DType::F32, 7, 1000, 3.f, 0.02f).to_floats();
  for (size_t i = 0; i < std_z.size(); ++i) CHECK(shifted[i] == 3.f + 0.02f * std_z[i]);
}

TEST_CASE("philox: streams differ by seed and offset and advance by philox_counters_for") {
  const int64_t n = 1000;
  const std::vector<float> a = filled_uniform({n}, DType::F32, 1, 0).to_floats();
  const std::vector<float> b = filled_uniform({n}, DType::F32, 2, 0).to_floats();
  const std::vector<float> c = filled_uniform({n}, DType::F32, 1, ops::philox_counters_for(n)).to_floats();
  const std::vector<float> a2 = filled_uniform({2 * n}, DType::F32, 1, 0).to_floats();
  const std::vector<float> shifted = filled_uniform({n}, DType::F32, 1, 1).to_floats();
  int same_ab = 0, same_ac = 0;
  for (int64_t i = 0; i < n; ++i) {
    same_ab += a[static_cast<size_t>(i)] == b[static_cast<size_t>(i)];
    same_ac += a[static_cast<size_t>(i)] == c[static_cast<size_t>(i)];
  }
  CHECK(same_ab < 3);
  CHECK(same_ac < 3);
  // Counter based: the next fill continues the stream exactly; offset 1 skips four elements.
  CHECK(std::equal(c.begin(), c.end(), a2.begin() + n));
  CHECK(std::equal(shifted.begin(), shifted.end() - 4, a.begin() + 4));
  // Same inputs, same values.
  CHECK(filled_normal({n}, DType::F32, 9, 5).to_floats() == filled_normal({n}, DType::F32, 9, 5).to_floats());
}

TEST_CASE("philox: half bf16 and f64 fills are the f32 values rounded - NHWC keeps logical order") {
  const Shape shape = {3, 5, 2, 7};  // 210 elements: not a multiple of 4 per row
  const std::vector<float> u32 = filled_uniform(shape, DType::F32, 11, 3).to_floats();
  const std::vector<float> z32 = filled_normal(shape, DType::F32, 11, 3, -1.f, 2.f).to_floats();
  const std::vector<float> u16 = filled_uniform(shape, DType::F16, 11, 3).to_floats();
  const std::vector<float> zb16 = filled_normal(shape, DType::BF16, 11, 3, -1.f, 2.f).to_floats();
  const std::vector<double> z64 = filled_normal(shape, DType::F64, 11, 3, -1.f, 2.f).to_doubles();
  for (size_t i = 0; i < u32.size(); ++i) {
    CHECK(u16[i] == half_bits_to_float(float_to_half_bits(u32[i])));
    CHECK(zb16[i] == bf16_bits_to_float(float_to_bf16_bits(z32[i])));
    CHECK(z64[i] == static_cast<double>(z32[i]));
  }
  const Tensor nhwc = filled_normal(shape, DType::F32, 11, 3, -1.f, 2.f, Device::cpu(), MemoryFormat::NHWC);
  CHECK(nhwc.format() == MemoryFormat::NHWC);
  CHECK(nhwc.to_floats() == z32);
}

TEST_CASE("philox: GPU draws are bitwise the CPU draws") {
  GE_REQUIRE_GPU();
  const std::vector<Shape> shapes = {{1}, {3}, {5}, {1001}, {4099}, {100003}, {64, 100, 1, 1}, {3, 5, 7, 9}};
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    for (const Shape& shape : shapes) {
      for (MemoryFormat format : {MemoryFormat::NCHW, MemoryFormat::NHWC}) {
        if (format == MemoryFormat::NHWC && shape.size() != 4) continue;
        CAPTURE(dtype_name(dtype));
        CAPTURE(shape_str(shape));
        CAPTURE(format_name(format));
        const uint64_t seed = 0xfeedfacecafebeefull, offset = 0xffffffffull;  // low word about to carry
        CHECK(host_bytes(filled_uniform(shape, dtype, seed, offset, Device::cuda(), format)) ==
              host_bytes(filled_uniform(shape, dtype, seed, offset, Device::cpu(), format)));
        CHECK(host_bytes(filled_normal(shape, dtype, seed, offset, 0.f, 1.f, Device::cuda(), format)) ==
              host_bytes(filled_normal(shape, dtype, seed, offset, 0.f, 1.f, Device::cpu(), format)));
        CHECK(host_bytes(filled_normal(shape, dtype, seed, offset, 1.f, 0.02f, Device::cuda(), format)) ==
              host_bytes(filled_normal(shape, dtype, seed, offset, 1.f, 0.02f, Device::cpu(), format)));
      }
    }
  }
}
