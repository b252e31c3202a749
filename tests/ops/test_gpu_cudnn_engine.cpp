// cuDNN backend engine configurations (kernels/cuda/conv/cudnn_engine.h): what the search settles on
// for each pass computes what the CPU reference does (in fp32 without TF32 to fp32's accuracy),
// and a configuration name that does not exist builds nothing (the caller then keeps the legacy
// algorithm).
#if GE_WITH_CUDA
#include <chrono>
#include <string>

#include "cuda/conv/cudnn_engine.h"
#include "runtime/cuda_context.h"
#include "support/test_util.h"

namespace {

using ge::Device;
using ge::DType;
using ge::MemoryFormat;
using ge::Tensor;
using ge::gpu::ConvPass;

// D's second layer in miniature: 64 -> 128 channels, 4x4 stride 2 (half NHWC as O2/O3 run it,
// or f32 NCHW as O0 does).
struct Problem {
  explicit Problem(DType dt = DType::F16, MemoryFormat f = MemoryFormat::NHWC)
      : x(ge::test::random_tensor({8, 64, 16, 16}, dt, Device::cpu(), f)),
        w(ge::test::random_tensor({128, 64, 4, 4}, dt, Device::cpu(), f)),
        y(ge::test::random_tensor({8, 128, 8, 8}, dt, Device::cpu(), f)) {}
  Tensor x, w, y;
  ge::Conv2dParams p{2, 1};
};

// The pass's output on the CPU (in the problem's dtype, as the GPU writes it).
Tensor cpu_reference(const Problem& pr, ConvPass pass) {
  switch (pass) {
    case ConvPass::Forward: {
      Tensor out = Tensor::zeros(pr.y.shape(), pr.y.dtype(), Device::cpu(), pr.y.format());
      ge::ops::conv2d_forward(pr.x, pr.w, out, pr.p);
      return out;
    }
    case ConvPass::BackwardData: {
      Tensor out = Tensor::zeros(pr.x.shape(), pr.x.dtype(), Device::cpu(), pr.x.format());
      ge::ops::conv2d_backward_data(pr.y, pr.w, out, pr.p);
      return out;
    }
    default: {
      Tensor out = Tensor::zeros(pr.w.shape(), pr.w.dtype(), Device::cpu(), pr.w.format());
      ge::ops::conv2d_backward_filter(pr.x, pr.y, out, pr.p, 0.f);
      return out;
    }
  }
}

// Searches each pass's configurations under `filter` and checks the one found against the CPU
// reference within `tolerance`.
void check_found_configurations(const Problem& pr, const ge::gpu::EngineFilter& filter, double tolerance) {
  const Tensor x = pr.x.to(Device::cuda(0)), w = pr.w.to(Device::cuda(0)), y = pr.y.to(Device::cuda(0));
  ge::gpu::CudaContext& ctx = ge::gpu::context(0);
  for (ConvPass pass : {ConvPass::Forward, ConvPass::BackwardData, ConvPass::BackwardFilter}) {
    INFO(ge::gpu::pass_name(pass));
    const Tensor ref = cpu_reference(pr, pass);
    Tensor out = Tensor::empty(ref.shape(), ref.dtype(), Device::cuda(0), ref.format());
    Tensor ws = Tensor::empty({256 << 20}, DType::U8, Device::cuda(0));
    const ge::gpu::EngineConv conv = ge::gpu::engine_conv(pass, x, w, y, pr.p, 0.f);
    // Wall-clock time of one synchronised run: enough to rank configurations here.
    auto time_ms = [&](const ge::gpu::EnginePlan& plan) {
      if (plan.workspace_bytes() > ws.nbytes()) return 1e30;
      const auto t0 = std::chrono::steady_clock::now();
      if (plan.run(ctx.cudnn(), x.data(), w.data(), y.data(), out.data(), ws.data()) != CUDNN_STATUS_SUCCESS)
        return 1e30;
      CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    };
    const ge::gpu::EngineSearchResult found = ge::gpu::search_engine_config(ctx.cudnn(), conv, filter, time_ms, 0.5);
    REQUIRE_FALSE(found.name.empty());
    CHECK(found.timed >= 1);
    const auto plan = ge::gpu::build_engine_plan(ctx.cudnn(), conv, found.name, filter);
    REQUIRE(plan);
    CHECK(plan->name() == found.name);
    ge::test::poison(out);
    REQUIRE(plan->run(ctx.cudnn(), x.data(), w.data(), y.data(), out.data(), ws.data()) == CUDNN_STATUS_SUCCESS);
    const double err = ge::test::rel_error(out.to(Device::cpu()), ref);
    INFO(found.name, " relative error ", err);
    CHECK(err <= tolerance);
  }
}

}  // namespace

TEST_CASE("cudnn engine: the configuration the search finds for each pass matches the CPU reference") {
  GE_REQUIRE_GPU();
  check_found_configurations(Problem(), ge::gpu::EngineFilter{true}, ge::test::tolerance_for(DType::F16));
}

// O0 searches configurations too, without Tensor Cores (EngineFilter::fma_only): a TF32 one would
// be off by some 1e-4 here (10 bits of mantissa), ten times fp32's tolerance and more.
TEST_CASE("cudnn engine: fp32 without TF32 takes configurations within fp32 accuracy") {
  GE_REQUIRE_GPU();
  check_found_configurations(Problem(DType::F32, MemoryFormat::NCHW), ge::gpu::EngineFilter{true, true},
                             ge::test::tolerance_for(DType::F32));
}

TEST_CASE("cudnn engine: a configuration name that does not exist here builds no plan") {
  GE_REQUIRE_GPU();
  const Problem pr;
  const Tensor x = pr.x.to(Device::cuda(0)), w = pr.w.to(Device::cuda(0)), y = pr.y.to(Device::cuda(0));
  const ge::gpu::EngineConv conv = ge::gpu::engine_conv(ConvPass::BackwardFilter, x, w, y, pr.p, 0.f);
  ge::gpu::CudaContext& ctx = ge::gpu::context(0);
  for (const char* name : {"", "x1", "e", "e-1", "e1,2", "e1,2=", "e1 2=3", "e999999"}) {
    INFO("name '", name, "'");
    CHECK_FALSE(ge::gpu::build_engine_plan(ctx.cudnn(), conv, name, ge::gpu::EngineFilter{}));
  }
}
#endif
