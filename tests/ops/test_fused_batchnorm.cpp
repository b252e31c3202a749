// BatchNorm2d with its activation fused (ops::batchnorm_activation_*): bitwise the two ops in
// sequence on the same backend, and the GPU against the CPU reference.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "core/backend.h"
#include "ganengine/amp.h"
#include "ganengine/nn.h"
#include "support/test_util.h"

using namespace ge;
using namespace ge::test;

namespace {

struct Outputs {
  Tensor y, mean, invstd, rm, rv, dx, dgamma, dbeta;
};

// Training forward and backward of BatchNorm + activation, fused or as two ops.
struct Inputs {
  Tensor x, dy, gamma, beta;
  Inputs on(Device d) const { return {x.to(d), dy.to(d), gamma.to(d), beta.to(d)}; }
};

Inputs make_inputs(const Shape& s, DType dt, MemoryFormat f) {
  return {random_tensor(s, dt, Device::cpu(), f), random_tensor(s, dt, Device::cpu(), f),
          random_tensor({s[1]}, DType::F32, Device::cpu(), MemoryFormat::NCHW, 0.5, 1.5),
          random_tensor({s[1]}, DType::F32, Device::cpu(), MemoryFormat::NCHW, -0.5, 0.5)};
}

// dx_over_dy: the backward writes dx over (a copy of) the gradient it reads, as BatchNorm2d does
// when its caller gives dy up.
Outputs run(bool fused, const ops::FusedActivation& act, const Inputs& in, bool dx_over_dy = false) {
  const Tensor &x = in.x, &dy = in.dy, &gamma = in.gamma, &beta = in.beta;
  const Device d = x.device();
  const DType pdt = gamma.dtype();
  const int64_t C = x.dim(1);
  Outputs o;
  o.rm = Tensor::zeros({C}, pdt, d);
  o.rv = Tensor::zeros({C}, pdt, d);
  o.mean = Tensor::empty({C}, DType::F32, d);
  o.invstd = Tensor::empty({C}, DType::F32, d);
  o.y = Tensor::empty(x.shape(), x.dtype(), d, x.format());
  o.dx = Tensor::empty(x.shape(), x.dtype(), d, x.format());
  if (dx_over_dy && fused) o.dx = dy.clone();
  o.dgamma = Tensor::empty({C}, pdt, d);
  o.dbeta = Tensor::empty({C}, pdt, d);
  if (fused) {
    ops::batchnorm_activation_forward_train(x, gamma, beta, o.rm, o.rv, 0.1f, 1e-5f, act, o.y, o.mean, o.invstd);
    ops::batchnorm_activation_backward(x, o.y, dx_over_dy ? o.dx : dy, gamma, beta, o.mean, o.invstd, act, o.dx,
                                       o.dgamma, o.dbeta);
  } else {
    ops::batchnorm_forward_train(x, gamma, beta, o.rm, o.rv, 0.1f, 1e-5f, o.y, o.mean, o.invstd);
    ops::activation_forward(act.kind, o.y, o.y, act.negative_slope);
    Tensor g = Tensor::empty(dy.shape(), dy.dtype(), d, dy.format());
    ops::activation_backward(act.kind, o.y, dy, g, act.negative_slope);
    if (dx_over_dy) o.dx = g;
    ops::batchnorm_backward(x, g, gamma, o.mean, o.invstd, o.dx, o.dgamma, o.dbeta);
  }
  return o;
}

void expect_same(const Outputs& a, const Outputs& b) {
  CHECK(same_bytes(a.y, b.y));
  CHECK(same_bytes(a.mean, b.mean));
  CHECK(same_bytes(a.invstd, b.invstd));
  CHECK(same_bytes(a.rm, b.rm));
  CHECK(same_bytes(a.rv, b.rv));
  CHECK(same_bytes(a.dx, b.dx));
  CHECK(same_bytes(a.dgamma, b.dgamma));
  CHECK(same_bytes(a.dbeta, b.dbeta));
}

// The GPU forms each activation's gradient from the float value it normalises, the CPU from its
// double one: where a normalised value lies within float rounding of the activation's kink the two
// can take different sides, and one such value moves dx and dgamma by far more than any rounding
// (among 2 million values, by about 1e-3 of dx's norm: three times the f16 bound). The comparisons
// with the CPU clear dy where the CPU's output is that near 0, so either side gives the same dx.
Inputs clear_of_the_kink(Inputs host, const ops::FusedActivation& act) {
  const std::vector<double> y = run(true, act, host).y.to_doubles();
  std::vector<double> dy = host.dy.to_doubles();
  for (size_t i = 0; i < dy.size(); ++i)
    if (std::abs(y[i]) < 1e-4) dy[i] = 0.0;
  host.dy = Tensor::from_doubles(dy, host.dy.shape(), host.dy.dtype(), Device::cpu(), host.dy.format());
  return host;
}

// Shapes where the GPU kernels take 16-byte packs and where they cannot; (16,64,16,16) is cut
// into 16 partial sums per channel.
const Shape kShapes[] = {{8, 16, 4, 4}, {4, 24, 8, 8}, {3, 5, 3, 3}, {2, 12, 1, 1}, {16, 64, 16, 16}};

}  // namespace

