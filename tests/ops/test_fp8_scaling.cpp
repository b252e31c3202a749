// ops::fp8_update_scales, Transformer Engine's delayed-scaling recipe (ganengine/fp8.h): the CPU
// reference against a model of the recipe written here independently (a window of the most recent
// amaxes, the scale formed in double and rounded once, which for f32 operands is the correctly
// rounded f32 quotient) over scripted amax sequences: zero, infinite and NaN amaxes, amaxes so small
// that the scale overflows, the history rolling over, margins, both amax algorithms, both formats.
// Then the argument checks, and the GPU against the CPU bitwise, eagerly and in a CUDA graph.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <string>
#include <vector>

#include "core/fp8_bits.h"
#include "ganengine/cuda_graph.h"
#include "ganengine/fp8.h"
#include "ganengine/ops.h"
#include "support/test_util.h"

using namespace ge;
using namespace ge::test;

namespace {

const Device kCpu = Device::cpu();
const double kNan = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

const char* name_of(Fp8Format f) { return f == Fp8Format::E4M3 ? "e4m3" : "e5m2"; }

uint32_t bits_of(float v) {
  uint32_t b = 0;
  std::memcpy(&b, &v, 4);
  return b;
}

// The recipe as its definition reads, for one tensor: the amaxes of the steps taken so far (the
// H most recent matter), the scale in force.
struct RecipeModel {
  Fp8Format format;
  Fp8DelayedScaling recipe;
  std::deque<double> recent;  // oldest first, at most H
  float scale = 1.0f;

  // The step's amax arrives (as the f32 the history holds); the scale for the next step follows.
  void step(double arriving) {
    const double amax = static_cast<float>(arriving);
    recent.push_back(amax);
    if (static_cast<int>(recent.size()) > recipe.amax_history_len) recent.pop_front();
    double chosen = amax;
    if (recipe.amax_compute_algo == Fp8AmaxAlgo::Max) {
      chosen = 0.0;
      for (double a : recent) chosen = std::isnan(a) || std::isnan(chosen) ? kNan : std::max(chosen, a);
    }
    if (std::isfinite(chosen) && chosen > 0) {
      const double quotient = static_cast<double>(fp8_max(format)) / std::exp2(recipe.margin) / chosen;
      scale = quotient >= FLT_MAX ? FLT_MAX : static_cast<float>(quotient);
    }
  }
  float scale_inv() const { return static_cast<float>(1.0 / static_cast<double>(scale)); }
  // What the history holds between steps: 0 for the step to come, then the H - 1 most recent
  // amaxes oldest first, zeros before the first step.
  std::vector<double> history() const {
    std::vector<double> h(static_cast<size_t>(recipe.amax_history_len), 0.0);
    size_t slot = h.size();
    for (auto it = recent.rbegin(); it != recent.rend() && slot > 1; ++it) h[--slot] = *it;
    return h;
  }
};

// Zero amaxes, growth, an infinite and a NaN amax riding through the window, an amax so small that
// fp8_max / amax overflows f32, shrinking amaxes, a subnormal and a negative zero.
const std::vector<double> kScript = {0.0, 2.0,  0.5,   0.25,  kInf, 1.0,  0.75, 0.0, 0.125, kNan,
                                     3.0, 0.01, 1e-40, 0.02,  0.02, 0.02, 0.02, 5.0, 0.0,   -0.0,
                                     1.0, 1.0,  1.0,   1e-30, 0.3,  0.3,  0.3,  0.3, 0.3,   0.3};

// Each step writes amax into the history's entry 0 (where fp8_quantize writes it) on the state's
// device, then updates every state at once.
void write_amax(const Fp8Scaling& s, double amax) {
  Tensor slot = s.current_amax();
  slot.copy_from(Tensor::from_doubles({amax}, {1}, DType::F32));
}

void expect_state(const Fp8Scaling& s, const RecipeModel& m) {
  const std::vector<double> got = s.amax_history.to_doubles(), want = m.history();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(((std::isnan(got[i]) && std::isnan(want[i])) || got[i] == want[i]));
  }
  CHECK(bits_of(static_cast<float>(s.scale.item())) == bits_of(m.scale));
  CHECK(bits_of(static_cast<float>(s.scale_inv.item())) == bits_of(m.scale_inv()));
}

std::vector<Fp8DelayedScaling> recipes() {
  std::vector<Fp8DelayedScaling> out;
  for (int h : {1, 3, Fp8DelayedScaling::kDefaultAmaxHistoryLen})
    for (int margin : {0, 1, 3})
      for (Fp8AmaxAlgo algo : {Fp8AmaxAlgo::Max, Fp8AmaxAlgo::MostRecent}) {
        Fp8DelayedScaling r;
        r.amax_history_len = h;
        r.margin = margin;
        r.amax_compute_algo = algo;
        out.push_back(r);
      }
  return out;
}

