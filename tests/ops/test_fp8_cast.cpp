// ops::fp8_quantize and ops::fp8_dequantize: the CPU reference element by element against
// core/fp8_bits.h (itself held bitwise to PyTorch's float8 casts, test_fp8_bits.cpp) with the scale
// product rounded to f32 here, amax exactly max |x| (NaN when any element is NaN), the argument
// checks; the GPU against the CPU bitwise (codes, amax and dequantized values, NaNs of the half
// types excepted as ops.h says), eagerly and replayed from a CUDA graph. ops::fp8_round_trip
// (O4's operands): on the CPU bitwise the two in sequence, non-finite values kept, the amax folded
// into the one given; on the GPU bitwise the CPU's.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/fp8_bits.h"
#include "ganengine/cuda_graph.h"
#include "ganengine/fp8.h"
#include "ganengine/ops.h"
#include "support/test_util.h"

using namespace ge;
using namespace ge::test;

namespace {

const Device kCpu = Device::cpu();
constexpr Fp8Format kFormats[] = {Fp8Format::E4M3, Fp8Format::E5M2};
constexpr DType kValueTypes[] = {DType::F32, DType::F16, DType::BF16};

const char* name_of(Fp8Format f) { return f == Fp8Format::E4M3 ? "e4m3" : "e5m2"; }

uint32_t bits_of(float v) {
  uint32_t b = 0;
  std::memcpy(&b, &v, 4);
  return b;
}

// Values over many binades of both signs (|x| from 2^-24 to 2^16), with the edges a cast meets
// placed first: zeros of both signs, infinities, values beyond every format's range.
std::vector<double> spread_values(int64_t n) {
  std::vector<double> v = random_values(n, -24.0, 16.0);
  const std::vector<double> signs = random_values(n);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::copysign(std::exp2(v[i]), signs[i]);
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> edges = {0.0, -0.0, inf, -inf, 1e6, -70000.0, 448.0, 465.0, 57344.0, 0x1p-9, 0x1p-17};
  for (size_t i = 0; i < edges.size() && i < v.size(); ++i) v[i] = edges[i];
  return v;
}

Tensor spread_tensor(const Shape& shape, DType dtype, MemoryFormat format, Device device = kCpu) {
  return Tensor::from_doubles(spread_values(shape_numel(shape)), shape, dtype, device,
                              shape.size() == 4 ? format : MemoryFormat::NCHW);
}

// The code of one value as ops.h defines it: the product rounded to f32, then the exact cast; a
// NaN the positive NaN code.
uint8_t expected_code(double x, float scale, Fp8Format f) {
  volatile float product = static_cast<float>(x) * scale;  // volatile: rounded to f32 on its own
  return std::isnan(product) ? uint8_t{0x7F} : float_to_fp8_bits(product, f);
}

// max |x| over logical values, NaN if any is NaN.
float expected_amax(const std::vector<double>& x) {
  double m = 0.0;
  for (double v : x) {
    if (std::isnan(v)) return std::numeric_limits<float>::quiet_NaN();
    m = std::max(m, std::fabs(v));
  }
  return static_cast<float>(m);
}

// spread_tensor's values with a NaN among them (at least two elements, so that a finite one stays).
Tensor spread_tensor_with_nan(const Shape& shape, DType dtype, MemoryFormat format) {
  std::vector<double> v = spread_values(shape_numel(shape));
  v[v.size() / 2] = std::numeric_limits<double>::quiet_NaN();
  return Tensor::from_doubles(v, shape, dtype, kCpu, shape.size() == 4 ? format : MemoryFormat::NCHW);
}

// fp8_round_trip of x on `device` (the input copied there), with amax starting at amax_in: the
// values and the amax, back on the CPU.
std::pair<Tensor, Tensor> round_trip(const Tensor& x, float scale, Fp8Format f, float amax_in, Device device) {
  Tensor y = Tensor::empty(x.shape(), x.dtype(), device, x.format()), amax = f32_scalar(amax_in, device);
  ops::fp8_round_trip(x.to(device), f32_scalar(scale, device), f32_scalar(1.0f / scale, device), f, y, &amax);
  return {y.to(kCpu), amax.to(kCpu)};
}

struct Shaped {
  Shape shape;
  MemoryFormat format;
};

// The shapes DCGAN quantizes (an activation batch, a filter) and odd sizes off every vector width.
const std::vector<Shaped> kShapes = {{{8, 64, 16, 16}, MemoryFormat::NCHW}, {{8, 64, 16, 16}, MemoryFormat::NHWC},
                                     {{128, 64, 4, 4}, MemoryFormat::NHWC}, {{3, 5, 7, 9}, MemoryFormat::NHWC},
                                     {{4099}, MemoryFormat::NCHW},          {{1}, MemoryFormat::NCHW}};

const std::vector<float> kScales = {1.0f, 0.3712f, 1024.0f, 3.1e4f, 0x1p-20f};

// body(shape, dtype, format, scale) for every combination the quantizing tests cover, each
// captured for the checks body makes.
template <class Body>
void for_each_quantize_case(Body&& body) {
  for (const Shaped& sh : kShapes)
    for (DType dt : kValueTypes)
      for (Fp8Format f : kFormats)
        for (float scale : kScales) {
          CAPTURE(shape_str(sh.shape));
          CAPTURE(dtype_name(dt));
          CAPTURE(name_of(f));
          CAPTURE(scale);
          body(sh, dt, f, scale);
        }
}

}  // namespace