TEST_CASE("fused batchnorm activation: the CPU reference is the two ops in sequence") {
  for (const Shape& s : kShapes)
    for (ops::Activation a : {ops::Activation::ReLU, ops::Activation::LeakyReLU}) {
      INFO(shape_str(s), " ", std::string(ops::activation_name(a)));
      const ops::FusedActivation act{a, 0.2f};
      const Inputs in = make_inputs(s, DType::F16, MemoryFormat::NHWC);
      expect_same(run(true, act, in), run(false, act, in));
    }
}

namespace {

// dx written over dy (the layer gives dy up) against dx written apart, on one device.
void expect_dx_over_dy_bitwise(const Device& d) {
  for (const Shape& s : kShapes)
    for (bool fused : {true, false}) {
      INFO(d.str(), " ", shape_str(s), fused ? " fused" : " unfused");
      const ops::FusedActivation act{ops::Activation::LeakyReLU, 0.2f};
      const Inputs in = make_inputs(s, DType::F16, MemoryFormat::NHWC).on(d);
      expect_same(run(fused, act, in, /*dx_over_dy=*/true), run(fused, act, in));
    }
}

}  // namespace

TEST_CASE("batchnorm backward: dx written over dy is bitwise dx written apart on the CPU") {
  expect_dx_over_dy_bitwise(Device::cpu());
}

TEST_CASE("gpu batchnorm backward: dx written over dy is bitwise dx written apart") {
  GE_REQUIRE_GPU();
  expect_dx_over_dy_bitwise(Device::cuda(0));
}

TEST_CASE("batchnorm layer: dx takes over dy's memory only when the caller gives dy up") {
  const PrecisionPolicy policy = resolve_policy(OptLevel::O0);
  nn::BatchNorm2d bn(4, policy, nn::Placement::for_device(Device::cpu(), DType::F32));
  const Tensor x = random_tensor({3, 4, 5, 5}, DType::F32, Device::cpu());
  Tensor dy = random_tensor({3, 4, 5, 5}, DType::F32, Device::cpu());
  const std::vector<double> dy_values = dy.to_doubles();
  bn.forward(x, true);
  const Tensor kept = bn.backward(dy, true, true);  // a copy of the handle: dy stays the caller's
  CHECK(kept.data() != dy.data());
  CHECK(dy.to_doubles() == dy_values);
  bn.forward(x, true);
  const void* memory = dy.data();
  const Tensor given = bn.backward(std::move(dy), true, true);
  CHECK(given.data() == memory);
  CHECK(given.to_doubles() == kept.to_doubles());
}

TEST_CASE("fused batchnorm activation: a Tanh cannot be fused") {
  const Tensor x = Tensor::zeros({2, 4, 2, 2}, DType::F32);
  Tensor y = x.clone(), p = Tensor::zeros({4}, DType::F32), q = Tensor::zeros({4}, DType::F32),
         m = Tensor::zeros({4}, DType::F32), v = Tensor::zeros({4}, DType::F32);
  CHECK_THROWS_WITH_AS(
      ops::batchnorm_activation_forward_train(x, p, q, m, v, 0.1f, 1e-5f, {ops::Activation::Tanh, 0.f}, y, m, v),
      doctest::Contains("only ReLU and LeakyReLU"), Error);
}