// Several states updated by one call, each with its own format and its own amax sequence (the
// script shifted), so a state that read another's slot would show.
struct Ensemble {
  std::vector<Fp8Scaling> states;
  std::vector<RecipeModel> models;
  Ensemble(const Fp8DelayedScaling& r, int count, Device device) {
    for (int k = 0; k < count; ++k) {
      const Fp8Format f = k % 2 ? Fp8Format::E5M2 : Fp8Format::E4M3;
      states.push_back(make_fp8_scaling(f, r, device));
      models.push_back(RecipeModel{f, r, {}, 1.0f});
    }
  }
  static double amax_of(int k, size_t step) {
    const double a = kScript[(step + static_cast<size_t>(k)) % kScript.size()];
    return k % 3 == 2 && std::isfinite(a) ? a * 1000.0 : a;
  }
};

}  // namespace

namespace cpu_checks {

TEST_CASE("cpu ops: fp8_update_scales follows the delayed-scaling recipe over a scripted amax sequence") {
  for (const Fp8DelayedScaling& r : recipes()) {
    CAPTURE(r.amax_history_len);
    CAPTURE(r.margin);
    CAPTURE(r.amax_compute_algo == Fp8AmaxAlgo::Max ? "max" : "most_recent");
    Ensemble e(r, 4, kCpu);
    for (size_t step = 0; step < kScript.size(); ++step) {
      CAPTURE(step);
      for (size_t k = 0; k < e.states.size(); ++k) write_amax(e.states[k], Ensemble::amax_of(int(k), step));
      ops::fp8_update_scales(e.states, r);
      for (size_t k = 0; k < e.states.size(); ++k) {
        CAPTURE(k);
        CAPTURE(name_of(e.models[k].format));
        e.models[k].step(Ensemble::amax_of(int(k), step));
        expect_state(e.states[k], e.models[k]);
      }
    }
  }
}

TEST_CASE("cpu ops: fp8_update_scales keeps the scale while a NaN or infinite amax is in the window") {
  Fp8DelayedScaling r;
  r.amax_history_len = 3;
  Fp8Scaling s = make_fp8_scaling(Fp8Format::E4M3, r, kCpu);
  const auto step = [&](double amax) {
    write_amax(s, amax);
    ops::fp8_update_scales({s}, r);
    return static_cast<float>(s.scale.item());
  };
  CHECK(step(0.0) == 1.0f);    // nothing seen yet: the initial scale stays
  CHECK(step(2.0) == 224.0f);  // 448 / 2
  CHECK(step(kNan) == 224.0f);
  CHECK(step(4.0) == 224.0f);
  CHECK(step(1.0) == 224.0f);    // the NaN is still one of the last three
  CHECK(step(1.0) == 112.0f);    // it has rolled out: 448 / max(4, 1, 1)
  CHECK(step(kInf) == 112.0f);   // an infinite amax keeps the scale too
  CHECK(step(1e-39) == 112.0f);  // still in the window
  CHECK(step(1e-39) == 112.0f);
  CHECK(step(1e-39) == FLT_MAX);  // 448 / 1e-39 overflows: the largest scale
  CHECK(bits_of(static_cast<float>(s.scale_inv.item())) == bits_of(1.0f / FLT_MAX));
}

TEST_CASE("cpu ops: a margin puts the scale 2 to the margin below the format's range") {
  for (Fp8Format f : {Fp8Format::E4M3, Fp8Format::E5M2})
    for (int margin : {0, 2, 7}) {
      CAPTURE(name_of(f));
      CAPTURE(margin);
      Fp8DelayedScaling r;
      r.margin = margin;
      Fp8Scaling s = make_fp8_scaling(f, r, kCpu);
      write_amax(s, 3.0);
      ops::fp8_update_scales({s}, r);
      CHECK(static_cast<float>(s.scale.item()) == static_cast<float>(fp8_max(f) / 3.0 / std::exp2(margin)));
    }
}

TEST_CASE("cpu ops: make_fp8_scaling starts as Transformer Engine does") {
  const Fp8DelayedScaling r;
  CHECK(r.amax_history_len == 16);
  CHECK(r.margin == 0);
  CHECK(r.amax_compute_algo == Fp8AmaxAlgo::Max);
  const Fp8Scaling s = make_fp8_scaling(Fp8Format::E5M2, r, kCpu);
  CHECK(s.format == Fp8Format::E5M2);
  CHECK(s.amax_history.shape() == Shape{16});
  CHECK(s.amax_history.to_doubles() == std::vector<double>(16, 0.0));
  CHECK(s.scale.item() == 1.0);
  CHECK(s.scale_inv.item() == 1.0);
}

TEST_CASE("cpu ops: fp8_update_scales rejects histories of another length and bad recipes") {
  Fp8DelayedScaling r;
  const Fp8Scaling s = make_fp8_scaling(Fp8Format::E4M3, r, kCpu);
  Fp8DelayedScaling longer = r;
  longer.amax_history_len = 32;
  CHECK_THROWS_WITH_AS(ops::fp8_update_scales({s}, longer), doctest::Contains("expected f32 (32)"), Error);
  Fp8DelayedScaling negative = r;
  negative.margin = -1;
  CHECK_THROWS_WITH_AS(ops::fp8_update_scales({s}, negative), doctest::Contains("margin -1"), Error);
  Fp8DelayedScaling huge = r;
  huge.margin = 135;
  CHECK_THROWS_WITH_AS(ops::fp8_update_scales({s}, huge), doctest::Contains("margin 135"), Error);
  Fp8DelayedScaling empty = r;
  empty.amax_history_len = 0;
  CHECK_THROWS_WITH_AS(ops::fp8_update_scales({s}, empty), doctest::Contains("amax_history_len 0"), Error);
  Fp8Scaling wide = s;
  wide.scale = Tensor::zeros({2}, DType::F32);
  CHECK_THROWS_WITH_AS(ops::fp8_update_scales({wide}, r), doctest::Contains("scale must be f32 (1)"), Error);
  ops::fp8_update_scales({}, r);  // nothing to do
}

}  // namespace cpu_checks

