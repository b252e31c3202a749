// D's last BatchNorm forming D's last layer's output, each image's dot product with the layer's
// one filter, as it writes its own (ops::batchnorm_activation_forward_train_dot,
// BatchNorm2d::form_dots_for), and that layer's backward-data where its backward reads it
// (ops::batchnorm_activation_backward_outer): bitwise what the layer's own passes give, and the
// layers linked where the discriminator has them.
#include "core/backend.h"
#include "ganengine/amp.h"
#include "ganengine/nn.h"
#include "support/test_util.h"

using namespace ge;
using namespace ge::test;

namespace {

nn::NetConfig small_net() {
  nn::NetConfig cfg;
  cfg.image_size = 16;
  cfg.ngf = cfg.ndf = 4;
  cfg.nz = 8;
  return cfg;
}

}  // namespace

TEST_CASE("image dots: the CPU forms none while D links its last BatchNorm to its last layer and twins to the twin's") {
  const Tensor x = random_tensor({3, 8, 4, 4}, DType::F32), gamma = random_tensor({8}, DType::F32),
               beta = random_tensor({8}, DType::F32), w = random_tensor({1, 8, 4, 4}, DType::F32);
  Tensor rm = Tensor::zeros({8}, DType::F32), rv = Tensor::zeros({8}, DType::F32),
         y = Tensor::zeros(x.shape(), DType::F32), mean = Tensor::zeros({8}, DType::F32),
         invstd = Tensor::zeros({8}, DType::F32), dots = Tensor::zeros({3, 1, 1, 1}, DType::F32);
  const ops::FusedActivation act{ops::Activation::LeakyReLU, 0.2f};
  CHECK_FALSE(
      ops::batchnorm_activation_forward_train_dot(x, gamma, beta, rm, rv, 0.1f, 1e-5f, act, y, mean, invstd, w, dots));
  CHECK(rel_error(y, Tensor::zeros(x.shape(), DType::F32)) == 0.0);  // nothing run
  CHECK(rel_error(rm, Tensor::zeros({8}, DType::F32)) == 0.0);
  const Tensor wrong = random_tensor({1, 8, 2, 2}, DType::F32);
  CHECK_THROWS_WITH_AS(ops::batchnorm_activation_forward_train_dot(x, gamma, beta, rm, rv, 0.1f, 1e-5f, act, y, mean,
                                                                   invstd, wrong, dots),
                       doctest::Contains("w must be (1, 8, 4, 4)"), Error);

  const PrecisionPolicy policy = resolve_policy(OptLevel::O2);
  const nn::Placement where = nn::Placement::for_device(Device::cpu(), policy.compute_dtype);
  auto D = nn::make_discriminator(small_net(), policy, where), G = nn::make_generator(small_net(), policy, where);
  auto twin = D->twin();
  auto& layers = D->layers();
  const size_t last = layers.size() - 1;  // Conv2d(8, 1, 4, 1, 0)
  for (size_t i = 0; i < layers.size(); ++i) {
    auto* bn = dynamic_cast<nn::BatchNorm2d*>(layers[i].get());
    if (!bn) continue;
    CAPTURE(i);
    auto* twin_bn = dynamic_cast<nn::BatchNorm2d*>(twin->layers()[i].get());
    REQUIRE(twin_bn != nullptr);
    CHECK(bn->dots_for() == (i + 2 == last ? layers[last].get() : nullptr));
    CHECK(twin_bn->dots_for() == (i + 2 == last ? twin->layers()[last].get() : nullptr));
  }
  for (auto& layer : G->layers())
    if (auto* bn = dynamic_cast<nn::BatchNorm2d*>(layer.get())) CHECK(bn->dots_for() == nullptr);
  // On the CPU the last layer computes its own output, and the BatchNorm runs the layer's
  // backward-data it is left: the gradients of a D whose layers are not linked, bitwise.
  auto* head = dynamic_cast<nn::Conv2d*>(layers[last].get());
  REQUIRE(head != nullptr);
  auto apart = nn::make_discriminator(small_net(), policy, where);
  nn::weights_init(*D, 5, 0);
  nn::weights_init(*apart, 5, 0);
  for (auto& layer : apart->layers())
    if (auto* bn = dynamic_cast<nn::BatchNorm2d*>(layer.get())) bn->form_dots_for(nullptr);
  const Tensor images = random_tensor({2, 3, 16, 16}, DType::F32);
  const Tensor a = D->forward(images, true), b = apart->forward(images, true);
  CHECK_FALSE(head->took_output());
  CHECK(same_bytes(a, b));
  const Tensor dlogits = random_tensor(a.shape(), a.dtype(), Device::cpu(), a.format());
  CHECK(same_bytes(D->backward(dlogits, true, true), apart->backward(dlogits, true, true)));
  const auto pa = D->params(), pb = apart->params();
  for (size_t i = 0; i < pa.size(); ++i) CHECK(same_bytes(pa[i]->model_grad, pb[i]->model_grad));
  CHECK_FALSE(dynamic_cast<nn::BatchNorm2d*>(layers[last - 2].get())->took_outer_gradient());
}