// Statistics formed by the layer before (ops::conv_transpose2d_forward_moments) come from GPU
// kernels only: on the CPU the convolution forms none and runs nothing, the BatchNorm reads its
// input, and a BatchNorm given moments says where they are taken.
TEST_CASE("batchnorm moments: the CPU forms none and runs nothing and G's BatchNorms read their inputs") {
  const Conv2dParams p{2, 1};
  const Tensor x = random_tensor({2, 16, 4, 4}, DType::F32), w = random_tensor({16, 8, 4, 4}, DType::F32);
  Tensor y = Tensor::zeros({2, 8, 8, 8}, DType::F32), moments;
  CHECK_FALSE(ops::conv_transpose2d_forward_moments(x, w, y, p, moments));
  CHECK_FALSE(moments.defined());
  CHECK(rel_error(y, Tensor::zeros({2, 8, 8, 8}, DType::F32)) == 0.0);  // nothing written

  const Tensor given = Tensor::zeros({3, 1, 8}, DType::F32);
  Tensor out = y.clone(), ones = Tensor::zeros({8}, DType::F32), m = Tensor::zeros({8}, DType::F32),
         v = Tensor::zeros({8}, DType::F32), sm = Tensor::zeros({8}, DType::F32), si = Tensor::zeros({8}, DType::F32);
  CHECK_THROWS_WITH_AS(ops::batchnorm_activation_forward_train_moments(y, given, ones, ones, m, v, 0.1f, 1e-5f,
                                                                       {ops::Activation::ReLU, 0.f}, out, sm, si),
                       doctest::Contains("moments come from GPU kernels only"), Error);
  const Tensor wrong = Tensor::zeros({3, 1, 4}, DType::F32);
  CHECK_THROWS_WITH_AS(ops::batchnorm_activation_forward_train_moments(y, wrong, ones, ones, m, v, 0.1f, 1e-5f,
                                                                       {ops::Activation::ReLU, 0.f}, out, sm, si),
                       doctest::Contains("moments must be f32 (3, parts, 8)"), Error);

  nn::NetConfig cfg;
  cfg.image_size = 16;
  cfg.ngf = cfg.ndf = 4;
  cfg.nz = 8;
  const PrecisionPolicy policy = resolve_policy(OptLevel::O0);
  auto G = nn::make_generator(cfg, policy, nn::Placement::for_device(Device::cpu(), policy.compute_dtype));
  G->forward(random_tensor({3, 8, 1, 1}, DType::F32), true);
  int batchnorms = 0;
  for (auto& layer : G->layers())
    if (auto* bn = dynamic_cast<nn::BatchNorm2d*>(layer.get())) {
      ++batchnorms;
      CHECK_FALSE(bn->took_moments());
    }
  CHECK(batchnorms == 2);
}

TEST_CASE("batchnorm moments: G's transposed convolutions hand them to their own BatchNorms and twins to the twin's") {
  nn::NetConfig cfg;
  cfg.image_size = 16;
  cfg.ngf = cfg.ndf = 4;
  cfg.nz = 8;
  const PrecisionPolicy policy = resolve_policy(OptLevel::O2);
  const nn::Placement where = nn::Placement::for_device(Device::cpu(), policy.compute_dtype);
  auto G = nn::make_generator(cfg, policy, where), D = nn::make_discriminator(cfg, policy, where);
  auto twin = G->twin();
  int linked = 0;
  for (size_t i = 0; i < G->layers().size(); ++i) {
    auto* conv = dynamic_cast<nn::Conv2d*>(G->layers()[i].get());
    if (!conv) continue;
    CAPTURE(i);
    auto* twin_conv = dynamic_cast<nn::Conv2d*>(twin->layers()[i].get());
    REQUIRE(twin_conv != nullptr);
    if (i + 1 < G->layers().size() && dynamic_cast<nn::BatchNorm2d*>(G->layers()[i + 1].get())) {
      ++linked;
      CHECK(conv->moments_for() == G->layers()[i + 1].get());
      CHECK(twin_conv->moments_for() == twin->layers()[i + 1].get());
    } else {
      CHECK(conv->moments_for() == nullptr);  // G's last layer: a Tanh follows
      CHECK(twin_conv->moments_for() == nullptr);
    }
  }
  CHECK(linked == 2);
  for (auto& layer : D->layers())
    if (auto* conv = dynamic_cast<nn::Conv2d*>(layer.get())) CHECK(conv->moments_for() == nullptr);
}

