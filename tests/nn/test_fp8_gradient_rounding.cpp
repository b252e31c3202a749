// O4's output gradients and inputs rounded by the BatchNorm that writes them
// (Fusion::Fp8GradientFromBatchNorm, Fp8InputFromBatchNorm, Fp8InputFromConv): the plan links each
// FP8 convolution to the BatchNorm after it and the layer before its input's activation, and a
// network whose BatchNorms round their input gradients (and, on the GPU, their outputs) and whose
// first layer writes a rounded copy of its output computes bitwise what the same
// network computes with the convolutions rounding them in passes of their own, gradients and amax
// histories alike; where the
// GPU runs a layer's backward-data from FP8 codes, the BatchNorm writes them and only what depends
// on that backward-data moves, within the FP8 kernel's rounding.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#if GE_WITH_CUDA
#include "cuda/conv/conv_phase_dgrad.h"
#endif
#include "ganengine/nn.h"
#include "support/test_util.h"

using namespace ge;
using namespace ge::nn;
using namespace ge::test;

namespace {

struct O4Networks {
  PrecisionPolicy policy = resolve_policy(OptLevel::O4);
  Placement where;
  NetConfig cfg;
  std::unique_ptr<Sequential> G, D;
  O4Networks(Device device, int image_size, int64_t width)
      : where(Placement::for_device(device, policy.compute_dtype)) {
    cfg.image_size = image_size;
    cfg.ngf = cfg.ndf = width;
    G = make_generator(cfg, policy, where);
    D = make_discriminator(cfg, policy, where);
    weights_init(*G, 1, 0);
    weights_init(*D, 2, 0);
  }
};

// Every link of the plan of that kind.
std::vector<std::string> rounding_links(const Sequential& net,
                                        Fusion::Kind kind = Fusion::Kind::Fp8GradientFromBatchNorm) {
  std::vector<std::string> out;
  for (const Fusion& f : net.fusion())
    if (f.kind == kind) out.push_back(f.describe());
  return out;
}

void cut_rounding_links(Sequential& net) {
  for (auto& layer : net.layers())
    if (layer->layer_kind() == LayerKind::BatchNorm) {
      static_cast<BatchNorm2d*>(layer.get())->round_gradient_for(nullptr);
      static_cast<BatchNorm2d*>(layer.get())->round_output_for(nullptr);
    } else if (layer->layer_kind() == LayerKind::Conv) {
      static_cast<Conv2d*>(layer.get())->round_output_for(nullptr);
    }
}

// One training forward and backward of `net` from x with output gradient dy: every parameter's
// gradient, the input gradient, then every FP8 state's amax history, in order.
std::vector<Tensor> pass(Sequential& net, const Tensor& x, const Tensor& dy) {
  net.forward(x, true);
  std::vector<Tensor> out{net.backward(dy, true, true)};
  for (Param* p : net.params()) out.push_back(p->model_grad);
  for (const auto& [name, s] : net.named_fp8_scalings())
    for (const Fp8Scaling* state : {&s->input, &s->weight, &s->grad_output}) out.push_back(state->amax_history);
  return out;
}

// The same pass of two identically initialised networks, one with the rounding links cut:
// bitwise the same results.
void check_rounding_changes_nothing(Device device, int64_t batch, int image_size, int64_t width) {
  O4Networks linked(device, image_size, width), cut(device, image_size, width);
  cut_rounding_links(*cut.G);
  cut_rounding_links(*cut.D);
  const Tensor z = random_tensor({batch, linked.cfg.nz, 1, 1}, DType::F32, device);
  const Tensor image_grad = random_tensor({batch, 3, image_size, image_size}, DType::F32, device);
  const Tensor images = random_tensor({batch, 3, image_size, image_size}, DType::F32, device);
  const Tensor logit_grad = random_tensor({batch, 1, 1, 1}, DType::F32, device);
  for (auto [net_linked, net_cut, x, dy] : {std::tuple{linked.G.get(), cut.G.get(), z, image_grad},
                                            std::tuple{linked.D.get(), cut.D.get(), images, logit_grad}}) {
    const std::vector<Tensor> a = pass(*net_linked, x, dy), b = pass(*net_cut, x, dy);
    // Every linked convolution took its gradient rounded; with the links cut, none did.
    size_t rounded = 0;
    for (const Fusion& f : net_linked->fusion()) {
      if (f.kind != Fusion::Kind::Fp8GradientFromBatchNorm) continue;
      ++rounded;
      CHECK(static_cast<const Conv2d*>(net_linked->layers()[f.partner].get())->took_rounded_gradient());
      CHECK_FALSE(static_cast<const Conv2d*>(net_cut->layers()[f.partner].get())->took_rounded_gradient());
    }
    CHECK(rounded >= 2);
    // The BatchNorms round the convolutions' inputs where the backward never reads their output
    // (on the GPU: 16-bit activations, ReLU and LeakyReLU); D's first layer writes a rounded copy.
    size_t inputs = 0;
    for (const Fusion& f : net_linked->fusion()) {
      const bool from_conv = f.kind == Fusion::Kind::Fp8InputFromConv;
      if (f.kind != Fusion::Kind::Fp8InputFromBatchNorm && !from_conv) continue;
      ++inputs;
      CHECK(static_cast<const Conv2d*>(net_linked->layers()[f.partner].get())->took_rounded_input() ==
            (from_conv || device.is_cuda()));
      CHECK_FALSE(static_cast<const Conv2d*>(net_cut->layers()[f.partner].get())->took_rounded_input());
    }
    CHECK(inputs >= 1);
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      CAPTURE(i);
      CHECK(same_bytes(a[i], b[i]));
    }
  }
}

}  // namespace

