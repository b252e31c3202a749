// A convolution taking its input gradient on through the activation before it
// (ops::conv2d_backward_data_through, Conv2d::take_gradient_through_activation_of): D's second
// layer through D's first LeakyReLU on Hopper's phase kernel, D's first layer through G's Tanh on
// the 8-channel kernels. Bitwise the backward-data followed by activation_backward, and D's
// gradients bitwise those of a D whose layers are not linked.
#include <cmath>
#include <limits>

#include "ganengine/amp.h"
#include "ganengine/backend.h"
#include "ganengine/nn.h"
#include "test_util.h"
#if GE_WITH_CUDA
#include "conv_phase_dgrad.h"
#endif

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

// Every convolution of `net` taking the gradient through the activation before it: its index
// and that layer's.
std::vector<std::pair<size_t, size_t>> activation_links(nn::Sequential& net) {
  std::vector<std::pair<size_t, size_t>> links;
  auto& layers = net.layers();
  for (size_t i = 0; i < layers.size(); ++i)
    if (auto* conv = dynamic_cast<nn::Conv2d*>(layers[i].get()); conv && conv->activation_of())
      for (size_t j = 0; j < layers.size(); ++j)
        if (layers[j].get() == conv->activation_of()) links.emplace_back(i, j);
  return links;
}

void unlink_activation_gradients(nn::Sequential& net) {
  for (auto& layer : net.layers())
    if (auto* conv = dynamic_cast<nn::Conv2d*>(layer.get())) conv->take_gradient_through_activation_of(nullptr);
}

}  // namespace

TEST_CASE("activation gradient link: D's second layer links to its first and twins to the twin's - the CPU runs two ops") {
  const PrecisionPolicy policy = resolve_policy(OptLevel::O2);
  const nn::Placement where = nn::Placement::for_device(Device::cpu(), policy.compute_dtype);
  auto D = nn::make_discriminator(small_net(), policy, where), G = nn::make_generator(small_net(), policy, where);
  auto twin = D->twin();
  using Links = std::vector<std::pair<size_t, size_t>>;
  // main.0 Conv2d(3, 4) and its LeakyReLU (main.1); main.2 Conv2d(4, 8) after it. Only there:
  // the later convolutions follow BatchNorms.
  CHECK(activation_links(*D) == Links{{2, 0}});
  CHECK(activation_links(*twin) == Links{{2, 0}});  // the twin's own layers, not D's
  CHECK(activation_links(*G).empty());

  // The CPU has no kernel forming both: the op declines, having written nothing.
  const Tensor dy = random_tensor({2, 8, 4, 4}, DType::F32), w = random_tensor({8, 4, 4, 4}, DType::F32);
  const Tensor y = random_tensor({2, 4, 8, 8}, DType::F32);
  Tensor dx = Tensor::zeros({2, 4, 8, 8}, DType::F32);
  const ops::InputActivation leaky{{ops::Activation::LeakyReLU, 0.2f}, y};
  CHECK_FALSE(ops::conv2d_backward_data_through(dy, w, dx, Conv2dParams{2, 1}, leaky));
  CHECK(rel_error(dx, Tensor::zeros({2, 4, 8, 8}, DType::F32)) == 0.0);
  const ops::InputActivation wrong{{ops::Activation::LeakyReLU, 0.2f}, random_tensor({2, 4, 4, 4}, DType::F32)};
  CHECK_THROWS_WITH_AS(ops::conv2d_backward_data_through(dy, w, dx, Conv2dParams{2, 1}, wrong),
                       doctest::Contains("must match dx"), Error);

  // So a CPU D's gradients are those of an unlinked D, and its first layer takes its own
  // activation's gradient.
  auto apart = nn::make_discriminator(small_net(), policy, where);
  unlink_activation_gradients(*apart);
  nn::weights_init(*D, 3, 0);
  nn::weights_init(*apart, 3, 0);
  const Tensor images = random_tensor({4, 3, 16, 16}, DType::F32);
  const Tensor a = D->forward(images, true), b = apart->forward(images, true);
  const Tensor dlogits = random_tensor(a.shape(), a.dtype(), a.device(), a.format(), -1.0, 1.0);
  CHECK(same_bytes(D->backward(dlogits, true, true), apart->backward(dlogits, true, true)));
  CHECK_FALSE(dynamic_cast<nn::Conv2d*>(D->layers()[0].get())->received_activated_gradient());
  const auto pa = D->params(), pb = apart->params();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) CHECK(same_bytes(pa[i]->model_grad, pb[i]->model_grad));
}

