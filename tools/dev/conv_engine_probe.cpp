// Development probe (GPU): for the DCGAN's cuDNN-run convolution shapes, times the legacy API's
// choice (conv_search.cu) beside the backend engine configuration cudnn_engine.h's search finds
// (timed with 10 runs where the engine times 3), and compares their results. One line per pass
// and shape.
//
//   [GE_PROBE_BUDGET=seconds] build/ganengine_conv_probe [batch ...]        (default: 1024 64)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "conv_plan.h"
#include "cudnn_engine.h"
#include "ganengine/cuda_context.h"
#include "probe_util.h"

using namespace ge;
using namespace ge::gpu;
using namespace ge::probe_util;

namespace {

void probe(int64_t N, int64_t C, int64_t H, ConvPass pass, double budget_s, CudaContext& ctx) {
  const int64_t K = 2 * C, P = H / 2;
  const Conv2dParams p{/*stride=*/2, /*pad=*/1};
  Tensor x = random_half({N, C, H, H}, 1), w = random_half({K, C, 4, 4}, 2), y = random_half({N, K, P, P}, 3);
  const Tensor& out_like = pass == ConvPass::Forward ? y : (pass == ConvPass::BackwardData ? x : w);
  Tensor legacy_out = Tensor::empty(out_like.shape(), DType::F16, Device::cuda(0), MemoryFormat::NHWC);
  Tensor engine_out = Tensor::empty(out_like.shape(), DType::F16, Device::cuda(0), MemoryFormat::NHWC);
  void* ws = nullptr;
  CUDA_CHECK(cudaMalloc(&ws, kWorkspaceCap));

  ConvPlan plan(x, w, y, p);
  search_algorithm(plan, pass, x, w, y, legacy_out.data(), false, false, ctx);
  const double legacy_us = time_us(ctx, [&] {
    return run_pass(plan, pass, x.data(), w.data(), y.data(), legacy_out.data(), ws, plan.workspace_bytes, 0.f,
                    ctx) == CUDNN_STATUS_SUCCESS;
  });
  const double flops = 2.0 * N * P * P * K * C * 16;

  const auto t0 = std::chrono::steady_clock::now();
  const EngineConv conv = engine_conv(pass, x, w, y, p, 0.f);
  auto time_plan = [&](const EnginePlan& ep) {
    if (ep.workspace_bytes() > kWorkspaceCap) return double(INFINITY);
    const double us = time_us(ctx, [&] {
      return ep.run(ctx.cudnn(), x.data(), w.data(), y.data(), engine_out.data(), ws) == CUDNN_STATUS_SUCCESS;
    });
    (void)cudaGetLastError();
    return us * 1e-3;
  };
  const EngineSearchResult found = search_engine_config(ctx.cudnn(), conv, EngineFilter{}, time_plan, budget_s);
  const double search_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double diff = -1;
  if (!found.name.empty()) {
    const std::unique_ptr<EnginePlan> ep = build_engine_plan(ctx.cudnn(), conv, found.name, EngineFilter{});
    CUDNN_CHECK(ep->run(ctx.cudnn(), x.data(), w.data(), y.data(), engine_out.data(), ws));
    diff = relative_diff(legacy_out, engine_out);
  }
  const double engine_us = found.ms * 1e3;
  std::printf("%-15s N=%-4lld C=%3lld->%3lld: legacy algo %d %6.1f us (%3.0f TFLOP/s)  engine %6.1f us (%3.0f TFLOP/s, "
              "%.2fx) diff %.1e  %d timed in %.2f s  %s\n",
              pass_name(pass), (long long)N, (long long)C, (long long)K, plan.algo, legacy_us,
              flops / legacy_us * 1e-6, engine_us, flops / engine_us * 1e-6, legacy_us / engine_us, diff, found.timed,
              search_s, found.name.c_str());
  CUDA_CHECK(cudaFree(ws));
}

}  // namespace

int main(int argc, char** argv) {
  const ProbeArgs args = probe_args(argc, argv);
  CudaContext& ctx = context(0);
  for_each_layer(args, [&](int64_t N, int64_t C, int64_t H) {
    for (ConvPass pass : {ConvPass::Forward, ConvPass::BackwardData, ConvPass::BackwardFilter})
      probe(N, C, H, pass, args.budget_s, ctx);
  });
  return 0;
}