namespace gpu_checks {

TEST_CASE("gpu ops: fp8_update_scales matches the CPU bitwise over the scripted amaxes") {
  GE_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  for (const Fp8DelayedScaling& r : recipes()) {
    CAPTURE(r.amax_history_len);
    CAPTURE(r.margin);
    CAPTURE(r.amax_compute_algo == Fp8AmaxAlgo::Max ? "max" : "most_recent");
    // More states than one launch takes, so the split across launches is covered.
    Ensemble on_cpu(r, 70, kCpu), on_gpu(r, 70, gpu);
    for (size_t step = 0; step < kScript.size(); ++step) {
      CAPTURE(step);
      for (size_t k = 0; k < on_cpu.states.size(); ++k) {
        write_amax(on_cpu.states[k], Ensemble::amax_of(int(k), step));
        write_amax(on_gpu.states[k], Ensemble::amax_of(int(k), step));
      }
      ops::fp8_update_scales(on_cpu.states, r);
      ops::fp8_update_scales(on_gpu.states, r);
      for (size_t k = 0; k < on_cpu.states.size(); ++k) {
        CAPTURE(k);
        CHECK(same_bytes(on_gpu.states[k].amax_history, on_cpu.states[k].amax_history));
        CHECK(same_bytes(on_gpu.states[k].scale, on_cpu.states[k].scale));
        CHECK(same_bytes(on_gpu.states[k].scale_inv, on_cpu.states[k].scale_inv));
      }
    }
  }
}

TEST_CASE("gpu ops: a quantize and scale update step captured in a CUDA graph matches eager steps") {
  GE_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  const Fp8DelayedScaling r;
  const std::vector<Shape> shapes = {{8, 64, 16, 16}, {128, 64, 4, 4}, {4099}};
  std::vector<Tensor> inputs;
  std::vector<Fp8Scaling> eager, replayed;
  for (size_t k = 0; k < shapes.size(); ++k) {
    inputs.push_back(random_tensor(shapes[k], DType::F16, gpu, MemoryFormat::NCHW, -3.0, 3.0));
    const Fp8Format f = k == 1 ? Fp8Format::E5M2 : Fp8Format::E4M3;
    eager.push_back(make_fp8_scaling(f, r, gpu));
    replayed.push_back(make_fp8_scaling(f, r, gpu));
  }
  const auto step = [&](const std::vector<Fp8Scaling>& states) {
    for (size_t k = 0; k < states.size(); ++k) ops::fp8_quantized(inputs[k], states[k]);
    ops::fp8_update_scales(states, r);
  };
  CudaGraph graph;
  graph.capture(gpu, [&] { step(replayed); });  // records, runs nothing
  for (int i = 0; i < 20; ++i) {
    step(eager);
    graph.replay();
    if (i % 7 == 3) ops::scale_inplace(inputs[i % 3], 4.0f);  // the amaxes move between steps
  }
  synchronize(gpu);
  for (size_t k = 0; k < eager.size(); ++k) {
    CAPTURE(k);
    CHECK(same_bytes(replayed[k].amax_history, eager[k].amax_history));
    CHECK(same_bytes(replayed[k].scale, eager[k].scale));
    CHECK(same_bytes(replayed[k].scale_inv, eager[k].scale_inv));
    CHECK(eager[k].scale.item() != 1.0);
  }
}

}  // namespace gpu_checks