#if GE_WITH_CUDA
namespace {

struct Forward {
  Tensor y, mean, invstd, rm, rv, dots;
  bool formed = true;  // with_dots: the op formed them (else it ran nothing)
};

// The training forward with the dots, or without them followed by the convolution's own forward.
Forward forward(bool with_dots, const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& w) {
  const Device d = x.device();
  const int64_t C = x.dim(1);
  const ops::FusedActivation act{ops::Activation::LeakyReLU, 0.2f};
  Forward f{Tensor::empty(x.shape(), x.dtype(), d, x.format()),
            Tensor::empty({C}, DType::F32, d),
            Tensor::empty({C}, DType::F32, d),
            Tensor::zeros({C}, gamma.dtype(), d),
            Tensor::zeros({C}, gamma.dtype(), d),
            Tensor::empty({x.dim(0), 1, 1, 1}, x.dtype(), d, x.format())};
  if (with_dots) {
    f.formed = ops::batchnorm_activation_forward_train_dot(x, gamma, beta, f.rm, f.rv, 0.1f, 1e-5f, act, f.y, f.mean,
                                                           f.invstd, w, f.dots);
  } else {
    ops::batchnorm_activation_forward_train(x, gamma, beta, f.rm, f.rv, 0.1f, 1e-5f, act, f.y, f.mean, f.invstd);
    ops::conv2d_forward(f.y, w, f.dots, Conv2dParams{1, 0});
  }
  return f;
}

}  // namespace

