// The FP8 convolutions on Hopper's warpgroup MMA (kernels/cuda/conv/fp8_conv_wgmma.h) against the
// CPU emulation (ops::fp8_conv2d_*):
//  - with codes -1, 0 and 1 and unit scales every sum is a small integer, exact in any order and
//    in the MMAs' accumulators, so the results must be bitwise the CPU's: this pins down the
//    operand layouts, taps, borders, phases and tails;
//  - with random values and recipe scales, within 2^-7 of the sum of the products' magnitudes,
//    element by element: the MMAs add in their own order and precision, and apply both
//    scale_invs once to the sum instead of to each operand;
//  - f16 results are the f32 results rounded once; a second run gives the same bytes; the ops
//    reach the kernels; shapes they do not take run the emulation;
//  - the 128 -> 64-channel backward-data and the 64 -> 128-channel forward into f16 run on the
//    phase kernels (conv_phase_dgrad.h, conv_phase_fprop.h), other kernels than their f32 forms:
//    their f16 results are held to the bound plus one rounding;
//  - the 64 -> 128-channel backward-filter (conv_fp8_wgrad.h) the same way, overwriting dw and
//    accumulating onto it.
#if GE_WITH_CUDA
#include <cmath>
#include <string>
#include <vector>

#include "cuda/conv/conv_fp8_wgrad.h"
#include "cuda/conv/conv_phase_dgrad.h"
#include "cuda/conv/conv_phase_fprop.h"
#include "cuda/conv/fp8_conv_wgmma.h"
#include "ganengine/fp8.h"
#include "ganengine/ops.h"
#include "support/fp8_bound.h"
#include "support/test_util.h"

using namespace ge;
using namespace ge::test;

