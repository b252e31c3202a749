// The 128 -> 64-channel stride-2 backward-data on Hopper's warpgroup MMA
// (kernels/cuda/conv/conv_phase_dgrad.h): against the CPU reference, run to run, and reached through
// the ops that the layers call (D's second layer's backward-data, G's fourth layer's forward).
#if GE_WITH_CUDA
#include <algorithm>
#include <cmath>

#include "cuda/conv/conv_phase_dgrad.h"
#include "ganengine/amp.h"
#include "ganengine/nn.h"
#include "support/test_util.h"
#include "support/trainer_compare.h"

namespace {

using ge::Device;
using ge::DType;
using ge::MemoryFormat;
using ge::Tensor;

const Device kGpu = Device::cuda(0);

Tensor random_half(const ge::Shape& s) {
  return ge::test::random_tensor(s, DType::F16, Device::cpu(), MemoryFormat::NHWC, -1.0, 1.0);
}

// 4 images make two blocks each (two phases a block); 160, more than an H100's or H200's 132 SMs,
// one item of four phases each, several items a block.
TEST_CASE("gpu ops: the 128 to 64-channel stride-2 backward-data on warpgroup MMA matches the CPU") {
  GE_REQUIRE_GPU();
  GE_REQUIRE_SM90();
  const ge::Conv2dParams p{/*stride=*/2, /*pad=*/1};
  for (int64_t n : {4, 160}) {
    CAPTURE(n);
    const Tensor w = random_half({128, 64, 4, 4});
    const Tensor dy = random_half({n, 128, 16, 16});
    Tensor dx = Tensor::zeros({n, 64, 32, 32}, DType::F16, Device::cpu(), MemoryFormat::NHWC);
    ge::ops::conv2d_backward_data(dy, w, dx, p);
    const Tensor dyg = dy.to(kGpu), wg = w.to(kGpu);

    Tensor mine = ge::test::poisoned_like(dx, kGpu);
    REQUIRE(ge::gpu::conv2d_backward_data_phases(dyg, wg, mine, p));
    const std::vector<double> got = mine.to(Device::cpu()).to_doubles(), want = dx.to_doubles();
    double worst = 0, scale = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      worst = std::max(worst, std::fabs(got[i] - want[i]));  // a NaN left unwritten fails too
      if (std::isnan(got[i])) worst = INFINITY;
      scale = std::max(scale, std::fabs(want[i]));
    }
    // Sums of 512 products of values in [-1, 1): half rounding of the result, and the order.
    CHECK(worst <= 2e-3 * scale);

    Tensor again = ge::test::poisoned_like(dx, kGpu);
    REQUIRE(ge::gpu::conv2d_backward_data_phases(dyg, wg, again, p));
    CHECK(ge::test::same_tensor(again, mine));
    Tensor via_conv = ge::test::poisoned_like(dx, kGpu), via_transpose = ge::test::poisoned_like(dx, kGpu);
    ge::ops::conv2d_backward_data(dyg, wg, via_conv, p);
    ge::ops::conv_transpose2d_forward(dyg, wg, via_transpose, p);  // x = dy, w as (in, out, 4, 4)
    CHECK(ge::test::same_tensor(via_conv, mine));
    CHECK(ge::test::same_tensor(via_transpose, mine));
  }
  // What it does not take goes elsewhere: another channel count, NCHW, f32.
  const Tensor w96 = random_half({96, 64, 4, 4}).to(kGpu), dy96 = random_half({2, 96, 16, 16}).to(kGpu);
  Tensor out = Tensor::empty({2, 64, 32, 32}, DType::F16, kGpu, MemoryFormat::NHWC);
  CHECK_FALSE(ge::gpu::conv2d_backward_data_phases(dy96, w96, out, p));
  const Tensor w_nchw = random_half({128, 64, 4, 4}).to_format(MemoryFormat::NCHW).to(kGpu);
  const Tensor dy_nchw = random_half({2, 128, 16, 16}).to_format(MemoryFormat::NCHW).to(kGpu);
  Tensor out_nchw = Tensor::empty({2, 64, 32, 32}, DType::F16, kGpu, MemoryFormat::NCHW);
  CHECK_FALSE(ge::gpu::conv2d_backward_data_phases(dy_nchw, w_nchw, out_nchw, p));
  const Tensor w32 = ge::test::random_tensor({128, 64, 4, 4}, DType::F32, kGpu, MemoryFormat::NHWC, -1.0, 1.0);
  const Tensor dy32 = ge::test::random_tensor({2, 128, 16, 16}, DType::F32, kGpu, MemoryFormat::NHWC, -1.0, 1.0);
  Tensor out32 = Tensor::empty({2, 64, 32, 32}, DType::F32, kGpu, MemoryFormat::NHWC);
  CHECK_FALSE(ge::gpu::conv2d_backward_data_phases(dy32, w32, out32, p));
}

