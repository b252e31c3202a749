// What the development probes (conv_engine_probe.cpp, phase_dgrad_probe.cpp,
// wgmma_dgrad_probe.cpp) share: timing a pass as the engine's search does, cuDNN's best
// backward-data to compare with, and comparing two results.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "conv_plan.h"
#include "cudnn_engine.h"
#include "ganengine/cuda_check.h"
#include "ganengine/cuda_context.h"
#include "ganengine/tensor.h"
#include "graph_timing.h"

namespace ge::probe_util {

constexpr int kRuns = 10;
// Workspace a probed configuration may use, as the search's cap (conv_search.cu).
constexpr size_t kWorkspaceCap = size_t{256} << 20;

// Microseconds per run, timed as a captured graph of kRuns runs (graph_timing.h).
template <class F>
double time_us(gpu::CudaContext& ctx, F run) {
  gpu::TimingEvents ev;
  return 1000.0 * gpu::graph_time_ms(ctx.stream(), kRuns, run, ev);
}

// cuDNN's best backward-data of dy into dx, chosen as the engine chooses it (the legacy
// algorithms' search, then the backend engine configurations'); x is a tensor of dx's shape for
// the plan. Owns a workspace of kWorkspaceCap bytes, which the probe may lend to its other
// passes between runs.
class CudnnBackwardData {
 public:
  CudnnBackwardData(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, const Conv2dParams& p,
                    gpu::CudaContext& ctx)
      : x_(x), w_(w), dy_(dy), dx_(dx), ctx_(ctx), plan_(x, w, dy, p) {
    CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceCap));
    gpu::search_algorithm(plan_, gpu::ConvPass::BackwardData, x, w, dy, dx.data(), false, false, ctx);
    gpu::search_engine(plan_, gpu::ConvPass::BackwardData, x, w, dy, dx.data(), p, false, false, ctx);
  }
  ~CudnnBackwardData() { cudaFree(workspace_); }
  CudnnBackwardData(const CudnnBackwardData&) = delete;
  CudnnBackwardData& operator=(const CudnnBackwardData&) = delete;

  cudnnStatus_t run() const {
    return gpu::run_pass(plan_, gpu::ConvPass::BackwardData, x_.data(), w_.data(), dy_.data(), dx_.data(), workspace_,
                         plan_.workspace_bytes, 0.f, ctx_);
  }
  double time_us() const {
    return probe_util::time_us(ctx_, [&] { return run() == CUDNN_STATUS_SUCCESS; });
  }
  std::string name() const { return plan_.engine ? plan_.engine->name() : "legacy"; }
  void* workspace() const { return workspace_; }

 private:
  const Tensor &x_, &w_, &dy_;
  Tensor& dx_;
  gpu::CudaContext& ctx_;
  gpu::ConvPlan plan_;
  void* workspace_ = nullptr;
};

// n values drawn from N(0, 1), seeded.
inline std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

// A half NHWC tensor of random_floats on the GPU.
inline Tensor random_half(const Shape& shape, uint32_t seed) {
  return Tensor::from_floats(random_floats(shape_numel(shape), seed), shape, DType::F16, Device::cuda(0),
                             MemoryFormat::NHWC);
}

// Largest |a - b| relative to the largest |a|.
inline double relative_diff(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_floats(), y = b.to_floats();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, std::fabs(double(x[i]) - y[i]));
    scale = std::max(scale, std::fabs(double(x[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// The command line every probe takes: [GE_PROBE_BUDGET=seconds] PROBE [batch ...] (default
// 1024 64); the budget is the engine search's seconds per pass (the engine's own: 0.5). Prints
// cuDNN's version; stdout goes line by line, so a run cut short keeps what it printed.
struct ProbeArgs {
  double budget_s = 0.5;
  std::vector<int64_t> batches;
};
inline ProbeArgs probe_args(int argc, char** argv) {
  ProbeArgs a;
  if (const char* b = std::getenv("GE_PROBE_BUDGET")) a.budget_s = std::atof(b);
  for (int i = 1; i < argc; ++i) a.batches.push_back(std::atoll(argv[i]));
  if (a.batches.empty()) a.batches = {1024, 64};
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::printf("cuDNN %zu\n", cudnnGetVersion());
  return a;
}

// f(N, C, H) for each batch given and each of the DCGAN's stride-2 layers with cuDNN-run
// convolutions: C input channels at H x H, 2C output channels at H/2 (64x64 images).
template <class F>
void for_each_layer(const ProbeArgs& a, F f) {
  for (int64_t N : a.batches)
    for (int64_t C : {64, 128, 256}) f(N, C, 64 * 64 / C / 2);
}

}  // namespace ge::probe_util
