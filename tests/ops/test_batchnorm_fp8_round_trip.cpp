// ops::batchnorm_activation_backward with round_dx (ops::Fp8RoundTrip): dx rounded to FP8 and back
// as it is written is bitwise the backward followed by ops::fp8_round_trip of dx, on each backend,
// with the same amax folded in and the same parameter gradients; the codes it writes where asked
// are ops::fp8_quantize of the unrounded dx, and stand for the rounded dx; asked for the codes
// alone, it writes the same codes and, on the GPU, no dx.
#include <vector>

#include "ganengine/ops.h"
#include "support/test_util.h"

using namespace ge;
using namespace ge::test;

namespace {

struct Backward {
  Tensor dx, dgamma, dbeta, amax;
};

// The backward of BatchNorm + LeakyReLU over x, dy of `shape` (stats from a training forward), with
// dx rounded by the op (fused) or by fp8_round_trip after it.
void check_rounded_backward(Device device, const Shape& shape, DType dt, Fp8Format f, bool record_amax) {
  const MemoryFormat format = device.is_cuda() ? MemoryFormat::NHWC : MemoryFormat::NCHW;
  const int64_t C = shape[1];
  const Tensor x = random_tensor(shape, dt, device, format), dy = random_tensor(shape, dt, device, format, -1e-3, 1e-3);
  const Tensor gamma = random_tensor({C}, DType::F32, device, MemoryFormat::NCHW, 0.5, 1.5);
  const Tensor beta = random_tensor({C}, DType::F32, device);
  Tensor rm = Tensor::zeros({C}, DType::F32, device), rv = Tensor::zeros({C}, DType::F32, device);
  Tensor mean = Tensor::empty({C}, DType::F32, device), invstd = Tensor::empty({C}, DType::F32, device);
  Tensor y = Tensor::empty(shape, dt, device, format);
  const ops::FusedActivation act{ops::Activation::LeakyReLU, 0.2f};
  ops::batchnorm_activation_forward_train(x, gamma, beta, rm, rv, 0.1f, 1e-5f, act, y, mean, invstd);
  // A scale that puts the gradients' magnitudes (about 1e-3 to 1e-1 after BatchNorm's backward)
  // across the format's normal and subnormal range.
  const float scale = f == Fp8Format::E5M2 ? 4096.0f : 300.0f;
  const Tensor s = f32_scalar(scale, device), s_inv = f32_scalar(1.0f / scale, device);
  Backward fused, separate;
  for (Backward* b : {&fused, &separate}) {
    b->dx = Tensor::empty(shape, dt, device, format);
    b->dgamma = Tensor::empty({C}, DType::F32, device);
    b->dbeta = Tensor::empty({C}, DType::F32, device);
    b->amax = f32_scalar(1e-6f, device);  // folded into, not overwritten
  }
  Tensor codes = Tensor::empty(shape, DType::U8, device, format);
  const ops::Fp8RoundTrip round{s, s_inv, f, record_amax ? fused.amax : Tensor(), codes};
  ops::batchnorm_activation_backward(x, y, dy, gamma, beta, mean, invstd, act, fused.dx, fused.dgamma, fused.dbeta,
                                     nullptr, &round);
  ops::batchnorm_activation_backward(x, y, dy, gamma, beta, mean, invstd, act, separate.dx, separate.dgamma,
                                     separate.dbeta);
  ops::fp8_round_trip(separate.dx, s, s_inv, f, separate.dx, record_amax ? &separate.amax : nullptr);
  CHECK(same_bytes(fused.dx, separate.dx));
  CHECK(same_bytes(fused.dgamma, separate.dgamma));
  CHECK(same_bytes(fused.dbeta, separate.dbeta));
  CHECK(same_bytes(fused.amax, separate.amax));
  // The rounding did something: dx differs from the unrounded backward's.
  Tensor plain = Tensor::empty(shape, dt, device, format);
  ops::batchnorm_activation_backward(x, y, dy, gamma, beta, mean, invstd, act, plain, separate.dgamma, separate.dbeta);
  CHECK_FALSE(same_bytes(plain, fused.dx));
  Tensor quantized = Tensor::empty(shape, DType::U8, device, format), unused_amax = f32_scalar(0.0f, device);
  ops::fp8_quantize(plain, s, f, quantized, unused_amax);
  CHECK(same_bytes(codes, quantized));
  Tensor values = Tensor::empty(shape, dt, device, format);
  ops::fp8_dequantize(codes, s_inv, f, values);
  CHECK(same_bytes(values, fused.dx));
  // Asked for the codes alone: the same codes, amax and parameter gradients. The GPU's kernels
  // leave dx unwritten (every shape here takes packs of 8); the CPU writes it as before.
  Backward alone{Tensor::zeros(shape, dt, device, format), Tensor::empty({C}, DType::F32, device),
                 Tensor::empty({C}, DType::F32, device), f32_scalar(1e-6f, device)};
  ops::Fp8RoundTrip codes_alone{s,
                                s_inv,
                                f,
                                record_amax ? alone.amax : Tensor(),
                                Tensor::empty(shape, DType::U8, device, format),
                                /*codes_only=*/true};
  ops::batchnorm_activation_backward(x, y, dy, gamma, beta, mean, invstd, act, alone.dx, alone.dgamma, alone.dbeta,
                                     nullptr, &codes_alone);
  CHECK(same_bytes(codes_alone.codes, codes));
  CHECK(same_bytes(alone.amax, fused.amax));
  CHECK(same_bytes(alone.dgamma, fused.dgamma));
  CHECK(same_bytes(alone.dbeta, fused.dbeta));
  CHECK(same_bytes(alone.dx, device.is_cuda() ? Tensor::zeros(shape, dt, device, format) : fused.dx));
}

void check_all(Device device, const std::vector<Shape>& shapes) {
  for (const Shape& shape : shapes)
    for (DType dt : {DType::F16, DType::BF16})
      for (Fp8Format f : {Fp8Format::E5M2, Fp8Format::E4M3})
        for (bool record_amax : {true, false}) {
          CAPTURE(shape_str(shape));
          CAPTURE(dtype_name(dt));
          CAPTURE(static_cast<int>(f));
          CAPTURE(record_amax);
          check_rounded_backward(device, shape, dt, f, record_amax);
        }
}

}  // namespace

