// cuDNN backend engine configurations (kernels/cuda/cudnn_engine.h): what the search settles on
// for each pass computes what the CPU reference does, and a configuration name that does not
// exist builds nothing (the caller then keeps the legacy algorithm).
#if GE_WITH_CUDA
#include <chrono>
#include <string>

#include "cudnn_engine.h"
#include "ganengine/cuda_context.h"
#include "test_util.h"

namespace {

using ge::Device;
using ge::DType;
using ge::MemoryFormat;
using ge::Tensor;
using ge::gpu::ConvPass;

// D's second layer in miniature: 64 -> 128 channels, 4x4 stride 2, half NHWC.
struct Problem {
  Tensor x = ge::test::random_tensor({8, 64, 16, 16}, DType::F16, Device::cpu(), MemoryFormat::NHWC);
  Tensor w = ge::test::random_tensor({128, 64, 4, 4}, DType::F16, Device::cpu(), MemoryFormat::NHWC);
  Tensor y = ge::test::random_tensor({8, 128, 8, 8}, DType::F16, Device::cpu(), MemoryFormat::NHWC);
  ge::Conv2dParams p{2, 1};
};

// The pass's output on the CPU (f16, as the GPU writes it).
Tensor cpu_reference(const Problem& pr, ConvPass pass) {
  switch (pass) {
    case ConvPass::Forward: {
      Tensor out = Tensor::zeros(pr.y.shape(), DType::F16, Device::cpu(), MemoryFormat::NHWC);
      ge::ops::conv2d_forward(pr.x, pr.w, out, pr.p);
      return out;
    }
    case ConvPass::BackwardData: {
      Tensor out = Tensor::zeros(pr.x.shape(), DType::F16, Device::cpu(), MemoryFormat::NHWC);
      ge::ops::conv2d_backward_data(pr.y, pr.w, out, pr.p);
      return out;
    }
    default: {
      Tensor out = Tensor::zeros(pr.w.shape(), DType::F16, Device::cpu(), MemoryFormat::NHWC);
      ge::ops::conv2d_backward_filter(pr.x, pr.y, out, pr.p, 0.f);
      return out;
    }
  }
}

}  // namespace

TEST_CASE("cudnn engine: the configuration the search finds for each pass matches the CPU reference") {
  GE_REQUIRE_GPU();
  const Problem pr;
  const Tensor x = pr.x.to(Device::cuda(0)), w = pr.w.to(Device::cuda(0)), y = pr.y.to(Device::cuda(0));
  ge::gpu::CudaContext& ctx = ge::gpu::context(0);
  for (ConvPass pass : {ConvPass::Forward, ConvPass::BackwardData, ConvPass::BackwardFilter}) {
    INFO(ge::gpu::pass_name(pass));
    const Tensor ref = cpu_reference(pr, pass);
    Tensor out = Tensor::empty(ref.shape(), DType::F16, Device::cuda(0), MemoryFormat::NHWC);
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
    const ge::gpu::EngineSearchResult found =
        ge::gpu::search_engine_config(ctx.cudnn(), conv, ge::gpu::EngineFilter{true}, time_ms, 0.5);
    REQUIRE_FALSE(found.name.empty());
    CHECK(found.timed >= 1);
    const auto plan = ge::gpu::build_engine_plan(ctx.cudnn(), conv, found.name, ge::gpu::EngineFilter{true});
    REQUIRE(plan);
    CHECK(plan->name() == found.name);
    ge::test::poison(out);
    REQUIRE(plan->run(ctx.cudnn(), x.data(), w.data(), y.data(), out.data(), ws.data()) == CUDNN_STATUS_SUCCESS);
    const double err = ge::test::rel_error(out.to(Device::cpu()), ref);
    INFO(found.name, " relative error ", err);
    CHECK(err <= ge::test::tolerance_for(DType::F16));
  }
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