namespace {

// GPU BatchNorm (fused, unfused, one launch) against the CPU reference, relative to the norm of
// each output. Both round the same float statistics to the output dtype once, so they differ only
// where a value lies near a rounding edge: the worst errors measured over these cases on an H100
// were 1.4e-7 (f32), 2.9e-5 (f16) and 6.7e-5 (bf16); the bounds leave about ten times that.
double gpu_vs_cpu_tol(DType dt) { return dt == DType::F32 ? 1e-6 : dt == DType::F16 ? 3e-4 : 7e-4; }

// The worst errors seen per dtype, printed so that a run shows how much headroom the bounds have.
struct WorstErrors {
  std::map<std::string, double> by_dtype;
  void check(const char* what, const Tensor& got, const Tensor& want, DType dt) {
    const double e = rel_error(got.to_doubles(), want.to_doubles());
    CHECK_MESSAGE(e < gpu_vs_cpu_tol(dt), std::string(what), " relative error ", e);
    double& w = by_dtype[std::string(dtype_name(dt))];
    w = std::max(w, e);
  }
  void check_all(const Outputs& gpu, const Outputs& cpu, DType dt) {
    check("y", gpu.y, cpu.y, dt);
    check("dx", gpu.dx, cpu.dx, dt);
    check("dgamma", gpu.dgamma, cpu.dgamma, dt);
  }
  void report(const char* what) const {
    for (const auto& [dt, e] : by_dtype)
      MESSAGE(std::string(what), ": worst relative error against the CPU in ", dt, ": ", e);
  }
};

}  // namespace

TEST_CASE("gpu fused batchnorm activation: bitwise the unfused GPU kernels and close to the CPU") {
  GE_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  WorstErrors worst;
  for (const Shape& s : kShapes)
    for (DType dt : {DType::F32, DType::F16, DType::BF16})
      for (MemoryFormat f : {MemoryFormat::NCHW, MemoryFormat::NHWC})
        for (ops::Activation a : {ops::Activation::ReLU, ops::Activation::LeakyReLU}) {
          INFO(shape_str(s), " ", std::string(dtype_name(dt)), " ", std::string(format_name(f)), " ",
               std::string(ops::activation_name(a)));
          const ops::FusedActivation act{a, 0.2f};
          const Inputs host = clear_of_the_kink(make_inputs(s, dt, f), act), dev = host.on(gpu);
          const Outputs fused = run(true, act, dev);
          expect_same(fused, run(false, act, dev));
          // Against the CPU only where each channel has enough values for BatchNorm's backward to
          // be well conditioned (with 2 per channel, dx cancels to ~1e-3 relative even in f32).
          if (s[0] * s[2] * s[3] < 16) continue;
          worst.check_all(fused, run(true, act, host), dt);
        }
  worst.report("fused");
}

// Layers larger than the GPU holds threads for at once: each thread of the element-wise passes
// takes several packs, with the same channels in each (64 channels) or not (40: the grid's
// stride is not a whole number of pixels).
TEST_CASE("gpu fused batchnorm activation: threads that take several packs match the unfused kernels and the CPU") {
  GE_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  WorstErrors worst;
  for (const Shape& s : {Shape{40, 64, 32, 32}, Shape{64, 40, 32, 32}})
    for (ops::Activation a : {ops::Activation::ReLU, ops::Activation::LeakyReLU}) {
      INFO(shape_str(s), " ", std::string(ops::activation_name(a)));
      const ops::FusedActivation act{a, 0.2f};
      const Inputs host = clear_of_the_kink(make_inputs(s, DType::F16, MemoryFormat::NHWC), act), dev = host.on(gpu);
      const Outputs fused = run(true, act, dev);
      expect_same(fused, run(false, act, dev));
      const Outputs cpu = run(true, act, host);
      worst.check_all(fused, cpu, DType::F16);
      CHECK(rel_error(fused.rm.to_doubles(), cpu.rm.to_doubles()) < 1e-3);
    }
  worst.report("several packs a thread");
}