// D's last BatchNorm at batch 64, 256 and 1024, and shapes where threads take other channels for
// each pack (24 channels), in f16, bf16 and f32: where the one-launch path takes the layer (64 and
// the small shapes under auto, everything under on) the op declines and runs nothing.
TEST_CASE("gpu image dots: y and statistics bitwise the plain forward and the dots bitwise the convolution's own") {
  GE_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  struct Case {
    Shape s;
    DType dt;
  };
  const Case cases[] = {{{64, 512, 4, 4}, DType::F16},   {{256, 512, 4, 4}, DType::F16},
                        {{1024, 512, 4, 4}, DType::F16}, {{256, 512, 4, 4}, DType::BF16},
                        {{7, 24, 3, 3}, DType::F16},     {{16, 32, 4, 4}, DType::F32}};
  for (const Case& k : cases)
    for (gpu::ClusterBatchNorm choice :
         {gpu::ClusterBatchNorm::Auto, gpu::ClusterBatchNorm::On, gpu::ClusterBatchNorm::Off}) {
      ClusterChoice scope(choice);
      const int64_t C = k.s[1];
      const Tensor x = random_tensor(k.s, k.dt, gpu, MemoryFormat::NHWC, -2.0, 2.0);
      const bool one_launch = gpu::batchnorm_in_one_launch(x);
      INFO(shape_str(k.s), " ", std::string(dtype_name(k.dt)), one_launch ? " one launch" : "");
      const Tensor gamma = random_tensor({C}, DType::F32, gpu, MemoryFormat::NCHW, 0.5, 1.5);
      const Tensor beta = random_tensor({C}, DType::F32, gpu, MemoryFormat::NCHW, -0.5, 0.5);
      const Tensor w = random_tensor({1, C, k.s[2], k.s[3]}, k.dt, gpu, MemoryFormat::NHWC, -0.05, 0.05);
      const Forward dotted = forward(true, x, gamma, beta, w), plain = forward(false, x, gamma, beta, w);
      CHECK(dotted.formed == !one_launch);
      CHECK(one_launch == (choice == gpu::ClusterBatchNorm::On ||
                           (choice == gpu::ClusterBatchNorm::Auto && (k.s[0] == 64 || k.s[0] < 32))));
      if (!dotted.formed) continue;
      CHECK(same_bytes(dotted.y, plain.y));
      CHECK(same_bytes(dotted.mean, plain.mean));
      CHECK(same_bytes(dotted.invstd, plain.invstd));
      CHECK(same_bytes(dotted.rm, plain.rm));
      CHECK(same_bytes(dotted.rv, plain.rv));
      if (k.dt == DType::F32)  // f32's convolution runs in cuDNN, which sums in its own order
        CHECK(rel_error(dotted.dots, plain.dots) < 1e-5);
      else
        CHECK(same_bytes(dotted.dots, plain.dots));
      // Against the CPU: the convolution of the CPU's fused forward.
      const Forward cpu =
          forward(false, x.to(Device::cpu()), gamma.to(Device::cpu()), beta.to(Device::cpu()), w.to(Device::cpu()));
      CHECK(rel_error(dotted.dots, cpu.dots) < (k.dt == DType::F32 ? 1e-4 : 2e-2));
    }
}

// The backward given D's last layer's output gradient and filter: bitwise that layer's own
// backward-data followed by the BatchNorm's backward, in one launch (batch 64 and the small shape
// under auto) and in three.
TEST_CASE("gpu image dots: the backward forming the last layer's backward-data is bitwise running it first") {
  GE_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  struct Case {
    Shape s;
    DType dt;
  };
  const Case cases[] = {{{64, 512, 4, 4}, DType::F16},   {{256, 512, 4, 4}, DType::F16},
                        {{1024, 512, 4, 4}, DType::F16}, {{256, 512, 4, 4}, DType::BF16},
                        {{7, 24, 3, 3}, DType::F16},     {{256, 32, 4, 4}, DType::F32}};
  for (const Case& k : cases)
    for (gpu::ClusterBatchNorm choice : {gpu::ClusterBatchNorm::Auto, gpu::ClusterBatchNorm::Off})
      for (ops::Activation a : {ops::Activation::LeakyReLU, ops::Activation::ReLU}) {
        ClusterChoice scope(choice);
        const int64_t N = k.s[0], C = k.s[1];
        const ops::FusedActivation act{a, 0.2f};
        const Tensor x = random_tensor(k.s, k.dt, gpu, MemoryFormat::NHWC, -2.0, 2.0);
        const bool formed_expected = k.dt != DType::F32;  // in one launch or in three
        INFO(shape_str(k.s), " ", std::string(dtype_name(k.dt)), " ", std::string(ops::activation_name(a)),
             formed_expected ? "" : " declines");
        const Tensor gamma = random_tensor({C}, DType::F32, gpu, MemoryFormat::NCHW, 0.5, 1.5);
        const Tensor beta = random_tensor({C}, DType::F32, gpu, MemoryFormat::NCHW, -0.5, 0.5);
        const Tensor w = random_tensor({1, C, k.s[2], k.s[3]}, k.dt, gpu, MemoryFormat::NHWC, -0.05, 0.05);
        const Tensor dlogits = random_tensor({N, 1, 1, 1}, k.dt, gpu, MemoryFormat::NHWC, -1.0, 1.0);
        const Forward f = forward(false, x, gamma, beta, w);
        struct Grads {
          Tensor dx, dgamma, dbeta;
        };
        auto fresh = [&] {
          return Grads{Tensor::empty(k.s, k.dt, gpu, MemoryFormat::NHWC), Tensor::empty({C}, DType::F32, gpu),
                       Tensor::empty({C}, DType::F32, gpu)};
        };
        Grads outer = fresh(), plain = fresh();
        const bool formed = ops::batchnorm_activation_backward_outer(x, f.y, dlogits, w, gamma, beta, f.mean, f.invstd,
                                                                     act, outer.dx, outer.dgamma, outer.dbeta);
        CHECK(formed == formed_expected);
        if (!formed) continue;
        Tensor dy = Tensor::empty(k.s, k.dt, gpu, MemoryFormat::NHWC);
        ops::conv2d_backward_data(dlogits, w, dy, Conv2dParams{1, 0});
        ops::batchnorm_activation_backward(x, f.y, dy, gamma, beta, f.mean, f.invstd, act, plain.dx, plain.dgamma,
                                           plain.dbeta);
        CHECK(same_bytes(outer.dx, plain.dx));
        CHECK(same_bytes(outer.dgamma, plain.dgamma));
        CHECK(same_bytes(outer.dbeta, plain.dbeta));
      }
}

