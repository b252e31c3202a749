// ops::batchnorm_activation_forward_train (and _moments) with round_y (ops::Fp8RoundTrip): y
// rounded to FP8 and back as it is written is bitwise the forward followed by ops::fp8_round_trip
// of y, on each backend, with the same amax folded in and the same statistics; the codes it writes
// where asked are ops::fp8_quantize of the unrounded y, beside y or (codes_only, on the GPU) in
// its place; and where
// ops::batchnorm_activation_backward_recomputes says so, the backward given that rounded y is
// bitwise the backward given the activation's own output (it never reads y).
#include <vector>

#include "ganengine/ops.h"
#include "support/test_util.h"

using namespace ge;
using namespace ge::test;

namespace {

struct Forward {
  Tensor y, mean, invstd, running_mean, running_var, amax;
};

struct Case {
  Device device;
  Shape shape;
  DType dt;
  ops::FusedActivation act;
  bool record_amax;
};

// (3, 1, C) f32 moments of x as one part: count, mean and sum of squared deviations.
Tensor one_part_moments(const Tensor& x) {
  const ChannelStats st = exact_channel_stats(x);
  const int64_t C = x.dim(1);
  std::vector<double> out(3 * C);
  for (int64_t c = 0; c < C; ++c) {
    out[c] = st.count[c];
    out[C + c] = st.mean[c];
    out[2 * C + c] = st.var[c] * st.count[c];
  }
  return Tensor::from_doubles(out, {3, 1, C}, DType::F32).to(x.device());
}

void check_rounded_forward(const Case& k, bool via_moments) {
  const Device device = k.device;
  const MemoryFormat format = device.is_cuda() ? MemoryFormat::NHWC : MemoryFormat::NCHW;
  const int64_t C = k.shape[1];
  const Tensor x = random_tensor(k.shape, k.dt, device, format, -2.0, 2.0);
  const Tensor gamma = random_tensor({C}, DType::F32, device, MemoryFormat::NCHW, 0.5, 1.5);
  const Tensor beta = random_tensor({C}, DType::F32, device, MemoryFormat::NCHW, -0.5, 0.5);
  const Tensor moments = via_moments ? one_part_moments(x) : Tensor();
  // About 448 / 8: the outputs (within a few units) across E4M3's normal and subnormal range.
  const float scale = 56.0f;
  const Tensor s = f32_scalar(scale, device), s_inv = f32_scalar(1.0f / scale, device);
  Forward fused, separate, plain;
  for (Forward* f : {&fused, &separate, &plain}) {
    f->y = Tensor::empty(k.shape, k.dt, device, format);
    f->mean = Tensor::empty({C}, DType::F32, device);
    f->invstd = Tensor::empty({C}, DType::F32, device);
    f->running_mean = Tensor::zeros({C}, DType::F32, device);
    f->running_var = Tensor::zeros({C}, DType::F32, device);
    f->amax = f32_scalar(1e-6f, device);  // folded into, not overwritten
  }
  auto forward = [&](Forward& f, const ops::Fp8RoundTrip* round_y) {
    if (via_moments)
      ops::batchnorm_activation_forward_train_moments(x, moments, gamma, beta, f.running_mean, f.running_var, 0.1f,
                                                      1e-5f, k.act, f.y, f.mean, f.invstd, round_y);
    else
      ops::batchnorm_activation_forward_train(x, gamma, beta, f.running_mean, f.running_var, 0.1f, 1e-5f, k.act, f.y,
                                              f.mean, f.invstd, nullptr, round_y);
  };
  const ops::Fp8RoundTrip round{s, s_inv, Fp8Format::E4M3, k.record_amax ? fused.amax : Tensor(), Tensor()};
  forward(fused, &round);
  forward(separate, nullptr);
  forward(plain, nullptr);
  ops::fp8_round_trip(separate.y, s, s_inv, Fp8Format::E4M3, separate.y, k.record_amax ? &separate.amax : nullptr);
  CHECK(same_bytes(fused.y, separate.y));
  CHECK(same_bytes(fused.amax, separate.amax));
  for (auto member : {&Forward::mean, &Forward::invstd, &Forward::running_mean, &Forward::running_var})
    CHECK(same_bytes(fused.*member, separate.*member));
  CHECK_FALSE(same_bytes(fused.y, plain.y));  // the rounding did something
  // With codes: fp8_quantize of the unrounded y, beside the same rounded y, or in its place (the
  // GPU's kernels leave y unwritten; the CPU writes it as before), the same amax and statistics.
  Tensor want_codes = Tensor::empty(k.shape, DType::U8, device, format), unused_amax = f32_scalar(0.f, device);
  ops::fp8_quantize(plain.y, s, Fp8Format::E4M3, want_codes, unused_amax);
  for (bool codes_only : {false, true}) {
    CAPTURE(codes_only);
    Forward c{Tensor::zeros(k.shape, k.dt, device, format), Tensor::empty({C}, DType::F32, device),
              Tensor::empty({C}, DType::F32, device),       Tensor::zeros({C}, DType::F32, device),
              Tensor::zeros({C}, DType::F32, device),       f32_scalar(1e-6f, device)};
    const ops::Fp8RoundTrip with_codes{s,
                                       s_inv,
                                       Fp8Format::E4M3,
                                       k.record_amax ? c.amax : Tensor(),
                                       Tensor::empty(k.shape, DType::U8, device, format),
                                       codes_only};
    forward(c, &with_codes);
    CHECK(same_bytes(with_codes.codes, want_codes));
    CHECK(same_bytes(c.amax, fused.amax));
    for (auto member : {&Forward::mean, &Forward::invstd, &Forward::running_mean, &Forward::running_var})
      CHECK(same_bytes(c.*member, fused.*member));
    const bool y_left = codes_only && device.is_cuda();
    CHECK(same_bytes(c.y, y_left ? Tensor::zeros(k.shape, k.dt, device, format) : fused.y));
  }

  // Where the backward forms the activation's gradient from x alone, the rounded y changes nothing.
  if (!ops::batchnorm_activation_backward_recomputes(x, k.act)) return;
  const Tensor dy = random_tensor(k.shape, k.dt, device, format, -1.0, 1.0);
  Tensor dx[2], dgamma[2], dbeta[2];
  for (int i = 0; i < 2; ++i) {
    dx[i] = Tensor::empty(k.shape, k.dt, device, format);
    dgamma[i] = Tensor::empty({C}, DType::F32, device);
    dbeta[i] = Tensor::empty({C}, DType::F32, device);
    ops::batchnorm_activation_backward(x, i ? plain.y : fused.y, dy, gamma, beta, plain.mean, plain.invstd, k.act,
                                       dx[i], dgamma[i], dbeta[i]);
  }
  CHECK(same_bytes(dx[0], dx[1]));
  CHECK(same_bytes(dgamma[0], dgamma[1]));
  CHECK(same_bytes(dbeta[0], dbeta[1]));
}

void check_all(Device device, const std::vector<Shape>& shapes, bool via_moments) {
  for (const Shape& shape : shapes)
    for (DType dt : {DType::F16, DType::BF16})
      for (ops::Activation kind : {ops::Activation::ReLU, ops::Activation::LeakyReLU})
        for (bool record_amax : {true, false}) {
          CAPTURE(shape_str(shape));
          CAPTURE(dtype_name(dt));
          CAPTURE(static_cast<int>(kind));
          CAPTURE(record_amax);
          check_rounded_forward({device, shape, dt, {kind, 0.2f}, record_amax}, via_moments);
        }
}

}  // namespace

