// O4's output gradients and inputs rounded by the BatchNorm that writes them
// (Fusion::Fp8GradientFromBatchNorm, Fp8InputFromBatchNorm, Fp8InputFromConv): the plan links each
// FP8 convolution to the BatchNorm after it and the layer before its input's activation, and a
// network whose BatchNorms round their input gradients (and, on the GPU, their outputs) and whose
// first layer writes a rounded copy of its output computes bitwise what the same
// network computes with the convolutions rounding them in passes of their own, gradients and amax
// histories alike; where the GPU runs a layer's passes from FP8 codes, the layers before and after
// write them, and the layer's results are the f32 passes on the FP8 values it was handed, within
// the FP8 kernels' rounding. Weights formed ahead of the forwards (Sequential::form_fp8_weights)
// are read in place of the weights until dropped.
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#if GE_WITH_CUDA
#include "cuda/conv/conv_phase_dgrad.h"
#endif
#include "ganengine/nn.h"
#include "support/fp8_bound.h"
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

// Random inputs and output gradients of a pass through G (z, image_grad) and through D.
struct PassData {
  Tensor z, image_grad, images, logit_grad;
  PassData(const NetConfig& cfg, Device device, int64_t batch)
      : z(random_tensor({batch, cfg.nz, 1, 1}, DType::F32, device)),
        image_grad(random_tensor({batch, 3, cfg.image_size, cfg.image_size}, DType::F32, device)),
        images(random_tensor({batch, 3, cfg.image_size, cfg.image_size}, DType::F32, device)),
        logit_grad(random_tensor({batch, 1, 1, 1}, DType::F32, device)) {}
};