// D at the example's width in half: at batch 256 its last layer takes its output from the
// BatchNorm before it (at 64, where that BatchNorm runs in one launch, it does not), whose backward
// forms the layer's backward-data at both, and the logits and every gradient are bitwise those of
// a D whose layers are not linked.
TEST_CASE("gpu discriminator: the last layer takes its output from the last BatchNorm and matches computing it") {
  GE_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  for (OptLevel level : {OptLevel::O2, OptLevel::O1, OptLevel::O3})
    for (int64_t batch : {64, 256}) {
      CAPTURE(batch);
      CAPTURE(static_cast<int>(level));
      const PrecisionPolicy policy = resolve_policy(level);
      const nn::Placement where = nn::Placement::for_device(gpu, policy.compute_dtype);
      const nn::NetConfig cfg;  // 64x64, ndf 64: the last BatchNorm is 512 x 4 x 4
      auto linked = nn::make_discriminator(cfg, policy, where), apart = nn::make_discriminator(cfg, policy, where);
      nn::weights_init(*linked, 11, 0);
      nn::weights_init(*apart, 11, 0);
      for (auto& layer : apart->layers())
        if (auto* bn = dynamic_cast<nn::BatchNorm2d*>(layer.get())) bn->form_dots_for(nullptr);
      auto* head = dynamic_cast<nn::Conv2d*>(linked->layers().back().get());
      REQUIRE(head != nullptr);
      const Tensor images = random_tensor({batch, 3, 64, 64}, DType::F32, gpu, MemoryFormat::NCHW, -1.0, 1.0);
      const Tensor a = linked->forward(images, true), b = apart->forward(images, true);
      CHECK(head->took_output() == (batch == 256));
      CHECK_FALSE(dynamic_cast<nn::Conv2d*>(apart->layers().back().get())->took_output());
      CHECK(same_bytes(a, b));
      // Both gradients (G's pass through D wants the input's, D's passes the weights').
      const Tensor dlogits = random_tensor(a.shape(), a.dtype(), gpu, a.format(), -1.0, 1.0);
      CHECK(same_bytes(linked->backward(dlogits, true, true), apart->backward(dlogits, true, true)));
      auto* last_bn = dynamic_cast<nn::BatchNorm2d*>(linked->layers()[linked->layers().size() - 3].get());
      REQUIRE(last_bn != nullptr);
      CHECK(last_bn->took_outer_gradient());
      const auto pa = linked->params(), pb = apart->params();
      REQUIRE(pa.size() == pb.size());
      for (size_t i = 0; i < pa.size(); ++i) CHECK(same_bytes(pa[i]->model_grad, pb[i]->model_grad));
    }
}
#endif  // GE_WITH_CUDA