TEST_CASE("cpu ops: batchnorm_activation_forward_train with round_y is the forward then fp8_round_trip") {
  check_all(Device::cpu(), {{4, 16, 8, 8}}, false);
  // The CPU backward reads y: it never takes a rounded one.
  const Tensor x = Tensor::zeros({2, 8, 4, 4}, DType::F16);
  CHECK_FALSE(ops::batchnorm_activation_backward_recomputes(x, {ops::Activation::ReLU, 0.f}));
}

TEST_CASE("gpu ops: batchnorm_activation_forward_train with round_y is the forward then fp8_round_trip bitwise") {
  GE_REQUIRE_GPU();
  // The first shape takes BatchNorm's one-launch kernel on Hopper, the second its three launches.
  check_all(Device::cuda(0), {{64, 128, 16, 16}, {256, 64, 32, 32}}, false);
  check_all(Device::cuda(0), {{16, 64, 32, 32}}, true);
  // What the backward recomputes: 16-bit activations, ReLU and LeakyReLU with a slope >= 0.
  const Tensor half = Tensor::zeros({2, 8, 4, 4}, DType::F16, Device::cuda(0), MemoryFormat::NHWC);
  const Tensor f32 = Tensor::zeros({2, 8, 4, 4}, DType::F32, Device::cuda(0), MemoryFormat::NHWC);
  CHECK(ops::batchnorm_activation_backward_recomputes(half, {ops::Activation::LeakyReLU, 0.2f}));
  CHECK_FALSE(ops::batchnorm_activation_backward_recomputes(half, {ops::Activation::LeakyReLU, -0.2f}));
  CHECK_FALSE(ops::batchnorm_activation_backward_recomputes(f32, {ops::Activation::ReLU, 0.f}));
}

TEST_CASE("ops: batchnorm_activation_forward_train rejects a round_y with --sync-bn or codes_only without codes") {
  const Shape shape{2, 8, 4, 4};
  const Tensor x = random_tensor(shape, DType::F32), gamma = random_tensor({8}, DType::F32),
               beta = random_tensor({8}, DType::F32);
  Tensor rm = Tensor::zeros({8}, DType::F32), rv = Tensor::zeros({8}, DType::F32);
  Tensor mean = Tensor::empty({8}, DType::F32), invstd = Tensor::empty({8}, DType::F32),
         y = Tensor::empty(shape, DType::F32);
  const ops::FusedActivation act{ops::Activation::ReLU, 0.f};
  const ops::Fp8RoundTrip no_codes{f32_scalar(1.f), f32_scalar(1.f), Fp8Format::E4M3, Tensor(), Tensor(), true};
  CHECK_THROWS_WITH_AS(ops::batchnorm_activation_forward_train(x, gamma, beta, rm, rv, 0.1f, 1e-5f, act, y, mean,
                                                               invstd, nullptr, &no_codes),
                       doctest::Contains("with codes_only needs the codes tensor to write"), Error);
  const ops::BatchNormSync sync{[](const Tensor&) {}, Tensor::zeros({1}, DType::F32)};
  const ops::Fp8RoundTrip plain{f32_scalar(1.f), f32_scalar(1.f), Fp8Format::E4M3, Tensor(), Tensor()};
  CHECK_THROWS_WITH_AS(
      ops::batchnorm_activation_forward_train(x, gamma, beta, rm, rv, 0.1f, 1e-5f, act, y, mean, invstd, &sync, &plain),
      doctest::Contains("no --sync-bn"), Error);
}