#if GE_WITH_CUDA
// The phase kernel's shape (D's second layer at 64x64, ndf 64): 4 images (two blocks each) and
// 160 (several items a block). y holds zeros, negative zeros, subnormals, infinities and NaNs:
// LeakyReLU's gradient keeps dy where y > 0 and scales it elsewhere, NaN included.
TEST_CASE("gpu ops: the phase kernel taking dx through a LeakyReLU is bitwise backward-data then its gradient") {
  GE_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  const Conv2dParams p{2, 1};
  const ops::FusedActivation leaky{ops::Activation::LeakyReLU, 0.2f};
  for (int64_t n : {4, 160}) {
    CAPTURE(n);
    const Tensor w = random_tensor({128, 64, 4, 4}, DType::F16, gpu, MemoryFormat::NHWC, -1.0, 1.0);
    const Tensor dy = random_tensor({n, 128, 16, 16}, DType::F16, gpu, MemoryFormat::NHWC, -1.0, 1.0);
    Tensor y_host = random_tensor({n, 64, 32, 32}, DType::F16, Device::cpu(), MemoryFormat::NHWC, -1.0, 1.0);
    {
      std::vector<double> v = y_host.to_doubles();
      const double specials[] = {0.0, -0.0, 6e-8, -6e-8, INFINITY, -INFINITY, std::nan("")};
      for (size_t i = 0; i < v.size(); i += 97) v[i] = specials[(i / 97) % 7];
      y_host = Tensor::from_doubles(v, y_host.shape(), DType::F16, Device::cpu(), MemoryFormat::NHWC);
    }
    const Tensor y = y_host.to(gpu);
    Tensor fused = Tensor::empty({n, 64, 32, 32}, DType::F16, gpu, MemoryFormat::NHWC);
    poison(fused);
    const bool ran = ops::conv2d_backward_data_through(dy, w, fused, p, ops::InputActivation{leaky, y});
    if (!gpu::device_is_sm90(0)) {
      MESSAGE("the phase kernel runs on compute capability 9.0 only: checked that the op declines");
      CHECK_FALSE(ran);
      continue;
    }
    REQUIRE(ran);
    Tensor plain = Tensor::empty(fused.shape(), DType::F16, gpu, MemoryFormat::NHWC);
    ops::conv2d_backward_data(dy, w, plain, p);
    ops::activation_backward(leaky.kind, y, plain, plain, leaky.negative_slope);
    CHECK(same_bytes(fused, plain));
    Tensor again = Tensor::empty(fused.shape(), DType::F16, gpu, MemoryFormat::NHWC);
    poison(again);
    REQUIRE(ops::conv2d_backward_data_through(dy, w, again, p, ops::InputActivation{leaky, y}));
    CHECK(same_bytes(again, fused));
  }
  // What the kernel does not take it declines, having run nothing: another activation, bf16, y
  // being dx itself (the kernel reads y where it writes dx), other channel counts.
  const Tensor w = random_tensor({128, 64, 4, 4}, DType::F16, gpu, MemoryFormat::NHWC, -1.0, 1.0);
  const Tensor dy = random_tensor({2, 128, 16, 16}, DType::F16, gpu, MemoryFormat::NHWC, -1.0, 1.0);
  Tensor dx = Tensor::zeros({2, 64, 32, 32}, DType::F16, gpu, MemoryFormat::NHWC);
  const Tensor y = random_tensor({2, 64, 32, 32}, DType::F16, gpu, MemoryFormat::NHWC, -1.0, 1.0);
  const Tensor zeros = Tensor::zeros({2, 64, 32, 32}, DType::F16, gpu, MemoryFormat::NHWC);
  CHECK_FALSE(ops::conv2d_backward_data_through(dy, w, dx, p, ops::InputActivation{{ops::Activation::ReLU, 0.f}, y}));
  CHECK_FALSE(ops::conv2d_backward_data_through(dy, w, dx, p, ops::InputActivation{leaky, dx}));
  CHECK(same_bytes(dx, zeros));
  const Tensor wb = random_tensor({128, 64, 4, 4}, DType::BF16, gpu, MemoryFormat::NHWC, -1.0, 1.0);
  const Tensor dyb = random_tensor({2, 128, 16, 16}, DType::BF16, gpu, MemoryFormat::NHWC, -1.0, 1.0);
  Tensor dxb = Tensor::zeros({2, 64, 32, 32}, DType::BF16, gpu, MemoryFormat::NHWC);
  const Tensor yb = random_tensor({2, 64, 32, 32}, DType::BF16, gpu, MemoryFormat::NHWC, -1.0, 1.0);
  CHECK_FALSE(ops::conv2d_backward_data_through(dyb, wb, dxb, p, ops::InputActivation{leaky, yb}));
  const Tensor w96 = random_tensor({96, 64, 4, 4}, DType::F16, gpu, MemoryFormat::NHWC, -1.0, 1.0);
  const Tensor dy96 = random_tensor({2, 96, 16, 16}, DType::F16, gpu, MemoryFormat::NHWC, -1.0, 1.0);
  CHECK_FALSE(ops::conv2d_backward_data_through(dy96, w96, dx, p, ops::InputActivation{leaky, y}));
  CHECK(same_bytes(dx, zeros));
}