TEST_CASE("fusion plan: at O4 the BatchNorms beside each FP8 convolution round its output gradient and its input") {
  O4Networks n(Device::cpu(), 64, 64);
  CHECK(rounding_links(*n.G) == std::vector<std::string>{
                                    "FP8 output gradient rounded by BatchNorm: layer 1 -> 0",
                                    "FP8 output gradient rounded by BatchNorm: layer 4 -> 3",
                                    "FP8 output gradient rounded by BatchNorm: layer 7 -> 6",
                                    "FP8 output gradient rounded by BatchNorm: layer 10 -> 9",
                                });
  CHECK(rounding_links(*n.D) == std::vector<std::string>{
                                    "FP8 output gradient rounded by BatchNorm: layer 3 -> 2",
                                    "FP8 output gradient rounded by BatchNorm: layer 6 -> 5",
                                    "FP8 output gradient rounded by BatchNorm: layer 9 -> 8",
                                });
  CHECK(rounding_links(*n.G, Fusion::Kind::Fp8InputFromBatchNorm) == std::vector<std::string>{
                                                                         "FP8 input rounded by BatchNorm: layer 1 -> 3",
                                                                         "FP8 input rounded by BatchNorm: layer 4 -> 6",
                                                                         "FP8 input rounded by BatchNorm: layer 7 -> 9",
                                                                     });
  CHECK(rounding_links(*n.D, Fusion::Kind::Fp8InputFromBatchNorm) == std::vector<std::string>{
                                                                         "FP8 input rounded by BatchNorm: layer 3 -> 5",
                                                                         "FP8 input rounded by BatchNorm: layer 6 -> 8",
                                                                     });
  CHECK(rounding_links(*n.D, Fusion::Kind::Fp8InputFromConv) ==
        std::vector<std::string>{"FP8 input rounded by convolution: layer 0 -> 2"});
  CHECK(rounding_links(*n.G, Fusion::Kind::Fp8InputFromConv).empty());
  auto& layers = n.D->layers();
  CHECK(static_cast<const BatchNorm2d*>(layers[3].get())->rounds_gradient_for() == layers[2].get());
  // A twin's BatchNorms round for the twin's own convolutions.
  auto twin = n.D->twin();
  CHECK(static_cast<const BatchNorm2d*>(twin->layers()[3].get())->rounds_gradient_for() == twin->layers()[2].get());
  CHECK(static_cast<const BatchNorm2d*>(twin->layers()[3].get())->rounds_output_for() == twin->layers()[5].get());
  CHECK(static_cast<const Conv2d*>(twin->layers()[0].get())->rounds_output_for() == twin->layers()[2].get());
  // Below O4 no layer rounds.
  const PrecisionPolicy o2 = resolve_policy(OptLevel::O2);
  const NetConfig cfg;
  const auto o2_d = make_discriminator(cfg, o2, Placement::for_device(Device::cpu(), o2.compute_dtype));
  CHECK(rounding_links(*o2_d).empty());
  CHECK(rounding_links(*o2_d, Fusion::Kind::Fp8InputFromBatchNorm).empty());
  CHECK(rounding_links(*o2_d, Fusion::Kind::Fp8InputFromConv).empty());
}