TEST_CASE("cpu ops: batchnorm_activation_backward with round_dx is the backward then fp8_round_trip") {
  check_all(Device::cpu(), {{4, 16, 8, 8}});
}

TEST_CASE("gpu ops: batchnorm_activation_backward with round_dx is the backward then fp8_round_trip bitwise") {
  GE_REQUIRE_GPU();
  // The first shape takes BatchNorm's one-launch kernel on Hopper, the second its three launches.
  check_all(Device::cuda(0), {{64, 128, 16, 16}, {256, 64, 32, 32}});
}

TEST_CASE("ops: batchnorm_activation_backward rejects a round_dx that cannot round dx") {
  const Shape shape{2, 8, 4, 4};
  const Tensor x = random_tensor(shape, DType::F32), dy = random_tensor(shape, DType::F32);
  const Tensor gamma = random_tensor({8}, DType::F32), beta = random_tensor({8}, DType::F32);
  Tensor rm = Tensor::zeros({8}, DType::F32), rv = Tensor::zeros({8}, DType::F32);
  Tensor mean = Tensor::empty({8}, DType::F32), invstd = Tensor::empty({8}, DType::F32),
         y = Tensor::empty(shape, DType::F32);
  const ops::FusedActivation act{ops::Activation::ReLU, 0.f};
  ops::batchnorm_activation_forward_train(x, gamma, beta, rm, rv, 0.1f, 1e-5f, act, y, mean, invstd);
  Tensor dx = Tensor::empty(shape, DType::F32), dgamma = Tensor::empty({8}, DType::F32),
         dbeta = Tensor::empty({8}, DType::F32);
  const ops::Fp8RoundTrip f64_scale{
      Tensor::zeros({1}, DType::F64), Tensor::zeros({1}, DType::F32), Fp8Format::E5M2, {}, {}};
  CHECK_THROWS_WITH_AS(ops::batchnorm_activation_backward(x, y, dy, gamma, beta, mean, invstd, act, dx, dgamma, dbeta,
                                                          nullptr, &f64_scale),
                       doctest::Contains("round trip scale must be f32 (1)"), Error);
  const ops::Fp8RoundTrip two_amaxes{Tensor::zeros({1}, DType::F32), Tensor::zeros({1}, DType::F32), Fp8Format::E5M2,
                                     Tensor::zeros({2}, DType::F32), Tensor()};
  CHECK_THROWS_WITH_AS(ops::batchnorm_activation_backward(x, y, dy, gamma, beta, mean, invstd, act, dx, dgamma, dbeta,
                                                          nullptr, &two_amaxes),
                       doctest::Contains("round trip amax must be f32 (1)"), Error);
  const ops::Fp8RoundTrip f32_codes{Tensor::zeros({1}, DType::F32), Tensor::zeros({1}, DType::F32), Fp8Format::E5M2,
                                    Tensor(), Tensor::zeros(shape, DType::F32)};
  CHECK_THROWS_WITH_AS(ops::batchnorm_activation_backward(x, y, dy, gamma, beta, mean, invstd, act, dx, dgamma, dbeta,
                                                          nullptr, &f32_codes),
                       doctest::Contains("must be u8 of the shape and memory format"), Error);
  const ops::Fp8RoundTrip nothing_written{
      Tensor::zeros({1}, DType::F32), Tensor::zeros({1}, DType::F32), Fp8Format::E5M2, Tensor(), Tensor(), true};
  CHECK_THROWS_WITH_AS(ops::batchnorm_activation_backward(x, y, dy, gamma, beta, mean, invstd, act, dx, dgamma, dbeta,
                                                          nullptr, &nothing_written),
                       doctest::Contains("with codes_only needs the codes tensor to write"), Error);
}
