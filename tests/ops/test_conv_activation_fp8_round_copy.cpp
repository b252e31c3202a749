// ops::conv2d_activation_forward with round_copy: y as without it, and `rounded` bitwise
// ops::fp8_round_trip of y with the same amax folded in, or (codes instead) the codes bitwise
// ops::fp8_quantize of y, on each backend; on the GPU through the 8-channel kernel that writes
// them (D's first layer with LeakyReLU) and through the fallback. With codes_only, the codes
// marked for the backward passes that take them as y (the GPU's 8-channel kernels).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "ganengine/ops.h"
#include "support/test_util.h"

using namespace ge;
using namespace ge::test;

namespace {

void check_round_copy(Device device, int64_t n, int64_t c, int side, DType dt, const ops::FusedActivation& act,
                      bool record_amax) {
  const MemoryFormat format = device.is_cuda() ? MemoryFormat::NHWC : MemoryFormat::NCHW;
  const Conv2dParams p{/*stride=*/2, /*pad=*/1};
  const Tensor x = random_tensor({n, c, side, side}, dt, device, format, -1.0, 1.0);
  const Tensor w = random_tensor({64, c, 4, 4}, dt, device, format, -0.3, 0.3);
  const Shape y_shape{n, 64, side / 2, side / 2};
  // About 448 / 4: the outputs (within a few units) across E4M3's normal and subnormal range.
  const Tensor s = f32_scalar(112.f, device), s_inv = f32_scalar(1.f / 112.f, device);
  Tensor y = Tensor::empty(y_shape, dt, device, format), rounded = Tensor::empty(y_shape, dt, device, format);
  Tensor plain = Tensor::empty(y_shape, dt, device, format), separate = Tensor::empty(y_shape, dt, device, format);
  Tensor amax = f32_scalar(1e-6f, device), separate_amax = f32_scalar(1e-6f, device);  // folded into
  const ops::Fp8RoundTrip round{s, s_inv, Fp8Format::E4M3, record_amax ? amax : Tensor(), Tensor()};
  ops::conv2d_activation_forward(x, w, y, p, act, &round, &rounded);
  ops::conv2d_activation_forward(x, w, plain, p, act);
  ops::fp8_round_trip(plain, s, s_inv, Fp8Format::E4M3, separate, record_amax ? &separate_amax : nullptr);
  CHECK(same_bytes(y, plain));
  CHECK(same_bytes(rounded, separate));
  CHECK(same_bytes(amax, separate_amax));
  CHECK_FALSE(same_bytes(rounded, y));  // the rounding did something
  // Codes instead of the rounded copy: fp8_quantize's, the amax folded in the same way.
  Tensor codes = poisoned_like(Tensor::empty(y_shape, DType::U8, Device::cpu(), format), device);
  Tensor codes_amax = f32_scalar(1e-6f, device), own_amax = f32_scalar(0.f, device);
  const ops::Fp8RoundTrip to_codes{s, s_inv, Fp8Format::E4M3, record_amax ? codes_amax : Tensor(), codes};
  Tensor y_again = Tensor::empty(y_shape, dt, device, format);
  ops::conv2d_activation_forward(x, w, y_again, p, act, &to_codes, nullptr);
  Tensor want_codes = Tensor::empty(y_shape, DType::U8, device, format);
  ops::fp8_quantize(plain, s, Fp8Format::E4M3, want_codes, own_amax);
  CHECK(same_bytes(y_again, plain));
  CHECK(same_bytes(codes, want_codes));
  CHECK(same_bytes(codes_amax, separate_amax));
}

// codes_only: the codes with each one's sign bit set where y is not > 0 (the first image all
// zeros, so that its outputs are exact +0s), the amax as before, and both backward passes taking
// them as y bitwise as they take y. On the GPU where conv2d_activation_runs_from_codes says so,
// else refused.
void check_codes_only(Device device, int64_t n, int64_t c, int side, DType dt, const ops::FusedActivation& act) {
  const MemoryFormat format = device.is_cuda() ? MemoryFormat::NHWC : MemoryFormat::NCHW;
  const Conv2dParams p{/*stride=*/2, /*pad=*/1};
  std::vector<double> xs = random_values(n * c * side * side);
  std::fill(xs.begin(), xs.begin() + c * side * side, 0.0);
  const Tensor x = Tensor::from_doubles(xs, {n, c, side, side}, dt, device, format);
  const Tensor w = random_tensor({64, c, 4, 4}, dt, device, format, -0.3, 0.3);
  const Shape y_shape{n, 64, side / 2, side / 2};
  const Tensor s = f32_scalar(112.f, device), s_inv = f32_scalar(1.f / 112.f, device);
  Tensor codes = poisoned_like(Tensor::empty(y_shape, DType::U8, Device::cpu(), format), device);
  Tensor amax = f32_scalar(1e-6f, device);
  ops::Fp8RoundTrip alone{s, s_inv, Fp8Format::E4M3, amax, codes};
  alone.codes_only = true;
  Tensor y = Tensor::empty(y_shape, dt, device, format);
  if (!device.is_cpu() && !ops::conv2d_activation_runs_from_codes(x.shape(), w.shape(), y_shape, p, act, device)) {
    CHECK_THROWS_WITH_AS(ops::conv2d_activation_forward(x, w, y, p, act, &alone, nullptr),
                         doctest::Contains("codes_only on the GPU takes only the shapes"), Error);
    return;
  }
  ops::conv2d_activation_forward(x, w, y, p, act, &alone, nullptr);
  Tensor plain = Tensor::empty(y_shape, dt, device, format), want = Tensor::empty(y_shape, DType::U8, device, format);
  Tensor want_amax = f32_scalar(1e-6f, device), own_amax = f32_scalar(0.f, device), scratch = f32_scalar(0.f, device);
  ops::conv2d_activation_forward(x, w, plain, p, act);
  ops::fp8_quantize(plain, s, Fp8Format::E4M3, want, own_amax);
  ops::fp8_round_trip(own_amax, s, s_inv, Fp8Format::E4M3, scratch, &want_amax);
  // The marks, on the CPU copies (the same storage order: same shape and layout).
  Tensor marked = want.to(Device::cpu());
  const Tensor plain_cpu = plain.to(Device::cpu());
  int64_t zeros = 0;
  for (int64_t i = 0; i < plain_cpu.numel(); ++i) {
    const double v = load_as_double(plain_cpu.data(), dt, i);
    if (!(v > 0.0)) marked.data_as<uint8_t>()[i] |= 0x80u;
    zeros += v == 0.0 && !std::signbit(v);
  }
  CHECK(zeros >= 64 * (side / 2) * (side / 2));  // the zero image's outputs at least
  CHECK(same_bytes(codes, marked));
  CHECK(same_bytes(amax, want_amax));
  const Tensor dy = random_tensor(y_shape, dt, device, format);
  Tensor dw_codes = Tensor::empty(w.shape(), dt, device, format), dw_y = Tensor::empty(w.shape(), dt, device, format);
  ops::conv2d_activation_backward_filter(x, codes, dy, dw_codes, p, act);
  ops::conv2d_activation_backward_filter(x, plain, dy, dw_y, p, act);
  CHECK(same_bytes(dw_codes, dw_y));
  Tensor dx_codes = Tensor::empty(x.shape(), dt, device, format), dx_y = Tensor::empty(x.shape(), dt, device, format);
  ops::conv2d_activation_backward_data(codes, dy, w, dx_codes, p, act);
  ops::conv2d_activation_backward_data(plain, dy, w, dx_y, p, act);
  CHECK(same_bytes(dx_codes, dx_y));
}

void check_all(Device device, int64_t n, int side) {
  for (DType dt : {DType::F16, DType::BF16})
    for (int64_t c : {3, 8})
      for (ops::Activation kind : {ops::Activation::LeakyReLU, ops::Activation::ReLU})
        for (bool record_amax : {true, false}) {
          CAPTURE(dtype_name(dt));
          CAPTURE(c);
          CAPTURE(static_cast<int>(kind));
          CAPTURE(record_amax);
          check_round_copy(device, n, c, side, dt, {kind, 0.2f}, record_amax);
          if (record_amax) check_codes_only(device, n, c, side, dt, {kind, 0.2f});
        }
}

}  // namespace