namespace {

const Device kCpu = Device::cpu();
const Device kGpu = Device::cuda(0);

// An FP8 operand on both devices, quantized once on the CPU.
struct Operand {
  Fp8Tensor cpu, gpu;
};

Fp8Tensor on(const Fp8Tensor& t, Device d) { return {t.data.to(d), t.scale_inv.to(d), t.format}; }

// Codes of -1, 0 and 1 with scale 1 (a fresh state's).
Operand unit_codes(const Shape& shape, Fp8Format format) {
  std::vector<double> v = random_values(shape_numel(shape));
  for (double& x : v) x = std::round(1.4 * x);
  const Tensor values = Tensor::from_doubles(v, shape, DType::F32, kCpu, MemoryFormat::NHWC);
  const Fp8Scaling state = make_fp8_scaling(format, Fp8DelayedScaling{}, kCpu);
  const Fp8Tensor q = ops::fp8_quantized(values, state);
  return {q, on(q, kGpu)};
}

// Values in [-magnitude, magnitude) with the scale the recipe gives them after one step.
Operand recipe_scaled(const Shape& shape, Fp8Format format, double magnitude) {
  const Tensor values = random_tensor(shape, DType::F32, kCpu, MemoryFormat::NHWC, -magnitude, magnitude);
  const Fp8DelayedScaling recipe;
  const Fp8Scaling state = make_fp8_scaling(format, recipe, kCpu);
  ops::fp8_quantized(values, state);  // records the amax
  ops::fp8_update_scales({state}, recipe);
  const Fp8Tensor q = ops::fp8_quantized(values, state);
  return {q, on(q, kGpu)};
}

// The magnitudes of q's values, NHWC as the kernels' operands.
Tensor magnitudes(const Fp8Tensor& q) { return test::magnitudes(ops::fp8_dequantized(q), MemoryFormat::NHWC); }

// The two passes the kernels take: through the op, through the kernel alone (false: not taken),
// and the f32 pass of magnitudes that bounds their difference.
using Pass = ops::Fp8WeightPass;

void through_op(Pass pass, const Fp8Tensor& a, const Fp8Tensor& w, Tensor& out, const Conv2dParams& p) {
  if (pass == Pass::Forward)
    ops::fp8_conv2d_forward(a, w, out, p);
  else
    ops::fp8_conv2d_backward_data(a, w, out, p);
}

bool through_kernel(Pass pass, const Fp8Tensor& a, const Fp8Tensor& w, Tensor& out, const Conv2dParams& p) {
  return pass == Pass::Forward ? gpu::fp8_conv2d_forward_wgmma(a, w, out, p)
                               : gpu::fp8_conv2d_backward_data_wgmma(a, w, out, p);
}

// The phase kernel of the pass, into f16 (false: not taken).
bool through_phases(Pass pass, const Fp8Tensor& a, const Fp8Tensor& w, Tensor& out, const Conv2dParams& p) {
  return pass == Pass::Forward
             ? gpu::fp8_conv2d_forward_phases(a, w, out, p) || gpu::fp8_conv2d_forward_resident(a, w, out, p)
             : gpu::fp8_conv2d_backward_data_phases(a, w, out, p) ||
                   gpu::fp8_conv2d_backward_data_resident(a, w, out, p);
}

void of_magnitudes(Pass pass, const Tensor& a, const Tensor& w, Tensor& out, const Conv2dParams& p) {
  if (pass == Pass::Forward)
    ops::conv2d_forward(a, w, out, p);
  else
    ops::conv2d_backward_data(a, w, out, p);
}

// w with its fragments for `pass` laid out ahead.
Fp8Tensor laid_out(const Fp8Tensor& w, Pass pass) {
  Fp8Tensor out = w;
  out.fragments = Tensor::empty({w.data.numel()}, DType::U8, w.data.device());
  ops::fp8_weight_fragments_all({{w.data, pass, out.fragments}});
  return out;
}

struct Case {
  std::string name;
  Shape a, w, out;
  Fp8Format a_format;
  Conv2dParams p;
  bool half_by_phases = false;  // f16 results from a phase kernel, f32 from the implicit GEMMs
};

// One case through the kernel: exact with unit codes, within the bound with recipe scales, f16
// rounded from f32, the same bytes twice, and the op giving the kernel's bytes.
void check_case(const Case& c, Pass pass) {
  const auto op = [&](const Fp8Tensor& a, const Fp8Tensor& w, Tensor& out) { through_op(pass, a, w, out, c.p); };
  const auto kernel = [&](const Fp8Tensor& a, const Fp8Tensor& w, Tensor& out) {
    return through_kernel(pass, a, w, out, c.p);
  };
  CAPTURE(c.name);
  {
    const Operand a = unit_codes(c.a, c.a_format), w = unit_codes(c.w, Fp8Format::E4M3);
    Tensor want = Tensor::empty(c.out, DType::F32, kCpu, MemoryFormat::NHWC);
    op(a.cpu, w.cpu, want);
    Tensor got = poisoned_like(want, kGpu);
    REQUIRE(kernel(a.gpu, w.gpu, got));
    CHECK(same_bytes(got.to(kCpu), want));
    Tensor want_half = Tensor::empty(c.out, DType::F16, kCpu, MemoryFormat::NHWC);
    ops::cast(want, want_half);
    Tensor got_half = poisoned_like(want_half, kGpu);
    REQUIRE(kernel(a.gpu, w.gpu, got_half));
    CHECK(same_bytes(got_half.to(kCpu), want_half));
  }
  const Operand a = recipe_scaled(c.a, c.a_format, c.a_format == Fp8Format::E4M3 ? 2.0 : 1e-3);
  const Operand w = recipe_scaled(c.w, Fp8Format::E4M3, 0.05);
  Tensor want = Tensor::empty(c.out, DType::F32, kCpu, MemoryFormat::NHWC);
  op(a.cpu, w.cpu, want);
  Tensor bound = Tensor::empty(c.out, DType::F32, kCpu, MemoryFormat::NHWC);
  of_magnitudes(pass, magnitudes(a.cpu), magnitudes(w.cpu), bound, c.p);
  Tensor got = poisoned_like(want, kGpu);
  REQUIRE(kernel(a.gpu, w.gpu, got));
  const std::vector<double> g = got.to(kCpu).to_doubles(), e = want.to_doubles(), b = bound.to_doubles();
  INFO("relative error against the CPU: ", rel_error(g, e));
  CHECK(outside_fp8_bound(g, e, b, 0.0) == 0);
  // A second run of the kernel, and the op, give `first`'s bytes.
  const auto repeatable = [&](const Tensor& first) {
    Tensor again = poisoned_like(first, kGpu);
    REQUIRE(kernel(a.gpu, w.gpu, again));
    CHECK(same_bytes(again, first));
    Tensor via_op = poisoned_like(first, kGpu);
    op(a.gpu, w.gpu, via_op);
    CHECK(same_bytes(via_op, first));
  };
  repeatable(got);
  Tensor half = poisoned_like(Tensor::empty(c.out, DType::F16, kCpu, MemoryFormat::NHWC), kGpu);
  REQUIRE(kernel(a.gpu, w.gpu, half));
  Tensor by_phases = poisoned_like(half, kGpu);
  CHECK(through_phases(pass, a.gpu, w.gpu, by_phases, c.p) == c.half_by_phases);
  if (!c.half_by_phases) {
    Tensor rounded = Tensor::empty(c.out, DType::F16, kGpu, MemoryFormat::NHWC);
    ops::cast(got, rounded);
    CHECK(same_bytes(half, rounded));
    return;
  }
  CHECK(same_bytes(by_phases, half));  // the kernel the pass took
  CHECK(outside_fp8_bound(half.to(kCpu).to_doubles(), e, b, 0x1p-11) == 0);
  repeatable(half);
  // Its weight laid out ahead (ops::fp8_weight_fragments_all) gives the same bytes.
  REQUIRE(ops::fp8_weight_pass_reads_fragments(c.w, pass, kGpu));
  Tensor ahead = poisoned_like(half, kGpu);
  through_op(pass, a.gpu, laid_out(w.gpu, pass), ahead, c.p);
  CHECK(same_bytes(ahead, half));
}

}  // namespace

