// Development probe (GPU): the backward-data of the DCGAN's 4x4, stride-2, pad-1 layers (and so
// G's transposed forwards, the same pass) run as four stride-1 2x2 forward convolutions, one per
// output phase, each writing its quarter of dx's pixels in place through strides, beside cuDNN's
// own backward-data (the legacy algorithm and the engine search the layers use). cuDNN runs the
// 64 <-> 128-channel pair's backward-data at about 48% Tensor Core activity at batch 1024.
//
// Output pixel 2m + a of a row takes kernel rows k with 2m + a = 2o - 1 + k: for a = 0 the taps
// k = 3 (dy row m - 1) and k = 1 (row m), a 2-tap correlation padded one row before; for a = 1
// the taps k = 2 (row m) and k = 0 (row m + 1), padded one row after. Columns alike.
//
//   [GE_PROBE_BUDGET=seconds] [GE_PROBE_PACKED=1] build/ganengine_phase_probe [batch ...]   (default: 1024 64)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
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

// The phase (a, b) filter: f[c][k][t][u] = w[k][c][3 - a - 2t][3 - b - 2u], logical (C, K, 2, 2).
std::vector<float> phase_filter(const std::vector<float>& w, int64_t K, int64_t C, int a, int b) {
  std::vector<float> f(static_cast<size_t>(C * K * 4));
  for (int64_t c = 0; c < C; ++c)
    for (int64_t k = 0; k < K; ++k)
      for (int t = 0; t < 2; ++t)
        for (int u = 0; u < 2; ++u)
          f[((c * K + k) * 2 + t) * 2 + u] = w[((k * C + c) * 4 + (3 - a - 2 * t)) * 4 + (3 - b - 2 * u)];
  return f;
}