TEST_CASE("cpu nn: O4 gradients and inputs rounded by the BatchNorms are bitwise the convolutions' own rounding") {
  check_rounding_changes_nothing(Device::cpu(), 4, 32, 16);
}

TEST_CASE("gpu nn: O4 gradients and inputs rounded by the BatchNorms are bitwise the convolutions' own rounding") {
  GE_REQUIRE_GPU();
  // Batch 64 at 32x32 takes BatchNorm's one-launch kernels, batch 256 its three-launch ones.
  for (int64_t batch : {64, 256}) {
    CAPTURE(batch);
    check_rounding_changes_nothing(Device::cuda(0), batch, 32, 64);
  }
}

#if GE_WITH_CUDA
// D at 64x64 with 64 channels: its second layer (64 -> 128) takes its input gradient from the E5M2
// codes the BatchNorm after it writes, on FP8 Tensor Cores (ops::fp8_conv2d_backward_data_beats_half);
// with the links cut it rounds dy itself and runs the half pass. Everything but that input gradient
// and what is formed from it (D's input gradient, its first layer's weight gradient) is bitwise the
// same; those two agree within the rounding of the operands to half that the half pass reads.
TEST_CASE("gpu nn: O4's D reads its second layer's output gradient as FP8 codes and the other gradients stay bitwise") {
  GE_REQUIRE_GPU();
  GE_REQUIRE_SM90();
  const Device gpu = Device::cuda(0);
  O4Networks linked(gpu, 64, 64), cut(gpu, 64, 64);
  cut_rounding_links(*cut.D);
  const Tensor images = random_tensor({24, 3, 64, 64}, DType::F32, gpu);
  const Tensor logit_grad = random_tensor({24, 1, 1, 1}, DType::F32, gpu);
  const std::vector<Tensor> a = pass(*linked.D, images, logit_grad), b = pass(*cut.D, images, logit_grad);
  const auto* second = static_cast<const Conv2d*>(linked.D->layers()[2].get());
  CHECK(second->took_gradient_codes());
  CHECK_FALSE(static_cast<const Conv2d*>(cut.D->layers()[2].get())->took_gradient_codes());
  // No other layer reads codes: the other shapes have no FP8 kernel faster than half.
  for (size_t i : {5, 8}) CHECK_FALSE(static_cast<const Conv2d*>(linked.D->layers()[i].get())->took_gradient_codes());
  REQUIRE(a.size() == b.size());
  // a[0]: D's input gradient; a[1]: its first layer's weight gradient (params() in layer order).
  for (size_t i = 0; i < 2; ++i) {
    CAPTURE(i);
    const std::vector<double> got = a[i].to(Device::cpu()).to_doubles(), want = b[i].to(Device::cpu()).to_doubles();
    double worst = 0, scale = 0;
    for (size_t k = 0; k < want.size(); ++k) {
      worst = std::isfinite(got[k]) ? std::max(worst, std::fabs(got[k] - want[k])) : INFINITY;
      scale = std::max(scale, std::fabs(want[k]));
    }
    CHECK(scale > 0);
    CHECK(worst <= 0x1p-7 * scale);
  }
  for (size_t i = 2; i < a.size(); ++i) {
    CAPTURE(i);
    CHECK(same_bytes(a[i], b[i]));
  }
}
#endif