// Codes of -2, -1, -1/2, 0, 1/2, 1 and 2: products are quarters up to 4, a sum of 32 of them
// exact in any order and precision of at least 10 bits.
TEST_CASE("gpu ops: one FP8 warpgroup MMA through the convolutions' stage layout is the exact product") {
  GE_REQUIRE_GPU();
  GE_REQUIRE_SM90();
  const double kValues[] = {-2, -1, -0.5, 0, 0.5, 1, 2};
  auto codes = [&](std::vector<double>& values) {
    std::vector<double> u = random_values(64 * 32, 0.0, 7.0);
    values.resize(u.size());
    for (size_t i = 0; i < u.size(); ++i) values[i] = kValues[static_cast<int>(u[i]) % 7];
    const Tensor v = Tensor::from_doubles(values, {64, 32}, DType::F32);
    Tensor q = Tensor::empty({64, 32}, DType::U8), amax = Tensor::empty({1}, DType::F32);
    ops::fp8_quantize(v, Tensor::from_doubles({1.0}, {1}, DType::F32), Fp8Format::E4M3, q, amax);
    return q.to(kGpu);
  };
  std::vector<double> a, b;
  const Tensor qa = codes(a), qb = codes(b);
  Tensor d = poisoned_like(Tensor::empty({64, 64}, DType::F32), kGpu);
  REQUIRE(gpu::fp8_mma_tile(qa, qb, d));
  const std::vector<double> got = d.to(kCpu).to_doubles();
  int64_t wrong = 0;
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < 64; ++c) {
      double want = 0;
      for (int k = 0; k < 32; ++k) want += a[r * 32 + k] * b[c * 32 + k];
      if (got[r * 64 + c] != want && ++wrong <= 3)
        FAIL_CHECK("d[", r, "][", c, "] = ", got[r * 64 + c], ", not ", want);
    }
  CHECK(wrong == 0);
}