namespace cpu_checks {

TEST_CASE("cpu ops: fp8_quantize encodes x times scale as fp8_bits does and writes max abs x as amax") {
  for_each_quantize_case([](const Shaped& sh, DType dt, Fp8Format f, float scale) {
    const Tensor x = spread_tensor(sh.shape, dt, sh.format);
    Tensor q = poisoned_like(Tensor::empty(x.shape(), DType::U8, kCpu, x.format()), kCpu);
    Tensor amax = f32_scalar(-1.0f);
    ops::fp8_quantize(x, f32_scalar(scale), f, q, amax);
    const std::vector<double> xs = x.to_doubles(), codes = q.to_doubles();
    int64_t wrong = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      const uint8_t want = expected_code(xs[i], scale, f);
      if (static_cast<uint8_t>(codes[i]) != want && ++wrong <= 3)
        FAIL_CHECK("element ", i, " = ", xs[i], " encodes to ", codes[i], ", expected ", int(want));
    }
    CHECK(wrong == 0);
    CHECK(bits_of(static_cast<float>(amax.item())) == bits_of(expected_amax(xs)));
  });
}

TEST_CASE("cpu ops: fp8_quantize propagates NaN into amax and encodes it as the format's NaN") {
  for (DType dt : kValueTypes)
    for (Fp8Format f : kFormats) {
      CAPTURE(dtype_name(dt));
      CAPTURE(name_of(f));
      const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
      const Tensor x = Tensor::from_doubles({1.0, nan, inf, -3.0}, {4}, dt);
      Tensor q = Tensor::zeros({4}, DType::U8);
      Tensor amax = f32_scalar(0.0f);
      ops::fp8_quantize(x, f32_scalar(2.0f), f, q, amax);
      CHECK(bits_of(static_cast<float>(amax.item())) == 0x7fc00000u);  // the one NaN the GPU writes too
      CHECK(int(q.data_as<uint8_t>()[1]) == 0x7F);
      CHECK(q.data_as<uint8_t>()[2] == float_to_fp8_bits(fp8_max(f), f));  // an infinity saturates
      // Infinities without NaN: amax is infinite, not saturated.
      const Tensor y = Tensor::from_doubles({1.0, -inf}, {2}, dt);
      Tensor qy = Tensor::zeros({2}, DType::U8);
      ops::fp8_quantize(y, f32_scalar(1.0f), f, qy, amax);
      CHECK(std::isinf(amax.item()));
      CHECK(amax.item() > 0);
    }
}

TEST_CASE("cpu ops: fp8_quantize writes amax into a view of a scaling state's history") {
  Fp8DelayedScaling recipe;
  recipe.amax_history_len = 4;
  Fp8Scaling s = make_fp8_scaling(Fp8Format::E4M3, recipe, kCpu);
  s.amax_history.data_as<float>()[1] = 7.0f;
  const Tensor x = Tensor::from_doubles({0.5, -2.5, 1.0}, {3}, DType::F32);
  Tensor q = Tensor::zeros({3}, DType::U8);
  Tensor amax = s.current_amax();
  ops::fp8_quantize(x, s.scale, s.format, q, amax);
  CHECK(s.amax_history.to_doubles() == std::vector<double>{2.5, 7.0, 0.0, 0.0});
  const Fp8Tensor quantized = ops::fp8_quantized(x, s);
  CHECK(same_bytes(quantized.data, q));
  CHECK(quantized.scale_inv.same_storage(s.scale_inv));
}