// Each GPU of a data-parallel run launches the kernel in its own context: the shared-memory
// attribute and the block count are per device, so the second GPU must give the first's bits.
TEST_CASE("gpu ops: the warpgroup-MMA backward-data on a second GPU gives the first GPU's bits") {
  GE_REQUIRE_GPUS(2);
  GE_REQUIRE_SM90();
  const ge::Conv2dParams p{/*stride=*/2, /*pad=*/1};
  const Tensor w = random_half({128, 64, 4, 4}), dy = random_half({160, 128, 16, 16});
  auto run_on = [&](Device gpu) {
    Tensor dx = Tensor::empty({160, 64, 32, 32}, DType::F16, gpu, MemoryFormat::NHWC);
    ge::test::poison(dx);
    REQUIRE(ge::gpu::conv2d_backward_data_phases(dy.to(gpu), w.to(gpu), dx, p));
    return dx.to(Device::cpu());
  };
  const Tensor first = run_on(kGpu), second = run_on(Device::cuda(1));
  CHECK(ge::test::same_tensor(second, first));
}

// The (3, parts, C) moments merged per channel (Chan et al., in double).
ge::test::ChannelStats merged(const Tensor& moments) {
  const std::vector<double> m = moments.to(Device::cpu()).to_doubles();
  const int64_t parts = moments.dim(1), C = moments.dim(2);
  ge::test::ChannelStats s{std::vector<double>(C, 0.0), std::vector<double>(C, 0.0), std::vector<double>(C, 0.0)};
  for (int64_t c = 0; c < C; ++c) {
    double n = 0, mean = 0, m2 = 0;
    for (int64_t k = 0; k < parts; ++k) {
      const double nb = m[k * C + c], mb = m[(parts + k) * C + c], m2b = m[(2 * parts + k) * C + c];
      const double total = n + nb, delta = mb - mean;
      mean += delta * nb / total;
      m2 += m2b + delta * delta * n * nb / total;
      n = total;
    }
    s.count[c] = n;
    s.mean[c] = mean;
    s.var[c] = m2 / n;
  }
  return s;
}