TEST_CASE("gpu ops: FP8 forward convolutions on warpgroup MMA match the CPU emulation") {
  GE_REQUIRE_GPU();
  GE_REQUIRE_SM90();
  const Conv2dParams d{/*stride=*/2, /*pad=*/1};
  // D's layers (and, with an E5M2 gradient, G's backward-data, a forward convolution), 128- and
  // 64-channel tiles, a partial last tile, and a 3x3 stride-1 shape whose K (288 bytes) ends
  // inside a stage and whose 32 channels put two taps in one. The 64 -> 128 layer's f16 results
  // come from the phase kernel, the 128 -> 256 layer's from the kernel with resident weights: with
  // fewer images than SMs (an image a block, or four), and with more (a block's images one after
  // another, unevenly many).
  const std::vector<Case> cases = {
      {"D 64 -> 128", {2, 64, 32, 32}, {128, 64, 4, 4}, {2, 128, 16, 16}, Fp8Format::E4M3, d, true},
      {"D 64 -> 128, 300 images", {300, 64, 32, 32}, {128, 64, 4, 4}, {300, 128, 16, 16}, Fp8Format::E4M3, d, true},
      {"G's 64 -> 128 backward-data", {3, 64, 32, 32}, {128, 64, 4, 4}, {3, 128, 16, 16}, Fp8Format::E5M2, d, true},
      {"D 128 -> 256", {2, 128, 16, 16}, {256, 128, 4, 4}, {2, 256, 8, 8}, Fp8Format::E4M3, d, true},
      {"D 128 -> 256, 301 images", {301, 128, 16, 16}, {256, 128, 4, 4}, {301, 256, 8, 8}, Fp8Format::E4M3, d, true},
      {"G's 128 -> 256 backward-data", {70, 128, 16, 16}, {256, 128, 4, 4}, {70, 256, 8, 8}, Fp8Format::E5M2, d, true},
      {"D 256 -> 512", {3, 256, 8, 8}, {512, 256, 4, 4}, {3, 512, 4, 4}, Fp8Format::E4M3, d},
      {"3x3 32 -> 64", {3, 32, 9, 7}, {64, 32, 3, 3}, {3, 64, 9, 7}, Fp8Format::E5M2, {1, 1}}};
  for (const Case& c : cases) check_case(c, Pass::Forward);
}

TEST_CASE("gpu ops: FP8 stride-2 backward-data on warpgroup MMA matches the CPU emulation") {
  GE_REQUIRE_GPU();
  GE_REQUIRE_SM90();
  const Conv2dParams d{/*stride=*/2, /*pad=*/1};
  // D's backward-data with 128- and 64-channel dx, and G's forward (an E4M3 activation). The
  // 128 -> 64 layer's f16 results come from the phase kernel: with fewer images than SMs (two
  // phases an item), and with more (four), as E5M2 gradients and as G's E4M3 activations; the
  // 256 -> 128 layer's from the kernel with resident weights, with fewer images than SMs and with
  // more (unevenly many), E5M2 and E4M3.
  const std::vector<Case> cases = {
      {"D 128 <- 256", {2, 256, 8, 8}, {256, 128, 4, 4}, {2, 128, 16, 16}, Fp8Format::E5M2, d, true},
      {"D 128 <- 256, 133 images", {133, 256, 8, 8}, {256, 128, 4, 4}, {133, 128, 16, 16}, Fp8Format::E5M2, d, true},
      {"G 256 -> 128", {40, 256, 8, 8}, {256, 128, 4, 4}, {40, 128, 16, 16}, Fp8Format::E4M3, d, true},
      {"D 64 <- 128", {3, 128, 16, 16}, {128, 64, 4, 4}, {3, 64, 32, 32}, Fp8Format::E5M2, d, true},
      {"D 64 <- 128, 136 images", {136, 128, 16, 16}, {128, 64, 4, 4}, {136, 64, 32, 32}, Fp8Format::E5M2, d, true},
      {"G 128 -> 64", {5, 128, 16, 16}, {128, 64, 4, 4}, {5, 64, 32, 32}, Fp8Format::E4M3, d, true},
      {"G 512 -> 256", {2, 512, 4, 4}, {512, 256, 4, 4}, {2, 256, 8, 8}, Fp8Format::E4M3, d}};
  for (const Case& c : cases) check_case(c, Pass::BackwardData);
}