void probe(int64_t N, int64_t C, int64_t H, double budget_s, CudaContext& ctx) {
  const int64_t K = 2 * C, P = H / 2;
  const Conv2dParams p{/*stride=*/2, /*pad=*/1};
  const std::vector<float> wv = random_floats(K * C * 16, 2);
  Tensor w = Tensor::from_floats(wv, {K, C, 4, 4}, DType::F16, Device::cuda(0), MemoryFormat::NHWC);
  Tensor dy = Tensor::from_floats(random_floats(N * K * P * P, 3), {N, K, P, P}, DType::F16, Device::cuda(0),
                                  MemoryFormat::NHWC);
  Tensor x = Tensor::empty({N, C, H, H}, DType::F16, Device::cuda(0), MemoryFormat::NHWC);
  Tensor dx_cudnn = Tensor::empty(x.shape(), DType::F16, Device::cuda(0), MemoryFormat::NHWC);
  Tensor dx_phase = Tensor::empty(x.shape(), DType::F16, Device::cuda(0), MemoryFormat::NHWC);
  const CudnnBackwardData cudnn(x, w, dy, dx_cudnn, p, ctx);
  void* const ws = cudnn.workspace();  // the phases' forwards borrow it
  const double cudnn_us = cudnn.time_us();
  const double flops = 2.0 * N * P * P * K * C * 16;

  // Four forward convolutions: x = dy, w = the phase's filter, y = dx's phase pixels.
  std::vector<Tensor> filters;
  std::vector<std::unique_ptr<EnginePlan>> plans;
  std::vector<char*> outs;
  std::string names;
  // GE_PROBE_PACKED=1: each phase into its own packed (N, P+1, P+1, C) tensor with pad 1 on
  // every side (the 2x2 filter's output one pixel larger; a consumer would read the phase's
  // P x P window at its offset): the time of such forwards, not their values.
  const char* packed_env = std::getenv("GE_PROBE_PACKED");
  const bool packed = packed_env && *packed_env && std::string(packed_env) != "0";
  std::vector<Tensor> packed_outs;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b) {
      filters.push_back(Tensor::from_floats(phase_filter(wv, K, C, a, b), {C, K, 2, 2}, DType::F16, Device::cuda(0),
                                            MemoryFormat::NHWC));
      EngineConv c;
      c.pass = ConvPass::Forward;
      c.dtype = CUDNN_DATA_HALF;
      const int64_t xd[4] = {N, K, P, P}, xs[4] = {P * P * K, 1, P * K, K};
      const int64_t wd[4] = {C, K, 2, 2}, wst[4] = {4 * K, 1, 2 * K, K};
      const int64_t yd[4] = {N, C, P, P}, ys[4] = {H * H * C, 1, 2 * H * C, 2 * C};
      std::copy(xd, xd + 4, c.x_dims), std::copy(xs, xs + 4, c.x_strides);
      std::copy(wd, wd + 4, c.w_dims), std::copy(wst, wst + 4, c.w_strides);
      std::copy(yd, yd + 4, c.y_dims), std::copy(ys, ys + 4, c.y_strides);
      c.pre_pad[0] = 1 - a, c.pre_pad[1] = 1 - b, c.post_pad[0] = a, c.post_pad[1] = b;
      c.stride = 1;
      char* out = static_cast<char*>(dx_phase.data()) + (a * H + b) * C * 2;
      if (packed) {
        const int64_t Q = P + 1;
        const int64_t pd[4] = {N, C, Q, Q}, ps[4] = {Q * Q * C, 1, Q * C, C};
        std::copy(pd, pd + 4, c.y_dims), std::copy(ps, ps + 4, c.y_strides);
        c.pre_pad[0] = c.pre_pad[1] = c.post_pad[0] = c.post_pad[1] = 1;
        packed_outs.push_back(Tensor::empty({N, C, Q, Q}, DType::F16, Device::cuda(0), MemoryFormat::NHWC));
        out = static_cast<char*>(packed_outs.back().data());
      }
      const Tensor& f = filters.back();
      auto time_plan = [&](const EnginePlan& ep) {
        if (ep.workspace_bytes() > kWorkspaceCap) return double(INFINITY);
        const double us = time_us(
            ctx, [&] { return ep.run(ctx.cudnn(), dy.data(), f.data(), nullptr, out, ws) == CUDNN_STATUS_SUCCESS; });
        (void)cudaGetLastError();
        return us * 1e-3;
      };
      const EngineSearchResult found = search_engine_config(ctx.cudnn(), c, EngineFilter{}, time_plan, budget_s);
      if (found.name.empty()) {
        std::printf("N=%-4lld C=%3lld<-%3lld phase (%d,%d): no engine configuration takes it\n", (long long)N,
                    (long long)C, (long long)K, a, b);
        return;
      }
      names += " " + found.name;
      plans.push_back(build_engine_plan(ctx.cudnn(), c, found.name, EngineFilter{}));
      outs.push_back(out);
    }
  auto run_phases = [&] {
    for (size_t i = 0; i < plans.size(); ++i)
      if (plans[i]->run(ctx.cudnn(), dy.data(), filters[i].data(), nullptr, outs[i], ws) != CUDNN_STATUS_SUCCESS)
        return false;
    return true;
  };
  const double phase_us = time_us(ctx, run_phases);
  CUDA_CHECK(cudaMemset(dx_phase.data(), 0xff, dx_phase.nbytes()));  // every pixel must be written again
  (void)run_phases();
  CUDNN_CHECK(cudnn.run());
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
  const double diff = packed ? NAN : relative_diff(dx_cudnn, dx_phase);
  std::printf(
      "N=%-4lld C=%3lld<-%3lld: cuDNN backward-data %7.1f us (%3.0f TFLOP/s, %s)  four phases %7.1f us "
      "(%3.0f TFLOP/s, %.2fx) diff %.1e %s\n",
      (long long)N, (long long)C, (long long)K, cudnn_us, flops / cudnn_us * 1e-6, cudnn.name().c_str(), phase_us,
      flops / phase_us * 1e-6, cudnn_us / phase_us, diff, names.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const ProbeArgs args = probe_args(argc, argv);
  CudaContext& ctx = context(0);
  for_each_layer(args, [&](int64_t N, int64_t C, int64_t H) { probe(N, C, H, args.budget_s, ctx); });
  return 0;
}