TEST_CASE("cpu ops: conv2d_activation_forward with round_copy is the forward then fp8_round_trip into a copy") {
  check_all(Device::cpu(), 2, 16);
}

// 64x64 images of 3 or 8 channels with LeakyReLU take the 8-channel kernel's rounded copy; ReLU
// the fallback.
TEST_CASE("gpu ops: conv2d_activation_forward with round_copy is the forward then fp8_round_trip bitwise") {
  GE_REQUIRE_GPU();
  check_all(Device::cuda(0), 24, 64);
}

TEST_CASE("ops: conv2d_activation_forward rejects a round_copy without its tensor or codes or with both or into y") {
  const Conv2dParams p{/*stride=*/2, /*pad=*/1};
  const Tensor x = random_tensor({1, 3, 8, 8}, DType::F32), w = random_tensor({64, 3, 4, 4}, DType::F32);
  Tensor y = Tensor::empty({1, 64, 4, 4}, DType::F32);
  const ops::Fp8RoundTrip round{f32_scalar(1.f), f32_scalar(1.f), Fp8Format::E4M3, Tensor(), Tensor()};
  const ops::FusedActivation act{ops::Activation::LeakyReLU, 0.2f};
  CHECK_THROWS_WITH_AS(ops::conv2d_activation_forward(x, w, y, p, act, &round, nullptr),
                       doctest::Contains("round_copy writes either `rounded` or its codes"), Error);
  Tensor other = Tensor::empty({1, 64, 4, 4}, DType::F32);
  CHECK_THROWS_WITH_AS(ops::conv2d_activation_forward(x, w, y, p, act, nullptr, &other),
                       doctest::Contains("rounded comes with round_copy"), Error);
  const ops::Fp8RoundTrip with_codes{f32_scalar(1.f), f32_scalar(1.f), Fp8Format::E4M3, Tensor(),
                                     Tensor::empty({1, 64, 4, 4}, DType::U8)};
  CHECK_THROWS_WITH_AS(ops::conv2d_activation_forward(x, w, y, p, act, &with_codes, &other),
                       doctest::Contains("round_copy writes either `rounded` or its codes"), Error);
  CHECK_THROWS_WITH_AS(ops::conv2d_activation_forward(x, w, y, p, act, &round, &y),
                       doctest::Contains("rounded must be another tensor"), Error);
  Tensor small = Tensor::empty({1, 64, 2, 2}, DType::F32);
  CHECK_THROWS_WITH_AS(ops::conv2d_activation_forward(x, w, y, p, act, &round, &small),
                       doctest::Contains("rounded must be another tensor"), Error);
}