#if GE_WITH_CUDA  // calls the GPU backend directly, to compare with and without beta
// The GPU's backward forms the activation's gradient without reading its output: it recomputes
// the normalised value from x and tests only whether it rounds to a positive value of the dtype
// (for half a compare with 2^-25, half the smallest subnormal). Normalised values at and around
// that boundary (mean 0, invstd 1, gamma 1: the normalised value is x + beta, exactly), with y as
// the forward writes it: bitwise what the backward reading y gives (beta not passed).
TEST_CASE(
    "gpu fused batchnorm backward: recomputing the activation from x is bitwise reading it at the rounding edge") {
  GE_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  const int64_t N = 2, C = 8, H = 4, W = 4;
  const float edge = 0x1p-25f;
  const std::vector<float> betas = {
      edge, std::nextafter(edge, 1.f), std::nextafter(edge, 0.f), -edge, 0.f, -0.f, 0x1p-24f, 0x1p-134f};
  const std::vector<float> xs = {0.f, 0x1p-24f, -0x1p-24f, 0x1p-23f, 1.f, -1.f, 0.f, -0x1p-26f};
  for (DType dt : {DType::F16, DType::BF16})
    for (ops::Activation a : {ops::Activation::ReLU, ops::Activation::LeakyReLU}) {
      INFO(std::string(dtype_name(dt)), " ", std::string(ops::activation_name(a)));
      const ops::FusedActivation act{a, 0.2f};
      std::vector<float> x(N * C * H * W), z(x.size());
      for (size_t i = 0; i < x.size(); ++i) x[i] = xs[i % xs.size()];
      const Tensor x_t = Tensor::from_floats(x, {N, C, H, W}, dt);
      const std::vector<double> x_rounded = x_t.to_doubles();
      for (size_t i = 0; i < x.size(); ++i) {
        const size_t c = (i / (H * W)) % C;
        z[i] = std::fma(static_cast<float>(x_rounded[i]), 1.f, betas[c]);
      }
      // y = the activation of z rounded to the dtype, rounded again (as the forward stores it).
      std::vector<double> r = Tensor::from_floats(z, {N, C, H, W}, dt).to_doubles();
      std::vector<float> activated(r.size());
      for (size_t i = 0; i < r.size(); ++i) {
        const float v = static_cast<float>(r[i]);
        activated[i] = a == ops::Activation::ReLU ? (v <= 0.f ? 0.f : v) : (v > 0.f ? v : v * act.negative_slope);
      }
      auto on_gpu = [&](const Tensor& t) { return ops::converted(t, dt, MemoryFormat::NHWC, gpu); };
      const Tensor xg = on_gpu(x_t), yg = on_gpu(Tensor::from_floats(activated, {N, C, H, W}, dt));
      const Tensor dyg = on_gpu(random_tensor({N, C, H, W}, dt, Device::cpu()));
      const Tensor gamma = Tensor::from_floats(std::vector<float>(C, 1.f), {C}, DType::F32, gpu);
      const Tensor beta = Tensor::from_floats(betas, {C}, DType::F32, gpu);
      const Tensor mean = Tensor::zeros({C}, DType::F32, gpu);
      const Tensor invstd = Tensor::from_floats(std::vector<float>(C, 1.f), {C}, DType::F32, gpu);
      Outputs recomputed, read;
      for (Outputs* o : {&recomputed, &read}) {
        o->dx = Tensor::empty(xg.shape(), dt, gpu, MemoryFormat::NHWC);
        o->dgamma = Tensor::empty({C}, DType::F32, gpu);
        o->dbeta = Tensor::empty({C}, DType::F32, gpu);
        ge::gpu::batchnorm_backward(xg, dyg, gamma, mean, invstd, o->dx, o->dgamma, o->dbeta, &act, &yg,
                                    o == &recomputed ? &beta : nullptr, nullptr, nullptr);
      }
      CHECK(same_bytes(recomputed.dx, read.dx));
      CHECK(same_bytes(recomputed.dgamma, read.dgamma));
      CHECK(same_bytes(recomputed.dbeta, read.dbeta));
    }
}
#endif