TEST_CASE("gpu ops: FP8 backward-filter on warpgroup MMA matches the CPU emulation") {
  GE_REQUIRE_GPU();
  GE_REQUIRE_SM90();
  const Conv2dParams d{/*stride=*/2, /*pad=*/1};
  const Shape ws{128, 64, 4, 4};
  // D's second layer: fewer images than the kernel's image splits, more (unevenly split: 37),
  // many more; E5M2 gradients and E4M3 ones. G's fourth layer's, x and dy swapped: an E5M2 x (its
  // output gradient) and an E4M3 dy (its input).
  struct WgradCase {
    int64_t images;
    Fp8Format x_format, dy_format;
    bool unit = true;
  };
  constexpr Fp8Format E4M3 = Fp8Format::E4M3, E5M2 = Fp8Format::E5M2;
  for (const WgradCase& c : {WgradCase{2, E4M3, E5M2}, WgradCase{37, E4M3, E4M3}, WgradCase{150, E4M3, E5M2, false},
                             WgradCase{40, E5M2, E4M3}}) {
    CAPTURE(c.images);
    CAPTURE(c.x_format == E5M2);
    const Shape xs{c.images, 64, 32, 32}, ys{c.images, 128, 16, 16};
    auto kernel = [&](const Fp8Tensor& x, const Fp8Tensor& dy, Tensor& dw, float beta) {
      return gpu::fp8_conv2d_backward_filter_wgmma(x, dy, dw, d, beta);
    };
    if (c.unit) {
      const Operand x = unit_codes(xs, c.x_format), dy = unit_codes(ys, c.dy_format);
      Tensor want = Tensor::empty(ws, DType::F32, kCpu, MemoryFormat::NHWC);
      ops::fp8_conv2d_backward_filter(x.cpu, dy.cpu, want, d);
      Tensor got = poisoned_like(want, kGpu);
      REQUIRE(kernel(x.gpu, dy.gpu, got, 0.f));
      CHECK(same_bytes(got.to(kCpu), want));
    }
    const Operand x = recipe_scaled(xs, c.x_format, c.x_format == E5M2 ? 1e-3 : 2.0);
    const Operand dy = recipe_scaled(ys, c.dy_format, c.dy_format == E5M2 ? 1e-3 : 1.0);
    Tensor bound = Tensor::empty(ws, DType::F32, kCpu, MemoryFormat::NHWC);
    ops::conv2d_backward_filter(magnitudes(x.cpu), magnitudes(dy.cpu), bound, d);
    const Tensor start = random_tensor(ws, DType::F32, kCpu, MemoryFormat::NHWC, -1e-3, 1e-3);
    for (float beta : {0.f, 1.f}) {
      CAPTURE(beta);
      Tensor want = start.clone();
      ops::fp8_conv2d_backward_filter(x.cpu, dy.cpu, want, d, beta);
      Tensor got = start.to(kGpu);
      REQUIRE(kernel(x.gpu, dy.gpu, got, beta));
      const std::vector<double> e = want.to_doubles();
      INFO("relative error against the CPU: ", rel_error(got.to(kCpu).to_doubles(), e));
      // With beta 1 the sum onto dw rounds once more.
      CHECK(outside_fp8_bound(got.to(kCpu).to_doubles(), e, bound.to_doubles(), beta * 0x1p-23) == 0);
      Tensor again = start.to(kGpu), via_op = start.to(kGpu);
      REQUIRE(kernel(x.gpu, dy.gpu, again, beta));
      CHECK(same_bytes(again, got));
      ops::fp8_conv2d_backward_filter(x.gpu, dy.gpu, via_op, d, beta);
      CHECK(same_bytes(via_op, got));
    }
    // An f16 dw (beta 0 only): the f32 result rounded once, by the kernel and through the op.
    Tensor f32 = poisoned_like(start, kGpu);
    REQUIRE(kernel(x.gpu, dy.gpu, f32, 0.f));
    Tensor rounded = Tensor::empty(ws, DType::F16, kGpu, MemoryFormat::NHWC);
    ops::cast(f32, rounded);
    Tensor half = poisoned_like(Tensor::empty(ws, DType::F16, kCpu, MemoryFormat::NHWC), kGpu);
    REQUIRE(kernel(x.gpu, dy.gpu, half, 0.f));
    CHECK(same_bytes(half, rounded));
    CHECK_FALSE(kernel(x.gpu, dy.gpu, half, 1.f));
    Tensor half_via_op = poisoned_like(half, kGpu);
    ops::fp8_conv2d_backward_filter(x.gpu, dy.gpu, half_via_op, d);
    CHECK(same_bytes(half_via_op, rounded));
  }
}