// The same pass of two identically initialised networks, one with the rounding links cut:
// bitwise the same results.
void check_rounding_changes_nothing(Device device, int64_t batch, int image_size, int64_t width) {
  O4Networks linked(device, image_size, width), cut(device, image_size, width);
  cut_rounding_links(*cut.G);
  cut_rounding_links(*cut.D);
  const PassData data(linked.cfg, device, batch);
  for (auto [net_linked, net_cut, x, dy] : {std::tuple{linked.G.get(), cut.G.get(), data.z, data.image_grad},
                                            std::tuple{linked.D.get(), cut.D.get(), data.images, data.logit_grad}}) {
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

// Each FP8 convolution's weight value scaled by `factor` in place.
void scale_fp8_weights(Sequential& net, float factor) {
  for (auto& layer : net.layers())
    if (layer->layer_kind() == LayerKind::Conv && static_cast<Conv2d*>(layer.get())->fp8())
      ops::scale_inplace(static_cast<Conv2d*>(layer.get())->weight().value, factor);
}

// Weights formed ahead (Sequential::form_fp8_weights) are what the training forwards read, twins
// made meanwhile included: with the weights doubled after forming, a network's pass and its twin's
// are bitwise those of a network that kept its weights and rounds them in each forward, amax
// histories included; dropped, the doubled weights are read (their amaxes doubled). A first pass
// on both sets which layers read the weight's codes, which the forming then writes too (the GPU's
// codes paths), laid out for both passes where the layer's kernels hold the weight in registers
// (`layers_with_fragments` of each network).
void check_formed_weights_are_read(Device device, int64_t batch, int image_size, int64_t width,
                                   int layers_with_fragments) {
  O4Networks formed(device, image_size, width), inline_rounded(device, image_size, width);
  const PassData data(formed.cfg, device, batch);
  for (auto [a, b, x, dy] : {std::tuple{formed.G.get(), inline_rounded.G.get(), data.z, data.image_grad},
                             std::tuple{formed.D.get(), inline_rounded.D.get(), data.images, data.logit_grad}}) {
    pass(*a, x, dy);
    pass(*b, x, dy);
    a->form_fp8_weights();
    int laid_out = 0;
    for (auto& layer : a->layers())
      if (layer->layer_kind() == LayerKind::Conv) {
        const auto* conv = static_cast<const Conv2d*>(layer.get());
        const bool forward = conv->formed_weight_fragments(ops::Fp8WeightPass::Forward).defined();
        CHECK(forward == conv->formed_weight_fragments(ops::Fp8WeightPass::BackwardData).defined());
        laid_out += forward;
      }
    CHECK(laid_out == layers_with_fragments);
    scale_fp8_weights(*a, 2.0f);
    const std::unique_ptr<Sequential> a_twin = a->twin(), b_twin = b->twin();
    const std::vector<Tensor> ra = pass(*a, x, dy), rb = pass(*b, x, dy);
    const std::vector<Tensor> ta = pass(*a_twin, x, dy), tb = pass(*b_twin, x, dy);
    REQUIRE(ra.size() == rb.size());
    REQUIRE(ta.size() == tb.size());
    for (size_t i = 0; i < ra.size(); ++i) {
      CAPTURE(i);
      CHECK(same_bytes(ra[i], rb[i]));
      CHECK(same_bytes(ta[i], tb[i]));
    }
    a->drop_fp8_weights();
    const std::vector<Tensor> da = pass(*a, x, dy), db = pass(*b, x, dy);
    CHECK_FALSE(std::equal(da.begin(), da.end(), db.begin(), same_bytes));  // the weights' amaxes doubled
  }
}

}  // namespace

TEST_CASE("cpu nn: O4 training forwards read the weights as formed ahead until they are dropped") {
  check_formed_weights_are_read(Device::cpu(), 4, 32, 16, 0);
}

TEST_CASE("gpu nn: O4 training forwards read the weights as formed ahead until they are dropped") {
  GE_REQUIRE_GPU();
  // 64x64 at width 64: D's second and third layers read the weights' codes on Hopper (G's fourth
  // and third), on kernels that hold them in registers.
  const bool hopper =
      ops::fp8_weight_pass_reads_fragments({128, 64, 4, 4}, ops::Fp8WeightPass::Forward, Device::cuda(0));
  check_formed_weights_are_read(Device::cuda(0), 16, 64, 64, hopper ? 2 : 0);
}

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
namespace {

// t on the CPU in f32, rounded to FP8 and back with `state`'s scale (the values its codes stand
// for, times scale_inv in f32).
Tensor fp8_values(const Tensor& t, const Fp8Scaling& state) {
  const Tensor f32 = Tensor::from_doubles(t.to_doubles(), t.shape(), DType::F32);
  Tensor out = Tensor::empty(f32.shape(), DType::F32, Device::cpu());
  ops::fp8_round_trip(f32, state.scale.to(Device::cpu()), state.scale_inv.to(Device::cpu()), state.format, out);
  return out;
}

// The values FP8 codes stand for with `state`'s scale_inv, on the CPU in f32.
Tensor code_values(const Tensor& codes, const Fp8Scaling& state) {
  const Tensor c = codes.to(Device::cpu());
  Tensor values = Tensor::empty(c.shape(), DType::F32, Device::cpu(), c.format());
  ops::fp8_dequantize(c, state.scale_inv.to(Device::cpu()), state.format, values);
  return Tensor::from_doubles(values.to_doubles(), values.shape(), DType::F32);
}

// got against the f32 pass `want` on the same FP8 values: within 2^-7 of the pass on their
// magnitudes (`bound`; the FP8 Tensor Cores' sums) plus the rounding of the result to half.
void check_fp8_pass(const char* what, const Tensor& got_t, const Tensor& want_t, const Tensor& bound_t) {
  CAPTURE(what);
  const std::vector<double> got = got_t.to_doubles();
  const std::vector<double> want = want_t.to_doubles(), bound = bound_t.to_doubles();
  REQUIRE(got.size() == want.size());
  CHECK(outside_fp8_bound(got, want, bound, 0x1p-10) == 0);
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  CHECK(norm > 0);
  CHECK(std::sqrt(diff) <= 0x1p-8 * std::sqrt(norm));
}

// `result` against the f32 pass on the FP8 values a and b it was formed from (on the CPU, NCHW):
// pass(a, b, out) forms that pass into out; the same pass on the values' magnitudes bounds it.
template <class Pass>
void check_against_f32_pass(const char* what, const Tensor& result, const Tensor& a, const Tensor& b,
                            const Pass& pass) {
  Tensor want = Tensor::empty(result.shape(), DType::F32), bound = Tensor::empty(result.shape(), DType::F32);
  pass(a, b, want);
  pass(magnitudes(a, MemoryFormat::NCHW), magnitudes(b, MemoryFormat::NCHW), bound);
  check_fp8_pass(what, result, want, bound);
}

// A layer's forward output, input gradient and weight gradient.
struct ThreePasses {
  Tensor y, dx, dw;
};

// A 4x4 stride-2 layer's three results (`got`) against the f32 passes on the FP8 values it read:
// its input xv, weight wv and output gradient dyv (on the CPU, NCHW), as check_fp8_pass bounds them.
void check_three_passes(const ThreePasses& got, const Tensor& xv, const Tensor& wv, const Tensor& dyv,
                        bool transposed) {
  const Conv2dParams p{/*stride=*/2, /*pad=*/1};
  check_against_f32_pass("forward", got.y, xv, wv, [&](const Tensor& x, const Tensor& w, Tensor& out) {
    transposed ? ops::conv_transpose2d_forward(x, w, out, p) : ops::conv2d_forward(x, w, out, p);
  });
  check_against_f32_pass("backward-data", got.dx, dyv, wv, [&](const Tensor& dy, const Tensor& w, Tensor& out) {
    transposed ? ops::conv_transpose2d_backward_data(dy, w, out, p) : ops::conv2d_backward_data(dy, w, out, p);
  });
  check_against_f32_pass("backward-filter", got.dw, xv, dyv, [&](const Tensor& x, const Tensor& dy, Tensor& out) {
    transposed ? ops::conv_transpose2d_backward_filter(x, dy, out, p, 0.f)
               : ops::conv2d_backward_filter(x, dy, out, p, 0.f);
  });
}

}  // namespace

// D at 64x64 with 64 channels: its first layer writes its output's E4M3 codes alone, and its second
// layer (64 -> 128) runs its forward and filter gradient from those and its input gradient from the
// E5M2 codes the BatchNorm after it writes, on FP8 Tensor Cores (ops::fp8_conv2d_runs_on_codes).
// Each of its three results is checked against the f32 pass on the FP8 values the network handed
// it (its input, weight and output gradient rounded with the layer's scales), at fresh scales,
// after an update of them, and with the output gradient's codes not given. (Not against the same network running half
// passes: a change of one ulp of half in D's input moves O4's gradients by tens of percent of their norm, each FP8
// rounding after the layer turning small differences into whole FP8 steps; docs/performance.md.)
// Its third layer (128 -> 256) runs its forward and input gradient from codes, written by the
// BatchNorms beside it beside the rounded values its filter gradient reads in half: checked as the
// second layer's.
// The other layers run no FP8 kernel.
TEST_CASE("gpu nn: O4's D runs its second layer's three passes from FP8 codes on the values the network hands it") {
  GE_REQUIRE_GPU();
  GE_REQUIRE_SM90();
  const Device gpu = Device::cuda(0);
  O4Networks net(gpu, 64, 64);
  auto& layers = net.D->layers();
  auto* second = static_cast<Conv2d*>(layers[2].get());
  auto* third = static_cast<Conv2d*>(layers[5].get());
  Fp8ConvScaling* scaling = nullptr;
  for (const auto& [name, s] : net.D->named_fp8_scalings())
    if (name == "main.2") scaling = s;
  REQUIRE(scaling != nullptr);
  const Tensor images = random_tensor({24, 3, 64, 64}, DType::F32, gpu);
  const Tensor logit_grad = random_tensor({24, 1, 1, 1}, DType::F32, gpu);
  // Rounds 0 and 1 as trained; in round 2 the BatchNorm writes no gradient codes (as with its link
  // cut), and the filter gradient is the half pass on the input codes' values.
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    if (round == 2) static_cast<BatchNorm2d*>(layers[3].get())->round_gradient_for(nullptr);
    Tensor h = images, x_codes, y, third_x_codes, third_y;
    for (size_t i = 0; i < layers.size(); ++i) {
      if (i == 2) {
        // The first layer wrote its output's codes alone (its backward reads them too).
        x_codes = second->given_input_codes();
        CHECK(second->given_input_codes_only());
      }
      if (i == 5) {
        third_x_codes = third->given_input_codes();
        CHECK_FALSE(third->given_input_codes_only());
      }
      h = layers[i]->forward(h, true);
      if (i == 2) y = h;
      if (i == 5) third_y = h;
    }
    REQUIRE(x_codes.defined());
    REQUIRE(third_x_codes.defined());
    CHECK(third->took_input_codes());
    // The third layer's filter gradient runs in half: its gradient's codes asked for beside the values.
    const std::optional<ops::Fp8RoundTrip> third_asked = third->output_gradient_rounding(third_y.shape());
    CHECK((third_asked && third_asked->codes.defined() && !third_asked->codes_only));
    const Fp8ConvScaling* third_scaling = third->fp8();
    REQUIRE(third_scaling != nullptr);
    const Conv2dParams p{/*stride=*/2, /*pad=*/1};
    const Tensor third_wv = fp8_values(third->params()[0]->value, third_scaling->weight);
    check_against_f32_pass("the third layer's forward", third_y, code_values(third_x_codes, third_scaling->input),
                           third_wv,
                           [&](const Tensor& x, const Tensor& w, Tensor& out) { ops::conv2d_forward(x, w, out, p); });
    // Its forward ran from codes, so its output gradient is asked for as codes alone.
    const std::optional<ops::Fp8RoundTrip> asked = second->output_gradient_rounding(y.shape());
    CHECK((asked && asked->codes.defined() && asked->codes_only));
    Tensor dy = logit_grad, third_dy_codes, third_dx;
    for (size_t i = layers.size(); i-- > 3;) {
      if (i == 5) third_dy_codes = third->given_output_gradient_codes();
      dy = layers[i]->backward(dy, true, true);
      if (i == 5) third_dx = dy;
    }
    REQUIRE(third_dy_codes.defined());
    CHECK(third->took_gradient_codes());
    check_against_f32_pass(
        "the third layer's input gradient", third_dx, code_values(third_dy_codes, third_scaling->grad_output), third_wv,
        [&](const Tensor& dy, const Tensor& w, Tensor& out) { ops::conv2d_backward_data(dy, w, out, p); });
    // In rounds 0 and 1 the BatchNorm hands dy's codes, not its values.
    const Tensor dy_codes = second->given_output_gradient_codes();
    CHECK(dy_codes.defined() == (round < 2));
    const Tensor dx = second->backward(dy, true, true);
    const Tensor dw = second->params()[0]->model_grad;
    CHECK(second->took_input_codes());
    CHECK(second->took_gradient_codes() == (round < 2));
    CHECK_FALSE(static_cast<const Conv2d*>(layers[8].get())->took_input_codes());
    CHECK_FALSE(static_cast<const Conv2d*>(layers[8].get())->took_gradient_codes());
    // The FP8 values the layer read: x and its weight rounded with its scales, dy the values of the
    // BatchNorm's codes (round 2: the layer rounds dy itself).
    const Tensor xv = code_values(x_codes, scaling->input);
    const Tensor wv = fp8_values(second->params()[0]->value, scaling->weight);
    const Tensor dyv = round < 2 ? code_values(dy_codes, scaling->grad_output) : fp8_values(dy, scaling->grad_output);
    check_three_passes({y, dx, dw}, xv, wv, dyv, false);
    layers[1]->backward(dx, true, true);
    layers[0]->backward(dx, true, true);
    std::vector<Fp8Scaling> states;
    for (const auto& [name, s] : net.D->named_fp8_scalings())
      states.insert(states.end(), {s->input, s->weight, s->grad_output});
    ops::fp8_update_scales(states, Fp8DelayedScaling{});
  }
}
// G at 64x64 with 64 channels: its fourth layer (128 -> 64 channels, transposed, 16 x 16 inputs)
// runs its three passes from FP8 codes. The BatchNorm before it writes only its input's E4M3 codes
// and the BatchNorm after it only its output gradient's E5M2 codes; its forward (the backward-data
// of the convolution from its output to its input, forming the next BatchNorm's moments), input
// gradient (that convolution's forward) and filter gradient (that convolution's, x and dy swapped)
// run on FP8 Tensor Cores. Each result is checked against the f32 pass on the values of those codes
// and the rounded weight, at fresh scales and after an update of them. Its third layer (256 -> 128,
// 8 x 8 inputs) runs its forward and input gradient from codes (that convolution's backward-data
// and forward, from the E4M3 and E5M2 codes the BatchNorms beside it write beside the rounded
// values its filter gradient reads): checked alike.
TEST_CASE("gpu nn: O4's G runs its fourth layer's three passes from the FP8 codes the BatchNorms beside it write") {
  GE_REQUIRE_GPU();
  GE_REQUIRE_SM90();
  const Device gpu = Device::cuda(0);
  O4Networks net(gpu, 64, 64);
  auto& layers = net.G->layers();
  auto* fourth = static_cast<Conv2d*>(layers[9].get());
  REQUIRE(fourth->transposed());
  const Fp8ConvScaling* scaling = fourth->fp8();
  REQUIRE(scaling != nullptr);
  const Tensor z = random_tensor({24, net.cfg.nz, 1, 1}, DType::F32, gpu);
  const Tensor image_grad = random_tensor({24, 3, 64, 64}, DType::F32, gpu);
  for (int round = 0; round < 2; ++round) {
    CAPTURE(round);
    auto* third = static_cast<Conv2d*>(layers[6].get());
    Tensor h = z, x_codes, y, third_x_codes, third_y;
    for (size_t i = 0; i < layers.size(); ++i) {
      if (i == 9) x_codes = fourth->given_input_codes();
      if (i == 6) {
        third_x_codes = third->given_input_codes();
        CHECK_FALSE(third->given_input_codes_only());
      }
      h = layers[i]->forward(h, true);
      if (i == 9) y = h;
      if (i == 6) third_y = h;
    }
    REQUIRE(third_x_codes.defined());
    CHECK(third->took_input_codes());
    const Fp8ConvScaling* third_scaling = third->fp8();
    REQUIRE(third_scaling != nullptr);
    const Conv2dParams p{/*stride=*/2, /*pad=*/1};
    const Tensor third_wv = fp8_values(third->params()[0]->value, third_scaling->weight);
    check_against_f32_pass(
        "the third layer's forward", third_y, code_values(third_x_codes, third_scaling->input), third_wv,
        [&](const Tensor& x, const Tensor& w, Tensor& out) { ops::conv_transpose2d_forward(x, w, out, p); });
    REQUIRE(x_codes.defined());
    CHECK(fourth->took_input_codes());
    CHECK(static_cast<const BatchNorm2d*>(layers[10].get())->took_moments());
    Tensor dy = image_grad;
    for (size_t i = layers.size(); i-- > 10;) dy = layers[i]->backward(dy, true, true);
    const Tensor dy_codes = fourth->given_output_gradient_codes();
    REQUIRE(dy_codes.defined());
    const Tensor dx = fourth->backward(dy, true, true);
    const Tensor dw = fourth->params()[0]->model_grad;
    CHECK(fourth->took_gradient_codes());
    const Tensor xv = code_values(x_codes, scaling->input), dyv = code_values(dy_codes, scaling->grad_output);
    const Tensor wv = fp8_values(fourth->params()[0]->value, scaling->weight);
    check_three_passes({y, dx, dw}, xv, wv, dyv, true);
    Tensor third_dy_codes, third_dx;
    h = dx;
    for (size_t i = 9; i-- > 0;) {
      if (i == 6) third_dy_codes = third->given_output_gradient_codes();
      h = layers[i]->backward(h, true, i > 0);
      if (i == 6) third_dx = h;
    }
    for (size_t i : {0, 3}) {
      CHECK_FALSE(static_cast<const Conv2d*>(layers[i].get())->took_input_codes());
      CHECK_FALSE(static_cast<const Conv2d*>(layers[i].get())->took_gradient_codes());
    }
    REQUIRE(third_dy_codes.defined());
    CHECK(third->took_gradient_codes());
    check_against_f32_pass(
        "the third layer's input gradient", third_dx, code_values(third_dy_codes, third_scaling->grad_output), third_wv,
        [&](const Tensor& dy, const Tensor& w, Tensor& out) { ops::conv_transpose2d_backward_data(dy, w, out, p); });
    std::vector<Fp8Scaling> states;
    for (const auto& [name, s] : net.G->named_fp8_scalings())
      states.insert(states.end(), {s->input, s->weight, s->grad_output});
    ops::fp8_update_scales(states, Fp8DelayedScaling{});
  }
}
#endif