// D's first layer in G's pass through D: its backward-data into the image's 3 channels, taken
// through G's Tanh, by the narrow 8-channel kernel.
TEST_CASE("gpu ops: the 8-channel backward-data taking dx through G's Tanh is bitwise backward-data then its gradient") {
  GE_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  const Conv2dParams p{2, 1};
  const ops::FusedActivation tanh_act{ops::Activation::Tanh, 0.f};
  for (int64_t n : {3, 64}) {
    CAPTURE(n);
    const Tensor w = random_tensor({64, 3, 4, 4}, DType::F16, gpu, MemoryFormat::NHWC, -1.0, 1.0);
    const Tensor dy = random_tensor({n, 64, 32, 32}, DType::F16, gpu, MemoryFormat::NHWC, -1.0, 1.0);
    const Tensor y = random_tensor({n, 3, 64, 64}, DType::F16, gpu, MemoryFormat::NHWC, -1.0, 1.0);
    Tensor fused = Tensor::empty({n, 3, 64, 64}, DType::F16, gpu, MemoryFormat::NHWC);
    poison(fused);
    REQUIRE(ops::conv2d_backward_data_through(dy, w, fused, p, ops::InputActivation{tanh_act, y}));
    Tensor plain = Tensor::empty(fused.shape(), DType::F16, gpu, MemoryFormat::NHWC);
    ops::conv2d_backward_data(dy, w, plain, p);
    ops::activation_backward(tanh_act.kind, y, plain, plain, 0.f);
    CHECK(same_bytes(fused, plain));
  }
}

// D at the example's width: its second layer takes its input gradient through the first layer's
// LeakyReLU (on Hopper, where the phase kernel runs), in the three passes a step makes of it (D on
// data and on fake.detach(): the weights' gradients; G's pass: the input's, through G's Tanh), at
// O1-O3; the logits and every gradient bitwise those of a D whose layers are not linked.
TEST_CASE("gpu discriminator: the second layer takes the first's activation gradient and matches it taken apart") {
  GE_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  const bool hopper = gpu::device_is_sm90(0);
  if (!hopper) MESSAGE("not compute capability 9.0: checking that D's first layer takes its own gradient");
  const ops::FusedActivation tanh_act{ops::Activation::Tanh, 0.f};
  for (OptLevel level : {OptLevel::O2, OptLevel::O1, OptLevel::O3})
    for (int64_t batch : {64, 256}) {
      CAPTURE(batch);
      CAPTURE(static_cast<int>(level));
      const PrecisionPolicy policy = resolve_policy(level);
      const nn::Placement where = nn::Placement::for_device(gpu, policy.compute_dtype);
      const nn::NetConfig cfg;  // 64x64, ndf 64
      auto linked = nn::make_discriminator(cfg, policy, where), apart = nn::make_discriminator(cfg, policy, where);
      unlink_activation_gradients(*apart);
      nn::weights_init(*linked, 13, 0);
      nn::weights_init(*apart, 13, 0);
      for (auto* net : {linked.get(), apart.get()})
        dynamic_cast<nn::Conv2d*>(net->layers()[0].get())->take_input_gradient_through(tanh_act);
      auto* first = dynamic_cast<nn::Conv2d*>(linked->layers()[0].get());
      // G's output: Tanh's, in (-1, 1), in the compute dtype and layout, as D's first layer gets it.
      const Tensor fake = ops::converted(random_tensor({batch, 3, 64, 64}, DType::F32, gpu, MemoryFormat::NCHW, -0.99, 0.99),
                                         policy.compute_dtype, where.format, gpu);
      struct Pass {
        bool params, input;
      };
      for (const Pass pass : {Pass{true, false}, Pass{false, true}, Pass{true, true}}) {
        CAPTURE(pass.params);
        CAPTURE(pass.input);
        const Tensor a = linked->forward(fake, true), b = apart->forward(fake, true);
        CHECK(same_bytes(a, b));
        const Tensor dlogits = random_tensor(a.shape(), a.dtype(), gpu, a.format(), -1.0, 1.0);
        const Tensor da = linked->backward(dlogits, pass.params, pass.input);
        const Tensor db = apart->backward(dlogits, pass.params, pass.input);
        CHECK(first->received_activated_gradient() == hopper);
        CHECK_FALSE(dynamic_cast<nn::Conv2d*>(apart->layers()[0].get())->received_activated_gradient());
        if (pass.input) CHECK(same_bytes(da, db));
        if (!pass.params) continue;
        const auto pa = linked->params(), pb = apart->params();
        REQUIRE(pa.size() == pb.size());
        for (size_t i = 0; i < pa.size(); ++i) CHECK(same_bytes(pa[i]->model_grad, pb[i]->model_grad));
      }
    }
}
#endif  // GE_WITH_CUDA