// The shapes whose three passes O4 runs from codes: D's 64 -> 128 layer on 32 x 32 inputs, any
// batch, on a compute capability 9.0 GPU; not on the CPU, not another layer.
TEST_CASE("gpu ops: fp8_conv2d_runs_on_codes names D's second layer at 64x64 images") {
  GE_REQUIRE_GPU();
  GE_REQUIRE_SM90();
  const Conv2dParams d{/*stride=*/2, /*pad=*/1};
  for (int64_t n : {1, 24, 1024}) {
    CAPTURE(n);
    CHECK(ops::fp8_conv2d_runs_on_codes({n, 64, 32, 32}, {128, 64, 4, 4}, {n, 128, 16, 16}, d, kGpu));
    CHECK_FALSE(ops::fp8_conv2d_runs_on_codes({n, 64, 32, 32}, {128, 64, 4, 4}, {n, 128, 16, 16}, d, kCpu));
    CHECK(gpu::fp8_conv2d_forward_phases_takes({n, 64, 32, 32}, {128, 64, 4, 4}, {n, 128, 16, 16}, d, kGpu));
    CHECK(gpu::fp8_conv2d_backward_filter_takes({n, 64, 32, 32}, {n, 128, 16, 16}, {128, 64, 4, 4}, d, kGpu));
    // D's third layer: its forward and backward-data have kernels of their own, not its filter gradient.
    CHECK(gpu::fp8_conv2d_forward_resident_takes({n, 128, 16, 16}, {256, 128, 4, 4}, {n, 256, 8, 8}, d, kGpu));
    CHECK(gpu::fp8_conv2d_backward_data_resident_takes({n, 256, 8, 8}, {256, 128, 4, 4}, {n, 128, 16, 16}, d, kGpu));
    CHECK(ops::fp8_conv2d_backward_data_beats_half({n, 256, 8, 8}, {256, 128, 4, 4}, {n, 128, 16, 16}, d, kGpu));
    CHECK(ops::fp8_conv2d_forward_beats_half({n, 128, 16, 16}, {256, 128, 4, 4}, {n, 256, 8, 8}, d, kGpu));
    CHECK_FALSE(ops::fp8_conv2d_runs_on_codes({n, 128, 16, 16}, {256, 128, 4, 4}, {n, 256, 8, 8}, d, kGpu));
  }
  CHECK_FALSE(gpu::fp8_conv2d_forward_resident_takes({8, 128, 16, 16}, {256, 128, 4, 4}, {8, 256, 8, 8}, d, kCpu));
  CHECK_FALSE(
      gpu::fp8_conv2d_backward_data_resident_takes({8, 256, 8, 8}, {256, 128, 4, 4}, {8, 128, 16, 16}, d, kCpu));
  CHECK_FALSE(gpu::fp8_conv2d_backward_data_resident_takes({8, 256, 4, 4}, {256, 128, 4, 4}, {8, 128, 8, 8}, d, kGpu));
  CHECK_FALSE(gpu::fp8_conv2d_forward_resident_takes({8, 128, 32, 32}, {256, 128, 4, 4}, {8, 256, 16, 16}, d, kGpu));
  CHECK_FALSE(ops::fp8_conv2d_runs_on_codes({8, 128, 16, 16}, {256, 128, 4, 4}, {8, 256, 8, 8}, d, kGpu));
  CHECK_FALSE(ops::fp8_conv2d_runs_on_codes({8, 64, 16, 16}, {128, 64, 4, 4}, {8, 128, 8, 8}, d, kGpu));
  CHECK_FALSE(gpu::fp8_conv2d_backward_filter_takes({8, 64, 16, 16}, {8, 128, 8, 8}, {128, 64, 4, 4}, d, kGpu));
  CHECK_FALSE(gpu::fp8_conv2d_forward_phases_takes({8, 64, 32, 32}, {128, 64, 4, 4}, {8, 128, 16, 16}, {1, 1}, kGpu));
}