#if GE_WITH_CUDA  // switches the GPU backend's BatchNorm passes
namespace {
Outputs run_with(gpu::ClusterBatchNorm choice, bool fused, const ops::FusedActivation& act, const Inputs& in,
                 bool dx_over_dy = false) {
  ClusterChoice scope(choice);
  return run(fused, act, in, dx_over_dy);
}

// Both paths take every sum in float; they differ only in its order, so the statistics and the
// parameter gradients agree to float rounding and the outputs to about one rounding of their dtype.
void expect_close(const Outputs& a, const Outputs& b, DType dt) {
  const double out_tol = dt == DType::F32 ? 1e-5 : dt == DType::F16 ? 2e-3 : 1e-2;
  CHECK(max_abs_diff(a.mean.to_doubles(), b.mean.to_doubles()) < 1e-6);  // means near 0: absolute
  CHECK(max_abs_diff(a.rm.to_doubles(), b.rm.to_doubles()) < 1e-6);
  CHECK(rel_error(a.invstd, b.invstd) < 1e-5);
  CHECK(rel_error(a.rv, b.rv) < 1e-5);
  CHECK(rel_error(a.y, b.y) < out_tol);
  CHECK(rel_error(a.dx, b.dx) < out_tol);
  CHECK(rel_error(a.dgamma, b.dgamma) < 1e-4);
  CHECK(rel_error(a.dbeta, b.dbeta) < 1e-4);
}
}  // namespace

// The DCGAN's BatchNorm layers at batch 64 (clusters of 4, 8 and 16 blocks, one or two packs of
// channels a block row), and small odd shapes: rows that do not fill a block, channel counts of
// one and three packs, f32's 4-float packs.
TEST_CASE("gpu batchnorm in one launch: matches the three-launch passes and the CPU") {
  GE_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  struct Case {
    Shape s;
    DType dt;
  };
  WorstErrors worst;
  const Case cases[] = {{{64, 128, 16, 16}, DType::F16}, {{64, 256, 8, 8}, DType::F16}, {{64, 512, 4, 4}, DType::F16},
                        {{64, 64, 32, 32}, DType::F16},  {{3, 24, 5, 7}, DType::F16},   {{5, 8, 1, 1}, DType::BF16},
                        {{7, 16, 9, 9}, DType::F32},     {{4, 32, 6, 6}, DType::BF16}};
  for (const Case& k : cases)
    for (bool fused : {true, false}) {
      INFO(shape_str(k.s), " ", std::string(dtype_name(k.dt)), fused ? " fused" : " unfused");
      const ops::FusedActivation act{ops::Activation::LeakyReLU, 0.2f};
      const Inputs host = clear_of_the_kink(make_inputs(k.s, k.dt, MemoryFormat::NHWC), act), dev = host.on(gpu);
      {
        ClusterChoice on(gpu::ClusterBatchNorm::On);
        CHECK(gpu::batchnorm_in_one_launch(dev.x));
      }
      const Outputs one = run_with(gpu::ClusterBatchNorm::On, fused, act, dev);
      expect_close(one, run_with(gpu::ClusterBatchNorm::Off, fused, act, dev), k.dt);
      // dx written over dy: each element read, then written, by one thread.
      expect_same(one, run_with(gpu::ClusterBatchNorm::On, fused, act, dev, /*dx_over_dy=*/true));
      if (k.s[0] * k.s[2] * k.s[3] < 16) continue;  // see the test above
      const Outputs cpu = run(fused, act, host);
      worst.check_all(one, cpu, k.dt);
      CHECK(rel_error(one.rv, cpu.rv) < 1e-3);
    }
  worst.report("one launch");
}