TEST_CASE("cpu ops: fp8_dequantize is every code's value times scale_inv rounded once to the output dtype") {
  for (Fp8Format f : kFormats)
    for (DType dt : kValueTypes)
      for (float scale_inv : {1.0f, 1.0f / 3.7f, 0x1p-12f, 1e5f}) {
        CAPTURE(name_of(f));
        CAPTURE(dtype_name(dt));
        CAPTURE(scale_inv);
        std::vector<double> all(256);
        for (int c = 0; c < 256; ++c) all[static_cast<size_t>(c)] = c;
        const Tensor q = Tensor::from_doubles(all, {256}, DType::U8);
        Tensor y = poisoned_like(Tensor::empty({256}, dt), kCpu);
        ops::fp8_dequantize(q, f32_scalar(scale_inv), f, y);
        std::vector<double> want(256);
        for (int c = 0; c < 256; ++c) {
          volatile float v = fp8_bits_to_float(static_cast<uint8_t>(c), f) * scale_inv;
          want[static_cast<size_t>(c)] = v;
        }
        // Rounded once, by the library's casts; NaN codes give NaN (f32: 0x7fc00000).
        const Tensor expected = Tensor::from_doubles(want, {256}, dt);
        CHECK(same_values_or_both_nan(y, expected));
        if (dt == DType::F32) {
          const float* got = y.data_as<float>();
          for (int c = 0; c < 256; ++c)
            if (std::isnan(got[c])) CHECK(bits_of(got[c]) == 0x7fc00000u);
        }
      }
}

TEST_CASE("cpu ops: fp8 quantize then dequantize is within half a unit in the last place of the format") {
  // A relative error of 2^-(mantissa bits + 1) in the normal range, an absolute one of half the
  // smallest subnormal (over the scale) below it; the two f32 products add 2^-23 relative at most.
  for (Fp8Format f : kFormats) {
    CAPTURE(name_of(f));
    const Tensor x = random_tensor({4, 8, 9, 9}, DType::F32, kCpu, MemoryFormat::NHWC, -5.0, 5.0);
    const float scale = fp8_max(f) / 5.0f;
    Tensor q = Tensor::empty(x.shape(), DType::U8, kCpu, x.format());
    Tensor amax = f32_scalar(0.0f);
    ops::fp8_quantize(x, f32_scalar(scale), f, q, amax);
    Tensor y = Tensor::empty(x.shape(), DType::F32, kCpu, x.format());
    ops::fp8_dequantize(q, f32_scalar(1.0f / scale), f, y);
    const double relative = f == Fp8Format::E4M3 ? 0x1p-4 : 0x1p-3;
    const double absolute = (f == Fp8Format::E4M3 ? 0x1p-10 : 0x1p-17) / scale;
    const std::vector<double> xs = x.to_doubles(), ys = y.to_doubles();
    for (size_t i = 0; i < xs.size(); ++i) {
      const double bound = std::max(relative * std::fabs(xs[i]), absolute) + 0x1p-23 * std::fabs(xs[i]);
      if (std::fabs(ys[i] - xs[i]) > bound) {
        FAIL_CHECK("element ", i, ": ", xs[i], " comes back as ", ys[i]);
        break;
      }
    }
  }
}