TEST_CASE("gpu ops: the warpgroup-MMA transposed convolution forms its output's BatchNorm moments") {
  GE_REQUIRE_GPU();
  GE_REQUIRE_SM90();
  const ge::Conv2dParams p{/*stride=*/2, /*pad=*/1};
  for (int64_t n : {4, 160}) {
    CAPTURE(n);
    // A mean far from zero for some channels: the moments must not lose the variance to it.
    const Tensor w = random_half({128, 64, 4, 4}).to(kGpu);
    Tensor x = ge::test::random_tensor({n, 128, 16, 16}, DType::F16, Device::cpu(), MemoryFormat::NHWC, 0.0, 1.0);
    x = x.to(kGpu);
    Tensor y = Tensor::empty({n, 64, 32, 32}, DType::F16, kGpu, MemoryFormat::NHWC), moments;
    ge::test::poison(y);
    REQUIRE(ge::ops::conv_transpose2d_forward_moments(x, w, y, p, moments));
    Tensor plain = ge::test::poisoned_like(y, kGpu);
    ge::ops::conv_transpose2d_forward(x, w, plain, p);
    CHECK(ge::test::same_tensor(y, plain));  // the output is the same with or without the moments
    REQUIRE(moments.dim(0) == 3);
    REQUIRE(moments.dim(2) == 64);
    const ge::test::ChannelStats want = ge::test::exact_channel_stats(y), got = merged(moments);
    for (int64_t c = 0; c < 64; ++c) {
      CAPTURE(c);
      CHECK(got.count[c] == want.count[c]);
      const double sd = std::sqrt(want.var[c]);
      CHECK(std::fabs(got.mean[c] - want.mean[c]) <= 1e-5 * sd + 1e-6 * std::fabs(want.mean[c]));
      CHECK(std::fabs(got.var[c] - want.var[c]) <= 1e-5 * want.var[c]);
    }
    // The training BatchNorm from the moments: the statistics and output of the one that reads y.
    const Tensor gamma = ge::test::random_tensor({64}, DType::F32, kGpu, MemoryFormat::NCHW, 0.5, 1.5);
    const Tensor beta = ge::test::random_tensor({64}, DType::F32, kGpu, MemoryFormat::NCHW, -0.5, 0.5);
    const ge::ops::FusedActivation relu{ge::ops::Activation::ReLU, 0.f};
    struct Outcome {
      Tensor y, mean, invstd, running_mean, running_var;
    };
    auto normalise = [&](bool from_moments) {
      Outcome o{ge::test::poisoned_like(y, kGpu), Tensor::empty({64}, DType::F32, kGpu),
                Tensor::empty({64}, DType::F32, kGpu), Tensor::zeros({64}, DType::F32, kGpu),
                Tensor::zeros({64}, DType::F32, kGpu)};
      if (from_moments)
        ge::ops::batchnorm_activation_forward_train_moments(y, moments, gamma, beta, o.running_mean, o.running_var,
                                                            0.1f, 1e-5f, relu, o.y, o.mean, o.invstd);
      else
        ge::ops::batchnorm_activation_forward_train(y, gamma, beta, o.running_mean, o.running_var, 0.1f, 1e-5f, relu,
                                                    o.y, o.mean, o.invstd);
      return o;
    };
    const Outcome a = normalise(true), b = normalise(false);
    CHECK(ge::test::rel_error(a.mean, b.mean) < 1e-5);
    CHECK(ge::test::rel_error(a.invstd, b.invstd) < 1e-5);
    CHECK(ge::test::rel_error(a.running_mean, b.running_mean) < 1e-5);
    CHECK(ge::test::rel_error(a.running_var, b.running_var) < 1e-5);
    CHECK(ge::test::rel_error(a.y, b.y) < 1e-3);  // a statistic's last bit can move a value's rounding
  }
}

// G at the example's width (its fourth layer is the kernel's shape) in half: the BatchNorm after
// that layer takes the moments and gives the forward and running statistics of one that reads.
TEST_CASE("gpu generator: the BatchNorm after G's fourth layer takes its moments and matches reading them") {
  GE_REQUIRE_GPU();
  GE_REQUIRE_SM90();
  const ge::PrecisionPolicy policy = ge::resolve_policy(ge::OptLevel::O2);
  const ge::nn::Placement where = ge::nn::Placement::for_device(kGpu, policy.compute_dtype);
  const ge::nn::NetConfig cfg;  // 64x64, ngf 64
  auto linked = ge::nn::make_generator(cfg, policy, where), apart = ge::nn::make_generator(cfg, policy, where);
  ge::nn::weights_init(*linked, 7, 0);
  ge::nn::weights_init(*apart, 7, 0);
  for (auto& layer : apart->layers())
    if (auto* conv = dynamic_cast<ge::nn::Conv2d*>(layer.get())) conv->form_moments_for(nullptr);
  const Tensor noise = ge::test::random_tensor({96, 100, 1, 1}, DType::F32, kGpu, MemoryFormat::NCHW, -1.0, 1.0);
  for (int step = 0; step < 2; ++step) {
    CAPTURE(step);
    const Tensor a = linked->forward(noise, true), b = apart->forward(noise, true);
    CHECK(ge::test::rel_error(a, b) < 2e-3);
    for (size_t i = 0; i < linked->layers().size(); ++i) {
      auto* bn = dynamic_cast<ge::nn::BatchNorm2d*>(linked->layers()[i].get());
      if (!bn) continue;
      CAPTURE(i);
      CHECK(bn->took_moments() == (i == 10));  // main.10 follows main.9, ConvTranspose2d(128, 64)
      auto* other = dynamic_cast<ge::nn::BatchNorm2d*>(apart->layers()[i].get());
      CHECK_FALSE(other->took_moments());
      CHECK(ge::test::rel_error(bn->running_mean(), other->running_mean()) < 1e-3);
      CHECK(ge::test::rel_error(bn->running_var(), other->running_var()) < 1e-3);
    }
  }
}

}  // namespace
#endif  // GE_WITH_CUDA