// The three-launch backward's dx pass tests the recomputed activation on per-channel thresholds
// (batchnorm_math.cuh, activation_threshold): bitwise what reading the activation's output gives,
// for gammas of either sign and zero (the test's direction flips with gamma's sign).
TEST_CASE("gpu fused batchnorm backward: the dx pass's activation thresholds are bitwise reading the output") {
  GE_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  ClusterChoice off(gpu::ClusterBatchNorm::Off);
  const float gammas[] = {1.2f, -0.7f, 0.f, -0.f, 0.3f, -1.5f, 1e-3f, -2.f};
  for (DType dt : {DType::F16, DType::BF16})
    for (ops::Activation a : {ops::Activation::ReLU, ops::Activation::LeakyReLU})
      for (const Shape& s : {Shape{16, 64, 8, 8}, Shape{4, 24, 5, 5}}) {
        INFO(std::string(dtype_name(dt)), " ", std::string(ops::activation_name(a)), " ", shape_str(s));
        const ops::FusedActivation act{a, 0.2f};
        const int64_t C = s[1];
        std::vector<float> gamma(static_cast<size_t>(C));
        for (int64_t c = 0; c < C; ++c) gamma[static_cast<size_t>(c)] = gammas[c % 8];
        Inputs in = make_inputs(s, dt, MemoryFormat::NHWC).on(gpu);
        in.gamma = Tensor::from_floats(gamma, {C}, DType::F32, gpu);
        const Outputs fwd = run(true, act, in);  // y, mean, invstd as the forward leaves them
        Outputs recomputed, read;
        for (Outputs* o : {&recomputed, &read}) {
          o->dx = Tensor::empty(s, dt, gpu, MemoryFormat::NHWC);
          o->dgamma = Tensor::empty({C}, DType::F32, gpu);
          o->dbeta = Tensor::empty({C}, DType::F32, gpu);
          ge::gpu::batchnorm_backward(in.x, in.dy, in.gamma, fwd.mean, fwd.invstd, o->dx, o->dgamma, o->dbeta, &act,
                                      &fwd.y, o == &recomputed ? &in.beta : nullptr, nullptr, nullptr);
        }
        CHECK(same_bytes(recomputed.dx, read.dx));
        CHECK(same_bytes(recomputed.dgamma, read.dgamma));
        CHECK(same_bytes(recomputed.dbeta, read.dbeta));
        CHECK(same_bytes(recomputed.dx, fwd.dx));  // the layer's own backward took the same path
      }
}

TEST_CASE("gpu batchnorm in one launch: auto takes small NHWC layers only") {
  GE_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  auto takes = [&](gpu::ClusterBatchNorm choice, const Shape& s, MemoryFormat f) {
    ClusterChoice scope(choice);
    return gpu::batchnorm_in_one_launch(Tensor::empty(s, DType::F16, gpu, f));
  };
  CHECK(takes(gpu::ClusterBatchNorm::Auto, {64, 256, 8, 8}, MemoryFormat::NHWC));
  CHECK(takes(gpu::ClusterBatchNorm::Auto, {64, 512, 4, 4}, MemoryFormat::NHWC));
  CHECK_FALSE(takes(gpu::ClusterBatchNorm::Auto, {64, 128, 16, 16}, MemoryFormat::NHWC));  // 2^21 values
  CHECK_FALSE(takes(gpu::ClusterBatchNorm::Auto, {8, 8, 128, 128}, MemoryFormat::NHWC));   // 32 rows a thread
  CHECK(takes(gpu::ClusterBatchNorm::On, {64, 128, 16, 16}, MemoryFormat::NHWC));
  CHECK(takes(gpu::ClusterBatchNorm::On, {64, 64, 32, 32}, MemoryFormat::NHWC));
  CHECK(takes(gpu::ClusterBatchNorm::On, {128, 64, 32, 32}, MemoryFormat::NHWC));
  CHECK_FALSE(takes(gpu::ClusterBatchNorm::On, {256, 64, 32, 32}, MemoryFormat::NHWC));  // 256 KiB a block
  CHECK_FALSE(takes(gpu::ClusterBatchNorm::Off, {64, 64, 32, 32}, MemoryFormat::NHWC));
  CHECK_FALSE(takes(gpu::ClusterBatchNorm::On, {64, 64, 32, 32}, MemoryFormat::NCHW));
  CHECK_FALSE(takes(gpu::ClusterBatchNorm::On, {64, 12, 8, 8}, MemoryFormat::NHWC));  // not whole packs
}
#endif