// The passes read the fragments they are handed: with another weight's (laid out in one launch
// with the other three layouts), a pass gives that weight's result, bitwise.
TEST_CASE("gpu ops: FP8 passes read the weight's fragments laid out ahead - four laid out in one launch") {
  GE_REQUIRE_GPU();
  GE_REQUIRE_SM90();
  const Conv2dParams d{/*stride=*/2, /*pad=*/1};
  struct Layout {
    Pass pass;
    Shape a, w, out;
  };
  const std::vector<Layout> layouts = {{Pass::Forward, {3, 64, 32, 32}, {128, 64, 4, 4}, {3, 128, 16, 16}},
                                       {Pass::BackwardData, {3, 128, 16, 16}, {128, 64, 4, 4}, {3, 64, 32, 32}},
                                       {Pass::Forward, {5, 128, 16, 16}, {256, 128, 4, 4}, {5, 256, 8, 8}},
                                       {Pass::BackwardData, {5, 256, 8, 8}, {256, 128, 4, 4}, {5, 128, 16, 16}}};
  std::vector<Operand> used, other;
  std::vector<ops::Fp8WeightFragmentsOf> jobs;
  for (const Layout& l : layouts) {
    used.push_back(unit_codes(l.w, Fp8Format::E4M3));
    other.push_back(unit_codes(l.w, Fp8Format::E4M3));
    jobs.push_back({other.back().gpu.data, l.pass, Tensor::empty({shape_numel(l.w)}, DType::U8, kGpu)});
  }
  ops::fp8_weight_fragments_all(jobs);
  for (size_t i = 0; i < layouts.size(); ++i) {
    const Layout& l = layouts[i];
    CAPTURE(i);
    const Operand a = unit_codes(l.a, l.pass == Pass::Forward ? Fp8Format::E4M3 : Fp8Format::E5M2);
    Fp8Tensor w = used[i].gpu;
    w.fragments = jobs[i].fragments;
    Tensor got = poisoned_like(Tensor::empty(l.out, DType::F16, kCpu, MemoryFormat::NHWC), kGpu);
    Tensor want = poisoned_like(got, kGpu), unlike = poisoned_like(got, kGpu);
    through_op(l.pass, a.gpu, w, got, d);
    through_op(l.pass, a.gpu, other[i].gpu, want, d);
    through_op(l.pass, a.gpu, used[i].gpu, unlike, d);
    CHECK(same_bytes(got, want));
    CHECK_FALSE(same_bytes(got, unlike));
  }
  // Fragments of the wrong size, and a weight no kernel holds in registers, are refused.
  Fp8Tensor short_fragments = used[0].gpu;
  short_fragments.fragments = Tensor::empty({shape_numel(layouts[0].w) - 16}, DType::U8, kGpu);
  Tensor y = Tensor::empty(layouts[0].out, DType::F16, kGpu, MemoryFormat::NHWC);
  const Operand x = unit_codes(layouts[0].a, Fp8Format::E4M3);
  CHECK_THROWS_WITH_AS(ops::fp8_conv2d_forward(x.gpu, short_fragments, y, d), doctest::Contains("fragments"), Error);
  const Operand w512 = unit_codes({512, 256, 4, 4}, Fp8Format::E4M3);
  CHECK_FALSE(ops::fp8_weight_pass_reads_fragments(w512.gpu.data.shape(), ops::Fp8WeightPass::Forward, kGpu));
  CHECK_THROWS_WITH_AS(ops::fp8_weight_fragments_all({{w512.gpu.data, ops::Fp8WeightPass::Forward,
                                                       Tensor::empty({w512.gpu.data.numel()}, DType::U8, kGpu)}}),
                       doctest::Contains("no FP8 forward kernel reads"), Error);
  CHECK_THROWS_WITH_AS(ops::fp8_weight_fragments_all({{used[0].gpu.data, ops::Fp8WeightPass::Forward,
                                                       Tensor::empty({shape_numel(layouts[0].w)}, DType::F16, kGpu)}}),
                       doctest::Contains("must be a 16-byte aligned u8 tensor"), Error);
}