TEST_CASE("cpu ops: fp8_quantize and fp8_dequantize reject mismatched codes and scales") {
  const Tensor x = Tensor::zeros({2, 3, 4, 4}, DType::F32, kCpu, MemoryFormat::NHWC);
  Tensor amax = f32_scalar(0.0f);
  Tensor wrong_layout = Tensor::zeros({2, 3, 4, 4}, DType::U8, kCpu, MemoryFormat::NCHW);
  CHECK_THROWS_WITH_AS(ops::fp8_quantize(x, f32_scalar(1.0f), Fp8Format::E4M3, wrong_layout, amax),
                       doctest::Contains("must be u8 of the shape and memory format"), Error);
  Tensor not_bytes = Tensor::zeros({2, 3, 4, 4}, DType::F16, kCpu, MemoryFormat::NHWC);
  CHECK_THROWS_WITH_AS(ops::fp8_quantize(x, f32_scalar(1.0f), Fp8Format::E4M3, not_bytes, amax),
                       doctest::Contains("fp8_quantize: codes"), Error);
  Tensor q = Tensor::zeros({2, 3, 4, 4}, DType::U8, kCpu, MemoryFormat::NHWC);
  const Tensor two_scales = Tensor::zeros({2}, DType::F32);
  CHECK_THROWS_WITH_AS(ops::fp8_quantize(x, two_scales, Fp8Format::E4M3, q, amax),
                       doctest::Contains("scale must be f32 (1)"), Error);
  Tensor half_amax = Tensor::zeros({1}, DType::F16);
  CHECK_THROWS_WITH_AS(ops::fp8_quantize(x, f32_scalar(1.0f), Fp8Format::E4M3, q, half_amax),
                       doctest::Contains("amax must be f32 (1)"), Error);
  const Tensor f64_x = Tensor::zeros({4}, DType::F64);
  Tensor q4 = Tensor::zeros({4}, DType::U8);
  CHECK_THROWS_WITH_AS(ops::fp8_quantize(f64_x, f32_scalar(1.0f), Fp8Format::E4M3, q4, amax),
                       doctest::Contains("values must be f32, f16 or bf16"), Error);
  Tensor y = Tensor::zeros({5}, DType::F32);
  CHECK_THROWS_WITH_AS(ops::fp8_dequantize(q4, f32_scalar(1.0f), Fp8Format::E5M2, y),
                       doctest::Contains("fp8_dequantize: codes"), Error);
}

TEST_CASE(
    "cpu ops: fp8_round_trip is quantize then dequantize with non-finite values kept and the amax folded in and "
    "writes the quantized codes where asked") {
  for (DType dt : kValueTypes)
    for (Fp8Format f : kFormats)
      for (float scale : kScales) {
        CAPTURE(dtype_name(dt));
        CAPTURE(name_of(f));
        CAPTURE(scale);
        const Tensor x = spread_tensor_with_nan({4, 24, 9, 7}, dt, MemoryFormat::NHWC);
        Tensor q = Tensor::empty(x.shape(), DType::U8, kCpu, x.format()), amax_alone = f32_scalar(0.0f);
        ops::fp8_quantize(x, f32_scalar(scale), f, q, amax_alone);
        Tensor expected = Tensor::empty(x.shape(), dt, kCpu, x.format());
        ops::fp8_dequantize(q, f32_scalar(1.0f / scale), f, expected);
        const auto [y, amax] = round_trip(x, scale, f, 0.5f, kCpu);  // 0.5: below max |x|, replaced
        const std::vector<double> xs = x.to_doubles(), ys = y.to_doubles(), es = expected.to_doubles();
        int64_t non_finite = 0;
        for (size_t i = 0; i < xs.size(); ++i) {
          if (std::isfinite(xs[i])) {
            CHECK(bits_of(static_cast<float>(ys[i])) == bits_of(static_cast<float>(es[i])));
          } else {
            ++non_finite;  // kept, not saturated
            CHECK((std::isnan(xs[i]) ? std::isnan(ys[i]) : ys[i] == xs[i]));
          }
        }
        CHECK(non_finite >= 3);          // the infinities and the NaN (and values beyond f16 in f16)
        CHECK(std::isnan(amax.item()));  // the NaN propagates, as fp8_quantize's does
        CHECK(same_bytes(amax, amax_alone));
        // With codes: fp8_quantize's, into another tensor and in place (each value read before it
        // is rounded), the values and the amax as without.
        for (bool in_place : {false, true}) {
          CAPTURE(in_place);
          Tensor codes = Tensor::zeros(x.shape(), DType::U8, kCpu, x.format()), amax_with = f32_scalar(0.5f);
          Tensor y_with = in_place ? x.clone() : Tensor::empty(x.shape(), dt, kCpu, x.format());
          const Tensor source = in_place ? y_with : x;
          ops::fp8_round_trip(source, f32_scalar(scale), f32_scalar(1.0f / scale), f, y_with, &amax_with, &codes);
          CHECK(same_bytes(codes, q));
          CHECK(same_bytes(amax_with, amax));
          CHECK(same_values_or_both_nan(y_with, y));
        }
      }
}

