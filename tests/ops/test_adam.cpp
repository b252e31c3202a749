// Adam (adam_step over many tensors: half copies, skipped steps, pending gradients it unscales
// itself): the CPU reference against PyTorch's update, and the GPU against the CPU.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/half_bits.h"
#include "ops/op_test_util.h"
#include "support/trainer_compare.h"

namespace {

// ------------------------------------------------------------------------------------ CPU reference

namespace cpu_checks {

using namespace ge::test::cpu_ref;

// The hyperparameters the reference uses, stated here rather than read from the engine: Apex's
// DCGAN example passes torch.optim.Adam lr 2e-4 and betas (0.5, 0.999), and leaves eps at
// PyTorch's default, 1e-8. The engine's AdamConfig defaults must be these, so a change of them
// fails here.
constexpr double kLr = 2e-4, kBeta1 = 0.5, kBeta2 = 0.999, kEps = 1e-8;

TEST_CASE("cpu ops: AdamConfig defaults to the DCGAN example's lr and betas and PyTorch's eps") {
  const ge::ops::AdamConfig cfg;
  CHECK(cfg.lr == kLr);
  CHECK(cfg.beta1 == kBeta1);
  CHECK(cfg.beta2 == kBeta2);
  CHECK(cfg.eps == kEps);
}

TEST_CASE("cpu ops: Adam follows PyTorch over three steps") {
  ge::ops::AdamConfig cfg;  // betas and eps: the engine's defaults, which the reference must match
  const double lr = 0.01;   // large enough that the updates dwarf fp32 rounding of the parameters
  cfg.lr = lr;
  const Values p0{1.0, -0.5, 0.25};
  const std::vector<Values> grads{{0.1, -0.2, 0.0}, {0.3, 0.05, 1e-3}, {-0.1, 0.4, -2.0}};

  std::vector<Tensor> params{make(p0, {3})}, m{zeros({3})}, v{zeros({3})};
  std::vector<Tensor> copies{zeros({3}, DType::F16)};
  Tensor step = zeros({1});
  const Tensor no_skip = zeros({1});

  // The reference: the documented formula in double, step by step.
  Values p = p0, mr(3, 0.0), vr(3, 0.0);
  const double b1 = kBeta1, b2 = kBeta2, eps = kEps;
  for (int t = 1; t <= 3; ++t) {
    const Values& g = grads[static_cast<size_t>(t - 1)];
    for (size_t i = 0; i < 3; ++i) {
      mr[i] = b1 * mr[i] + (1 - b1) * g[i];
      vr[i] = b2 * vr[i] + (1 - b2) * g[i] * g[i];
      const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
      p[i] -= lr / bc1 * mr[i] / (std::sqrt(vr[i]) / std::sqrt(bc2) + eps);
    }
    ge::ops::adam_step(params, {make(g, {3})}, m, v, step, no_skip, cfg, copies);
    CAPTURE(t);
    CHECK(step.item() == t);
    expect_values(params[0], p, 1e-6);
    expect_values(m[0], mr, 1e-6);
    expect_values(v[0], vr, 1e-6);
    if (t == 1) {
      // The first step moves every parameter with a nonzero grad by lr against the grad's sign.
      expect_values(params[0], {1.0 - 0.01, -0.5 + 0.01, 0.25}, 1e-6);
    }
    // The half copy is the fp32 master rounded once to f16.
    const Values master = params[0].to_doubles(), copy = copies[0].to_doubles();
    for (size_t i = 0; i < 3; ++i)
      CHECK(copy[i] == ge::half_bits_to_float(ge::float_to_half_bits(static_cast<float>(master[i]))));
  }
}

TEST_CASE("cpu ops: Adam with skip set changes nothing - half copies are rounded (bf16)") {
  ge::ops::AdamConfig cfg;
  std::vector<Tensor> params{make({0.3, -0.7}, {2}), make({1.1, 2.2, 3.3, 4.4}, {1, 2, 1, 2})};
  std::vector<Tensor> grads{make({0.5, 0.5}, {2}), make({-1, 1, -1, 1}, {1, 2, 1, 2})};
  std::vector<Tensor> m{make({0.1, 0.2}, {2}), make({0, 0, 0, 0}, {4})};
  std::vector<Tensor> v{make({0.01, 0.02}, {2}), make({1, 1, 1, 1}, {4})};
  std::vector<Tensor> copies{zeros({2}, DType::BF16), zeros({1, 2, 1, 2}, DType::BF16, kNHWC)};
  Tensor step = make({7}, {1});

  auto snapshot = [&] {
    std::vector<Values> s;
    for (const auto* list : {&params, &m, &v, &copies})
      for (const Tensor& t : *list) s.push_back(t.to_doubles());
    s.push_back(step.to_doubles());
    return s;
  };
  const auto before = snapshot();
  ge::ops::adam_step(params, grads, m, v, step, make({1}, {1}), cfg, copies);
  CHECK(snapshot() == before);

  ge::ops::adam_step(params, grads, m, v, step, zeros({1}), cfg, copies);
  CHECK(step.item() == 8);
  for (size_t k = 0; k < params.size(); ++k) {
    const Values master = params[k].to_doubles(), copy = copies[k].to_doubles();
    CHECK(master != before[k]);
    for (size_t i = 0; i < master.size(); ++i)
      CHECK(copy[i] == ge::bf16_bits_to_float(ge::float_to_bf16_bits(static_cast<float>(master[i]))));
  }
}

}  // namespace cpu_checks

// ---------------------------------------------------------------------------------- GPU against CPU

namespace gpu_checks {

using namespace ge::test::gpu_ref;

struct AdamState {
  std::vector<Tensor> params, m, v, copies;
  Tensor step;
};

AdamState to_device(const AdamState& s, Device d) {
  return {clones(s.params, d), clones(s.m, d), clones(s.v, d), clones(s.copies, d), s.step.to(d)};
}

void expect_adam_close(const AdamState& g, const AdamState& c) {
  for (size_t i = 0; i < c.params.size(); ++i) {
    CAPTURE(i);
    expect_close("param", g.params[i], c.params[i]);
    expect_close("exp_avg", g.m[i], c.m[i]);
    expect_close("exp_avg_sq", g.v[i], c.v[i]);
    if (!c.copies.empty()) expect_close("half copy", g.copies[i], c.copies[i]);
  }
  expect_identical("step", g.step, c.step);
}

// Parameters of DCGAN-like shapes (conv weights in both layouts, BN vectors), one spanning
// several chunks and ending in a part of the kernel's four-element groups, others of odd sizes,
// and 40 in all so that one step needs two multi-tensor launches. state_dt: the parameters' and
// moments' dtype (f32 masters, or half at O3).
AdamState make_adam_state(DType half_dt, bool with_copies, DType state_dt = DType::F32) {
  AdamState s;
  std::vector<Shape> shapes{{8, 3, 4, 4}, {16, 8, 4, 4}, {16}, {16}, {50001}, {1, 16, 4, 4}};
  while (shapes.size() < 40) shapes.push_back({int64_t(3 + shapes.size())});
  for (size_t i = 0; i < shapes.size(); ++i) {
    const MemoryFormat f = i % 2 ? MemoryFormat::NHWC : MemoryFormat::NCHW;
    s.params.push_back(random_cpu(shapes[i], state_dt, f));
    s.m.push_back(random_cpu(shapes[i], state_dt, f, -0.01, 0.01));
    s.v.push_back(random_cpu(shapes[i], state_dt, f, 0.0, 1e-4));
    if (with_copies) {
      // One copy is laid out differently from its master (NCHW copy of an NHWC conv weight).
      const bool relaid = i == 1;
      s.copies.push_back(zeros_cpu(shapes[i], half_dt, relaid ? MemoryFormat::NCHW : f));
    }
  }
  s.step = values_cpu({0.0}, {1});
  return s;
}

TEST_CASE("gpu ops: Adam over three steps with and without skip and half copies matches the CPU") {
  GE_REQUIRE_GPU();
  ge::ops::AdamConfig cfg;
  cfg.lr = 1e-3f;
  for (DType state_dt : {DType::F32, DType::F16, DType::BF16})
    for (DType half_dt : {DType::F16, DType::BF16})
      for (bool with_copies : {false, true})
        for (int skip_at : {-1, 1}) {  // -1: no step skipped; 1: the second step overflowed
          if (state_dt != DType::F32 && (with_copies || half_dt != state_dt)) continue;  // O3: half states, no copies
          CAPTURE(ge::dtype_name(state_dt));
          CAPTURE(ge::dtype_name(half_dt));
          CAPTURE(with_copies);
          CAPTURE(skip_at);
          AdamState cpu_state = make_adam_state(half_dt, with_copies, state_dt);
          AdamState gpu_state = to_device(cpu_state, kGpu);
          // Parameter 4 (50001 elements) on the GPU as views one element into wider buffers: not
          // aligned for the kernel's four-element groups, so its elements go one at a time.
          auto misaligned = [](const Tensor& t) {
            Tensor view = Tensor::zeros({t.numel() + 1}, t.dtype(), t.device()).slice0(1, t.numel() + 1);
            view.copy_from(t);
            return view;
          };
          for (std::vector<Tensor>* buffers : {&gpu_state.params, &gpu_state.m, &gpu_state.v})
            (*buffers)[4] = misaligned((*buffers)[4]);
          for (int t = 0; t < 3; ++t) {
            CAPTURE(t);
            std::vector<Tensor> grads;
            for (const Tensor& p : cpu_state.params) grads.push_back(random_cpu(p.shape(), DType::F32, p.format()));
            const Tensor skip = values_cpu({t == skip_at ? 1.0 : 0.0}, {1});
            const AdamState before = to_device(gpu_state, kCpu);

            ge::ops::adam_step(cpu_state.params, grads, cpu_state.m, cpu_state.v, cpu_state.step, skip, cfg,
                               cpu_state.copies);
            std::vector<Tensor> gpu_grads = clones(grads, kGpu);
            gpu_grads[4] = misaligned(gpu_grads[4]);
            ge::ops::adam_step(gpu_state.params, gpu_grads, gpu_state.m, gpu_state.v, gpu_state.step, gpu(skip), cfg,
                               gpu_state.copies);
            expect_adam_close(gpu_state, cpu_state);
            if (t == skip_at) {  // nothing moved, the step count included
              const AdamState after = to_device(gpu_state, kCpu);
              for (size_t i = 0; i < before.params.size(); ++i) {
                expect_identical("skipped param", after.params[i], before.params[i]);
                expect_identical("skipped exp_avg", after.m[i], before.m[i]);
                expect_identical("skipped exp_avg_sq", after.v[i], before.v[i]);
              }
              expect_identical("skipped step", after.step, before.step);
            }
          }
          CHECK(gpu_state.step.item() == (skip_at < 0 ? 3.0 : 2.0));
          // Half copies are the fp32 masters rounded once.
          for (size_t i = 0; i < gpu_state.copies.size(); ++i) {
            const Values master = gpu_state.params[i].to_doubles(), copy = gpu_state.copies[i].to_doubles();
            for (size_t j = 0; j < master.size(); j += 97) {
              const float m32 = static_cast<float>(master[j]);
              const double rounded = half_dt == DType::F16 ? ge::half_bits_to_float(ge::float_to_half_bits(m32))
                                                           : ge::bf16_bits_to_float(ge::float_to_bf16_bits(m32));
              CHECK(copy[j] == rounded);
            }
          }
        }
}

// With a static loss scale the trainer leaves an optimizer's last loss's gradients to Adam, which
// unscales them as it reads them (ops::PendingGrads): bitwise unscale_grads, then adam_step; the
// overflow flag (and with store_grads the gradients) written also on a skipped step, the
// gradients left as they were without store_grads.
TEST_CASE("gpu ops: Adam taking pending gradients is bitwise unscale_grads then the update") {
  GE_REQUIRE_GPU();
  ge::ops::AdamConfig cfg;
  cfg.lr = 1e-3f;
  for (DType state_dt : {DType::F32, DType::F16, DType::BF16})
    for (bool accumulate : {false, true})
      for (bool skip_step : {false, true})
        for (bool non_finite : {false, true})
          for (bool store : {true, false}) {
            CAPTURE(std::string(ge::dtype_name(state_dt)));
            CAPTURE(store);
            CAPTURE(accumulate);
            CAPTURE(skip_step);
            CAPTURE(non_finite);
            const AdamState start = make_adam_state(DType::F16, false, state_dt);
            AdamState apart = to_device(start, kGpu), fused = to_device(start, kGpu);
            std::vector<Tensor> src, grads_apart, grads_fused;
            for (size_t i = 0; i < start.params.size(); ++i) {
              const Tensor& p = start.params[i];
              Tensor s = random_cpu(p.shape(), state_dt, p.format(), -1000.0, 1000.0);
              if (non_finite && i == 4) {  // a NaN in the gradients: the flag goes up
                if (state_dt == DType::F32)
                  static_cast<float*>(s.data())[7] = NAN;
                else
                  static_cast<uint16_t*>(s.data())[7] = state_dt == DType::F16 ? 0x7E00 : 0x7FC0;
              }
              src.push_back(gpu(s));
              const Tensor g = gpu(random_cpu(p.shape(), DType::F32, p.format()));
              grads_apart.push_back(g);
              grads_fused.push_back(g.clone());
            }
            // Parameter 4's buffers one element into wider ones: its elements go one at a time.
            auto misaligned = [](const Tensor& t) {
              Tensor view = Tensor::zeros({t.numel() + 1}, t.dtype(), t.device()).slice0(1, t.numel() + 1);
              view.copy_from(t);
              return view;
            };
            for (AdamState* st : {&apart, &fused})
              for (std::vector<Tensor>* buffers : {&st->params, &st->m, &st->v})
                (*buffers)[4] = misaligned((*buffers)[4]);
            grads_apart[4] = misaligned(grads_apart[4]);
            grads_fused[4] = misaligned(grads_fused[4]);
            src[4] = misaligned(src[4]);
            const Tensor scale = gpu(values_cpu({1024.0}, {1}));
            const Tensor skip = gpu(values_cpu({skip_step ? 1.0 : 0.0}, {1}));
            Tensor found_apart = gpu(values_cpu({0.0}, {1})), found_fused = gpu(values_cpu({0.0}, {1}));

            ge::ops::unscale_grads(src, grads_apart, scale, found_apart, accumulate);
            ge::ops::adam_step(apart.params, grads_apart, apart.m, apart.v, apart.step, skip, cfg);
            std::vector<Tensor> grads_before;
            for (const Tensor& g : grads_fused) grads_before.push_back(g.to(kCpu));
            const ge::ops::PendingGrads pending{src, scale, found_fused, accumulate, store};
            ge::ops::adam_step(fused.params, grads_fused, fused.m, fused.v, fused.step, skip, cfg, {}, &pending);

            auto same_bits = [](const std::string& what, const Tensor& a, const Tensor& b) {  // NaNs included
              INFO(what, ": ", a.str());
              CHECK(ge::test::same_tensor(a, b));
            };
            for (size_t i = 0; i < start.params.size(); ++i) {
              CAPTURE(i);
              same_bits("param", fused.params[i], apart.params[i]);
              same_bits("exp_avg", fused.m[i], apart.m[i]);
              same_bits("exp_avg_sq", fused.v[i], apart.v[i]);
              same_bits("grad", grads_fused[i], store ? grads_apart[i] : grads_before[i]);
            }
            same_bits("step", fused.step, apart.step);
            same_bits("found_inf", found_fused, found_apart);
            CHECK(found_fused.item() == (non_finite ? 1.0 : 0.0));
            CHECK(fused.step.item() == (skip_step ? 0.0 : 1.0));
          }
}

}  // namespace gpu_checks

}  // namespace
