// Loss scaling (AMP): the dynamic loss scaler (loss_scaler_update), unscale_grads over many
// tensors with its found_inf flag, and scale_inplace; the CPU reference's own cases and the GPU
// against the CPU.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/half_bits.h"
#include "ops/op_test_util.h"
#include "support/golden.h"

namespace {

// ------------------------------------------------------------------------------------ CPU reference

namespace cpu_checks {

using namespace ge::test::cpu_ref;

Values scaler_after(const Values& state, bool overflow, const ge::ops::ScalerConfig& cfg, int steps = 1) {
  Tensor s = make(state, {2});
  const Tensor found_inf = make({overflow ? 1.0 : 0.0}, {1});
  for (int i = 0; i < steps; ++i) ge::ops::loss_scaler_update(s, found_inf, cfg);
  return s.to_doubles();
}

TEST_CASE("cpu ops: dynamic loss scaler follows Apex") {
  const ge::ops::ScalerConfig cfg;
  const double max_scale = 16777216.0, min_scale = 1.52587890625e-05;
  SUBCASE("an overflow halves the scale and restarts the clean-step count") {
    CHECK(scaler_after({65536, 1234}, true, cfg) == Values{32768, 0});
  }
  SUBCASE("2000 clean steps double the scale") {
    CHECK(scaler_after({65536, 0}, false, cfg, 1999) == Values{65536, 1999});
    CHECK(scaler_after({65536, 0}, false, cfg, 2000) == Values{131072, 0});
    CHECK(scaler_after({65536, 0}, false, cfg, 4000) == Values{262144, 0});
  }
  SUBCASE("the scale never grows past 2^24") {
    CHECK(scaler_after({max_scale, 1999}, false, cfg) == Values{max_scale, 0});
  }
  SUBCASE("the scale never falls below min_scale") {
    CHECK(scaler_after({min_scale, 5}, true, cfg) == Values{min_scale, 0});
    CHECK(scaler_after({min_scale * 1.5, 5}, true, cfg) == Values{min_scale, 0});
  }
  SUBCASE("a static scaler never changes") {
    ge::ops::ScalerConfig fixed;
    fixed.dynamic = false;
    CHECK(scaler_after({128, 0}, true, fixed) == Values{128, 0});
    CHECK(scaler_after({128, 1999}, false, fixed, 3) == Values{128, 1999});
  }
  SUBCASE("a custom growth interval") {
    ge::ops::ScalerConfig quick;
    quick.growth_interval = 3;
    CHECK(scaler_after({4, 0}, false, quick, 3) == Values{8, 0});
  }
}

}  // namespace cpu_checks

// Apex's scaler over thousands of steps (tools/make_goldens.py, golden_loss_scale: checked there
// against PyTorch's GradScaler kernel below the ceiling): "grow" crosses the 2000-step growth
// window with overflows before, on and right after a growth; "cap" grows once to 2^24 and stops.
// The state after every step, exactly, on the given device.
void expect_golden_scaler_sequences(ge::Device d) {
  using ge::Tensor;
  using ge::test::cpu_ref::make;
  using ge::test::cpu_ref::Values;
  const ge::SafeTensorsFile& g = ge::test::golden("golden_loss_scale.safetensors");
  const ge::ops::ScalerConfig apex;
  REQUIRE(std::to_string(apex.growth_interval) == g.metadata.at("growth_interval"));
  for (const char* name : {"grow", "cap"}) {
    CAPTURE(name);
    const std::string n(name);
    const std::vector<double> found = ge::test::golden_tensor(g, n + ".found_inf").to_doubles();
    const std::vector<double> scale = ge::test::golden_tensor(g, n + ".scale").to_doubles();
    const std::vector<double> clean = ge::test::golden_tensor(g, n + ".clean_steps").to_doubles();
    Tensor state = make({std::stod(g.metadata.at(n + ".init_scale")), 0}, {2}).to(d);
    int mismatches = 0, growths = 0;
    double last = state.to_doubles()[0];
    for (size_t k = 0; k < found.size(); ++k) {
      ge::ops::loss_scaler_update(state, make({found[k]}, {1}).to(d), apex);
      const Values now = state.to_doubles();
      if (now != Values{scale[k], clean[k]} && ++mismatches <= 3)
        FAIL_CHECK("step ", k, ": state ", now[0], ", ", now[1], " where Apex has ", scale[k], ", ", clean[k]);
      growths += now[0] > last;
      last = now[0];
    }
    CHECK(mismatches == 0);
    CHECK(growths == (n == "grow" ? 2 : 1));  // the sequences do cross the window
  }
}

namespace cpu_checks {

TEST_CASE("cpu ops: dynamic loss scaler follows Apex's golden across growth windows") {
  expect_golden_scaler_sequences(ge::Device::cpu());
}

TEST_CASE("cpu ops: unscale_grads unscales accumulates and flags non-finite grads") {
  const Tensor scale = make({4}, {1});
  Tensor found_inf = zeros({1});
  const std::vector<Tensor> src{make({2, 4, -8, 0.5}, {4}, DType::F16), make({16, -1}, {2}, DType::BF16)};
  std::vector<Tensor> dst{make({1, 1, 1, 1}, {4}), make({0, 0}, {2})};

  ge::ops::unscale_grads(src, dst, scale, found_inf, /*accumulate=*/false);
  expect_values(dst[0], {0.5, 1, -2, 0.125});
  expect_values(dst[1], {4, -0.25});
  CHECK(found_inf.item() == 0.0);

  ge::ops::unscale_grads(src, dst, scale, found_inf, /*accumulate=*/true);
  expect_values(dst[0], {1, 2, -4, 0.25});
  expect_values(dst[1], {8, -0.5});
  CHECK(found_inf.item() == 0.0);

  for (double bad : {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    CAPTURE(bad);
    Tensor flag = zeros({1});
    std::vector<Tensor> out{zeros({3})};
    ge::ops::unscale_grads({make({1, bad, 2}, {3}, DType::F16)}, out, scale, flag, false);
    CHECK(flag.item() == 1.0);
    // A later clean call never clears the flag: it gathers all losses of one step.
    ge::ops::unscale_grads({make({1, 1, 1}, {3}, DType::F16)}, out, scale, flag, true);
    CHECK(flag.item() == 1.0);
  }
}

TEST_CASE("cpu ops: scale_inplace multiplies in fp32 and rounds once") {
  Tensor a = make({1, 2, 3}, {3});
  ge::ops::scale_inplace(a, 0.5f);
  expect_values(a, {0.5, 1, 1.5});
  Tensor h = make({3, 1000}, {2}, DType::F16);
  ge::ops::scale_inplace(h, 1.f / 3.f);
  const float f0 = 3.f * (1.f / 3.f), f1 = 1000.f * (1.f / 3.f);
  expect_values(
      h, {ge::half_bits_to_float(ge::float_to_half_bits(f0)), ge::half_bits_to_float(ge::float_to_half_bits(f1))});
}

}  // namespace cpu_checks

// ---------------------------------------------------------------------------------- GPU against CPU

namespace gpu_checks {

using namespace ge::test::gpu_ref;

struct GradList {
  std::vector<Tensor> src, dst0;
};

// Grads of mixed dtypes and sizes: one spanning several chunks, tiny ones, an NHWC conv grad,
// and enough tensors (55) to need more than one multi-tensor launch.
GradList make_grad_list(double scale) {
  GradList g;
  const Shape big{40000}, conv{8, 3, 4, 4};
  int k = 0;
  for (const Shape& s : {big, conv, Shape{1}, Shape{7}}) {
    for (DType dt : kDTypes) {
      g.src.push_back(random_cpu(s, dt, (k++ % 2) ? MemoryFormat::NHWC : MemoryFormat::NCHW, -scale, scale));
      g.dst0.push_back(random_cpu(s, DType::F32, g.src.back().format()));
    }
  }
  while (g.src.size() < 55) {
    g.src.push_back(random_cpu({int64_t(1 + g.src.size())}, DType::F16, MemoryFormat::NCHW, -scale, scale));
    g.dst0.push_back(random_cpu(g.src.back().shape(), DType::F32));
  }
  return g;
}

TEST_CASE("gpu ops: unscale_grads over many tensors matches the CPU - found_inf stays 0 when clean") {
  GE_REQUIRE_GPU();
  const double scale = 1024.0;
  const GradList g = make_grad_list(scale);
  const Tensor scale_t = values_cpu({scale}, {1});
  for (bool accumulate : {false, true}) {
    CAPTURE(accumulate);
    std::vector<Tensor> dst = clones(g.dst0, kCpu);
    Tensor found = zeros_cpu({1}, DType::F32);
    ge::ops::unscale_grads(g.src, dst, scale_t, found, accumulate);

    std::vector<Tensor> dstg = clones(g.dst0, kGpu);
    if (!accumulate)
      for (Tensor& t : dstg) ge::test::poison(t);
    Tensor foundg = gpu(zeros_cpu({1}, DType::F32));
    ge::ops::unscale_grads(clones(g.src, kGpu), dstg, gpu(scale_t), foundg, accumulate);
    for (size_t i = 0; i < dst.size(); ++i) {
      CAPTURE(i);
      expect_close("unscaled grad", dstg[i], dst[i], 1e-6);
    }
    CHECK(found.item() == 0.0);
    CHECK(foundg.item() == 0.0);
  }
}

TEST_CASE("gpu ops: unscale_grads raises found_inf on inf or NaN and never clears it") {
  GE_REQUIRE_GPU();
  const Tensor scale_t = gpu(values_cpu({65536.0}, {1}));
  for (double bad : {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()})
    for (DType dt : kDTypes) {
      CAPTURE(bad);
      CAPTURE(ge::dtype_name(dt));
      GradList g = make_grad_list(1.0);
      // The bad value sits deep inside the big tensor (not in its first chunk) of this dtype, or
      // in the last element of its 7-element tensor (past the kernel's last four-element group).
      const bool in_tail = std::isnan(bad);  // the NaN goes to the tail
      const size_t dt_index = dt == DType::F32 ? 0 : (dt == DType::F16 ? 1 : 2);
      const size_t victim = in_tail ? 9 + dt_index : dt_index;
      Values v = g.src[victim].to_doubles();
      v[in_tail ? 6 : 33333] = bad;
      g.src[victim] = Tensor::from_doubles(v, g.src[victim].shape(), dt, kCpu, g.src[victim].format());

      std::vector<Tensor> dstg = clones(g.dst0, kGpu);
      Tensor foundg = gpu(zeros_cpu({1}, DType::F32));
      ge::ops::unscale_grads(clones(g.src, kGpu), dstg, scale_t, foundg, false);
      CHECK(foundg.item() == 1.0);
      // The other tensors are still unscaled correctly.
      std::vector<Tensor> dst = clones(g.dst0, kCpu);
      Tensor found = zeros_cpu({1}, DType::F32);
      ge::ops::unscale_grads(g.src, dst, scale_t.to(kCpu), found, false);
      for (size_t i = 0; i < dst.size(); ++i)
        if (i != victim) expect_close("unscaled grad", dstg[i], dst[i], 1e-6);

      // A later clean call (another loss of the same step) leaves the flag set.
      GradList clean = make_grad_list(1.0);
      std::vector<Tensor> dst2 = clones(clean.dst0, kGpu);
      ge::ops::unscale_grads(clones(clean.src, kGpu), dst2, scale_t, foundg, true);
      CHECK(foundg.item() == 1.0);
    }
}

TEST_CASE("gpu ops: scale_inplace matches the CPU in every dtype") {
  GE_REQUIRE_GPU();
  for (DType dt : kDTypes)
    for (MemoryFormat f : kFormats) {
      CAPTURE(tag(dt, f));
      const Tensor t = random_cpu({3, 5, 7, 9}, dt, f);
      for (float factor : {0.5f, 1.f / 3.f, 65536.f}) {
        CAPTURE(factor);
        Tensor c = t.clone();
        ge::ops::scale_inplace(c, factor);
        Tensor g = gpu(t);
        ge::ops::scale_inplace(g, factor);
        expect_identical("scale_inplace", g, c);
      }
    }
}

TEST_CASE("gpu ops: loss_scaler_update follows Apex's golden across growth windows") {
  GE_REQUIRE_GPU();
  expect_golden_scaler_sequences(ge::Device::cuda(0));
}

TEST_CASE("gpu ops: loss_scaler_update follows the CPU over overflow/clean sequences") {
  GE_REQUIRE_GPU();
  ge::ops::ScalerConfig quick;
  quick.growth_interval = 3;
  ge::ops::ScalerConfig fixed;
  fixed.dynamic = false;
  ge::ops::ScalerConfig apex;  // 2000 clean steps, 2^24 ceiling, 2^-16 floor

  struct Sequence {
    const char* name;
    ge::ops::ScalerConfig cfg;
    Values start;
    std::vector<int> overflows;
  };
  const std::vector<Sequence> sequences{
      {"growth and back-off", quick, {65536, 0}, {0, 0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0}},
      {"ceiling", quick, {16777216, 0}, {0, 0, 0, 0, 0, 0, 1, 0, 0, 0}},
      {"floor", quick, {1.52587890625e-05 * 2, 2}, {1, 1, 1, 0, 1}},
      {"static", fixed, {128, 5}, {1, 0, 0, 0, 1}},
      {"apex defaults", apex, {65536, 1998}, {0, 0, 0, 1, 0}},
  };
  for (const Sequence& seq : sequences) {
    CAPTURE(seq.name);
    Tensor state = values_cpu(seq.start, {2});
    Tensor stateg = gpu(state);
    for (size_t k = 0; k < seq.overflows.size(); ++k) {
      CAPTURE(k);
      const Tensor found = values_cpu({double(seq.overflows[k])}, {1});
      ge::ops::loss_scaler_update(state, found, seq.cfg);
      ge::ops::loss_scaler_update(stateg, gpu(found), seq.cfg);
      expect_identical("scaler state", stateg, state);
    }
  }
}

}  // namespace gpu_checks

}  // namespace