TEST_CASE("cpu ops: fp8_round_trip never lowers the amax it is given and saturates finite values in place") {
  const Tensor x = Tensor::from_floats({0.25f, -3.0f, 1.5f, 0.0f}, {4}, DType::F16);
  CHECK(round_trip(x, 1.0f, Fp8Format::E4M3, 7.0f, kCpu).second.item() == 7.0);
  CHECK(round_trip(x, 1.0f, Fp8Format::E4M3, 1.0f, kCpu).second.item() == 3.0);
  // 0.3 is no E4M3 value: the nearest is 0.3125 (2^-2 x 1.25); 1000 saturates to 448.
  Tensor z = Tensor::from_floats({0.3f, -0.3f, 1000.0f}, {3}, DType::F32);
  ops::fp8_round_trip(z, f32_scalar(1.0f), f32_scalar(1.0f), Fp8Format::E4M3, z);
  CHECK(z.to_doubles() == std::vector<double>{0.3125, -0.3125, 448.0});
}

TEST_CASE("cpu ops: fp8_round_trip rejects mismatched shapes and dtypes and scales") {
  const Tensor x = Tensor::zeros({2, 8, 4, 4}, DType::F16);
  Tensor other_shape = Tensor::zeros({2, 8, 4, 5}, DType::F16), codes = Tensor::zeros({2, 8, 4, 4}, DType::U8);
  Tensor ok = Tensor::zeros({2, 8, 4, 4}, DType::F16);
  CHECK_THROWS_WITH_AS(ops::fp8_round_trip(x, f32_scalar(1.0f), f32_scalar(1.0f), Fp8Format::E4M3, other_shape),
                       doctest::Contains("fp8_round_trip: x"), Error);
  CHECK_THROWS_WITH_AS(ops::fp8_round_trip(x, f32_scalar(1.0f), f32_scalar(1.0f), Fp8Format::E4M3, codes),
                       doctest::Contains("f32, f16 or bf16"), Error);
  CHECK_THROWS_WITH_AS(ops::fp8_round_trip(x, Tensor::zeros({2}, DType::F32), f32_scalar(1.0f), Fp8Format::E4M3, ok),
                       doctest::Contains("scale must be f32 (1)"), Error);
  Tensor half_codes = Tensor::zeros({2, 8, 4, 4}, DType::F16), short_codes = Tensor::zeros({2, 8, 4, 3}, DType::U8);
  Tensor nhwc_codes = Tensor::zeros({2, 8, 4, 4}, DType::U8, kCpu, MemoryFormat::NHWC);
  for (Tensor* bad : {&half_codes, &short_codes, &nhwc_codes})
    CHECK_THROWS_WITH_AS(ops::fp8_round_trip(x, f32_scalar(1.0f), f32_scalar(1.0f), Fp8Format::E4M3, ok, nullptr, bad),
                         doctest::Contains("fp8_round_trip: codes"), Error);
}

}  // namespace cpu_checks