TEST_CASE("gpu ops: FP8 convolutions the kernels do not take run the emulation") {
  GE_REQUIRE_GPU();
  GE_REQUIRE_SM90();
  const Conv2dParams d{/*stride=*/2, /*pad=*/1};
  // 48 input channels (not a multiple of 32), and the weights' E5M2 the op refuses.
  const Operand x = recipe_scaled({2, 48, 16, 16}, Fp8Format::E4M3, 1.0);
  const Operand w = recipe_scaled({64, 48, 4, 4}, Fp8Format::E4M3, 0.05);
  Tensor y = poisoned_like(Tensor::empty({2, 64, 8, 8}, DType::F32, kCpu, MemoryFormat::NHWC), kGpu);
  CHECK_FALSE(gpu::fp8_conv2d_forward_wgmma(x.gpu, w.gpu, y, d));
  ops::fp8_conv2d_forward(x.gpu, w.gpu, y, d);
  Tensor want = Tensor::empty({2, 64, 8, 8}, DType::F32, kCpu, MemoryFormat::NHWC);
  ops::fp8_conv2d_forward(x.cpu, w.cpu, want, d);
  CHECK(rel_error(y.to(kCpu), want) < 1e-5);

  const Operand w5 = recipe_scaled({64, 48, 4, 4}, Fp8Format::E5M2, 0.05);
  CHECK_FALSE(gpu::fp8_conv2d_forward_wgmma(x.gpu, w5.gpu, y, d));
  CHECK_THROWS_WITH_AS(ops::fp8_conv2d_forward(x.gpu, w5.gpu, y, d), doctest::Contains("w must be E4M3"), Error);
  // A 3x3 backward-data is not the four-phase shape.
  const Operand dy = recipe_scaled({2, 64, 8, 8}, Fp8Format::E5M2, 1e-3);
  const Operand w3 = recipe_scaled({64, 64, 3, 3}, Fp8Format::E4M3, 0.05);
  Tensor dx = Tensor::empty({2, 64, 8, 8}, DType::F32, kGpu, MemoryFormat::NHWC);
  CHECK_FALSE(gpu::fp8_conv2d_backward_data_wgmma(dy.gpu, w3.gpu, dx, {1, 1}));
  // The backward-filter kernel takes D's 64 -> 128 layer only.
  Tensor dw = Tensor::empty({64, 48, 4, 4}, DType::F32, kGpu, MemoryFormat::NHWC);
  const Operand dy8 = recipe_scaled({2, 64, 8, 8}, Fp8Format::E5M2, 1e-3);
  CHECK_FALSE(gpu::fp8_conv2d_backward_filter_wgmma(x.gpu, dy8.gpu, dw, d, 0.f));
  ops::fp8_conv2d_backward_filter(x.gpu, dy8.gpu, dw, d);
  Tensor want_dw = Tensor::empty({64, 48, 4, 4}, DType::F32, kCpu, MemoryFormat::NHWC);
  ops::fp8_conv2d_backward_filter(x.cpu, dy8.cpu, want_dw, d);
  CHECK(rel_error(dw.to(kCpu), want_dw) < 1e-5);
}
#endif