namespace gpu_checks {

TEST_CASE("gpu ops: fp8_quantize matches the CPU bitwise in codes and amax") {
  GE_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  for_each_quantize_case([&](const Shaped& sh, DType dt, Fp8Format f, float scale) {
    const Tensor x = spread_tensor(sh.shape, dt, sh.format);
    const Tensor q_like = Tensor::empty(x.shape(), DType::U8, kCpu, x.format());
    Tensor cpu_q = poisoned_like(q_like, kCpu), gpu_q = poisoned_like(q_like, gpu);
    Tensor cpu_amax = f32_scalar(-1.0f), gpu_amax = f32_scalar(-1.0f, gpu);
    ops::fp8_quantize(x, f32_scalar(scale), f, cpu_q, cpu_amax);
    ops::fp8_quantize(x.to(gpu), f32_scalar(scale, gpu), f, gpu_q, gpu_amax);
    CHECK(same_bytes(gpu_q, cpu_q));
    CHECK(same_bytes(gpu_amax, cpu_amax));
  });
}

TEST_CASE("gpu ops: fp8_quantize writes a NaN amax bitwise as the CPU does") {
  GE_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  for (DType dt : kValueTypes) {
    CAPTURE(dtype_name(dt));
    std::vector<double> values = spread_values(70000);
    values[12345] = std::numeric_limits<double>::quiet_NaN();
    values[69999] = -std::numeric_limits<double>::quiet_NaN();
    const Tensor x = Tensor::from_doubles(values, {70000}, dt);
    Tensor cpu_q = Tensor::zeros({70000}, DType::U8), gpu_q = poisoned_like(cpu_q, gpu);
    Tensor cpu_amax = f32_scalar(0.0f), gpu_amax = f32_scalar(0.0f, gpu);
    ops::fp8_quantize(x, f32_scalar(0.25f), Fp8Format::E5M2, cpu_q, cpu_amax);
    ops::fp8_quantize(x.to(gpu), f32_scalar(0.25f, gpu), Fp8Format::E5M2, gpu_q, gpu_amax);
    CHECK(same_bytes(gpu_q, cpu_q));
    CHECK(same_bytes(gpu_amax, cpu_amax));
  }
}

TEST_CASE("gpu ops: fp8_dequantize matches the CPU bitwise") {
  GE_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  for (const Shaped& sh : kShapes)
    for (DType dt : kValueTypes)
      for (Fp8Format f : kFormats) {
        CAPTURE(shape_str(sh.shape));
        CAPTURE(dtype_name(dt));
        CAPTURE(name_of(f));
        const std::vector<double> bytes = random_values(shape_numel(sh.shape), 0.0, 255.99);
        std::vector<double> codes(bytes.size());
        for (size_t i = 0; i < bytes.size(); ++i) codes[i] = std::floor(bytes[i]);
        const MemoryFormat layout = sh.shape.size() == 4 ? sh.format : MemoryFormat::NCHW;
        const Tensor q = Tensor::from_doubles(codes, sh.shape, DType::U8, kCpu, layout);
        const Tensor y_like = Tensor::empty(sh.shape, dt, kCpu, layout);
        Tensor cpu_y = poisoned_like(y_like, kCpu), gpu_y = poisoned_like(y_like, gpu);
        ops::fp8_dequantize(q, f32_scalar(1.0f / 3.7f), f, cpu_y);
        ops::fp8_dequantize(q.to(gpu), f32_scalar(1.0f / 3.7f, gpu), f, gpu_y);
        if (dt == DType::F32)
          CHECK(same_bytes(gpu_y, cpu_y));
        else
          CHECK(same_values_or_both_nan(gpu_y.to(kCpu), cpu_y));
      }
}

// Every bit pattern of a 16-bit dtype, in order: every finite value, both zeros, subnormals,
// infinities and NaNs.
Tensor every_bit_pattern(DType dtype) {
  Tensor t = Tensor::empty({65536}, dtype);
  auto* bits = t.data_as<uint16_t>();
  for (uint32_t i = 0; i < 65536; ++i) bits[i] = static_cast<uint16_t>(i);
  return t;
}

TEST_CASE(
    "gpu ops: fp8_round_trip and fp8_quantize of every f16 and bf16 bit pattern match the CPU bitwise aligned or not") {
  GE_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  // Beyond kScales: a scale whose products of large halves overflow f32, and one whose scale_inv
  // is infinite (the kernels' per-value checks, which finite packs skip).
  std::vector<float> scales = kScales;
  scales.insert(scales.end(), {1e36f, 1e-39f});
  for (DType dt : {DType::F16, DType::BF16})
    for (Fp8Format f : kFormats)
      for (float scale : scales)
        // From element 0 the 16-bit kernels take 16-byte accesses; from element 1 the view is
        // 2 bytes off that alignment.
        for (int64_t begin : {0, 1}) {
          CAPTURE(dtype_name(dt));
          CAPTURE(name_of(f));
          CAPTURE(scale);
          CAPTURE(begin);
          const Tensor all = every_bit_pattern(dt);
          const Tensor x = all.slice0(begin, all.numel()), x_gpu = all.to(gpu).slice0(begin, all.numel());
          const Tensor s = f32_scalar(scale), s_inv = f32_scalar(1.0f / scale);
          // The round trip alone, then with the codes (8-byte aligned where x is 16-byte aligned).
          Tensor rq_gpu = Tensor::empty({65536}, DType::U8, gpu).slice0(begin, 65536);
          Tensor rq_cpu = Tensor::empty(x.shape(), DType::U8);
          Tensor amax_cpu = f32_scalar(0.0f), amax_gpu = f32_scalar(0.0f, gpu);
          for (bool with_codes : {false, true}) {
            CAPTURE(with_codes);
            Tensor y_gpu = Tensor::empty({65536}, dt, gpu).slice0(begin, 65536), y_cpu = Tensor::empty(x.shape(), dt);
            amax_cpu = f32_scalar(0.0f);
            amax_gpu = f32_scalar(0.0f, gpu);
            ops::fp8_round_trip(x, s, s_inv, f, y_cpu, &amax_cpu, with_codes ? &rq_cpu : nullptr);
            ops::fp8_round_trip(x_gpu, s.to(gpu), s_inv.to(gpu), f, y_gpu, &amax_gpu, with_codes ? &rq_gpu : nullptr);
            CHECK(same_values_or_both_nan(y_gpu.to(kCpu), y_cpu));
            CHECK(same_bytes(amax_gpu.to(kCpu), amax_cpu));
          }
          CHECK(same_bytes(rq_gpu.to(kCpu), rq_cpu));
          // Quantizing, whose codes are 8-byte aligned where x is 16-byte aligned: the round trip's.
          Tensor q_gpu = Tensor::empty({65536}, DType::U8, gpu).slice0(begin, 65536);
          Tensor q_cpu = Tensor::empty(x.shape(), DType::U8);
          ops::fp8_quantize(x, s, f, q_cpu, amax_cpu);
          ops::fp8_quantize(x_gpu, s.to(gpu), f, q_gpu, amax_gpu);
          CHECK(same_bytes(q_gpu.to(kCpu), q_cpu));
          CHECK(same_bytes(amax_gpu.to(kCpu), amax_cpu));
          CHECK(same_bytes(q_cpu, rq_cpu));
        }
}

TEST_CASE("gpu ops: fp8_quantize captured in a CUDA graph and replayed reads the scale each replay") {
  GE_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  const Tensor x = spread_tensor({8, 64, 16, 16}, DType::F16, MemoryFormat::NHWC);
  const Tensor x_gpu = x.to(gpu);
  Tensor scale = f32_scalar(1.0f, gpu), amax = f32_scalar(0.0f, gpu);
  Tensor q = Tensor::empty(x.shape(), DType::U8, gpu, x.format());
  CudaGraph graph;
  graph.capture(gpu, [&] { ops::fp8_quantize(x_gpu, scale, Fp8Format::E4M3, q, amax); });
  for (float s : {1.0f, 0.125f, 3.0f}) {
    CAPTURE(s);
    scale.copy_from(f32_scalar(s));  // a new scale in device memory, the graph unchanged
    graph.replay();
    synchronize(gpu);
    Tensor cpu_q = Tensor::empty(x.shape(), DType::U8, kCpu, x.format()), cpu_amax = f32_scalar(0.0f);
    ops::fp8_quantize(x, f32_scalar(s), Fp8Format::E4M3, cpu_q, cpu_amax);
    CHECK(same_bytes(q, cpu_q));
    CHECK(same_bytes(amax, cpu_amax));
  }
}

TEST_CASE("gpu ops: fp8_round_trip matches the CPU bitwise in values and amax") {
  GE_REQUIRE_GPU();
  for_each_quantize_case([](const Shaped& sh, DType dt, Fp8Format f, float scale) {
    for (bool with_nan : {false, true}) {
      CAPTURE(with_nan);
      const Tensor x = with_nan && shape_numel(sh.shape) > 1 ? spread_tensor_with_nan(sh.shape, dt, sh.format)
                                                             : spread_tensor(sh.shape, dt, sh.format);
      const auto cpu = round_trip(x, scale, f, 2.0f, kCpu), gpu = round_trip(x, scale, f, 2.0f, Device::cuda(0));
      CHECK(same_values_or_both_nan(gpu.first, cpu.first));
      CHECK(same_bytes(gpu.second, cpu.second));
    }
  });
}

}  // namespace gpu_checks
