// Choosing cuDNN's algorithm for a convolution pass (conv_plan.h), once per shape.
//
// cuDNN's heuristics rank every algorithm without running any (cudnnGet*Algorithm_v7); the first
// kTimedCandidates usable ones are run on the real buffers and the fastest is kept. (Timing every
// algorithm, slow ones included, as cudnnFind*AlgorithmEx does, makes the process start seconds
// longer for the same choices: docs/performance.md.)
//
// Which algorithms qualify: fp32 without TF32 only FMA kernels (as PyTorch asserts for
// allow_tf32=False); with deterministic_only only those cuDNN reports deterministic; none that
// needs more than the search's workspace. Half-precision passes take Tensor Core algorithms and
// fall back to other math only when there is none: FMA kernels that time well alone run the
// captured step far slower than Tensor Core ones, and the choice would vary from run to run.
//
// Every candidate is timed as a captured CUDA graph of kTimedRuns runs (graph_timing.h), as the
// training step runs it, and a short one again over more runs (time_runs): timed as stream calls,
// the legacy API's host work hides the kernels at small batches.
//
// Then (search_engine): cuDNN's backend engine configurations (cudnn_engine.h). The legacy API
// runs one configuration per algorithm, and for several DCGAN layers not the fastest tile (a
// cluster along N runs the 64 <-> 128-channel backward-filter far faster). fp32
// without TF32 takes engines without Tensor Cores (as PyTorch's cuDNN v8 path filters them).
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "cuda/conv/conv_plan.h"
#include "cuda/conv/cudnn_engine.h"
#include "runtime/graph_timing.h"

namespace ge {
namespace gpu {

namespace {

// Largest workspace an algorithm may ask for: plenty for the algorithms worth having, and bounded
// so that one exotic algorithm cannot take memory the activations need.
constexpr size_t kWorkspaceCap = size_t{256} << 20;
constexpr size_t kTimedCandidates = 4;
constexpr int kTimedRuns = 3;
// A pass shorter than kShortPassMs a run is timed again as a graph of about kShortGraphMs: one
// replay of kTimedRuns runs of a kernel of a few microseconds varies by a few percent from replay
// to replay, enough to flip the choice between two engines whose steps differ measurably
// (docs/performance.md).
constexpr double kShortPassMs = 0.05;
constexpr double kShortGraphMs = 0.3;
constexpr int kMaxTimedRuns = 32;

// Milliseconds a run of `run`, as graph_time_ms times it: kTimedRuns runs, and more for a short pass.
template <class Run>
double time_runs(cudaStream_t stream, const Run& run, TimingEvents& ev) {
  const double ms = graph_time_ms(stream, kTimedRuns, run, ev);
  if (!(ms < kShortPassMs)) return ms;  // long enough, or failed (infinity)
  const int runs = std::min(kMaxTimedRuns, static_cast<int>(kShortGraphMs / std::max(ms, 1e-3)) + 1);
  return graph_time_ms(stream, runs, run, ev);
}

// The search's own workspace, freed when it ends: trying algorithms needs the cap, the chosen
// ones usually far less, and only what they need stays allocated in the context's workspace
// (which, searched in, would stay at the cap for the whole run). Smaller when the GPU
// cannot spare the cap; the search then only considers algorithms that fit.
class SearchWorkspace {
 public:
  SearchWorkspace() {
    for (size_t want = kWorkspaceCap; want >= (size_t{1} << 20); want /= 4) {
      if (cudaMalloc(&ptr_, want) == cudaSuccess) {
        bytes_ = want;
        return;
      }
      (void)cudaGetLastError();  // an out-of-memory error is not sticky: try a smaller one
      ptr_ = nullptr;
    }
  }
  ~SearchWorkspace() {
    if (ptr_) (void)cudaFree(ptr_);
  }
  SearchWorkspace(const SearchWorkspace&) = delete;
  SearchWorkspace& operator=(const SearchWorkspace&) = delete;
  void* ptr() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// One algorithm as cuDNN's heuristics or its timing report it (the three passes' perf structs
// have the same fields).
struct Candidate {
  int algo = 0;
  cudnnStatus_t status = CUDNN_STATUS_NOT_SUPPORTED;
  size_t memory = 0;
  cudnnDeterminism_t determinism = CUDNN_NON_DETERMINISTIC;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

template <class Perf>
std::vector<Candidate> candidates_of(const Perf* perf, int n) {
  std::vector<Candidate> out;
  for (int i = 0; i < n; ++i)
    out.push_back(
        {static_cast<int>(perf[i].algo), perf[i].status, perf[i].memory, perf[i].determinism, perf[i].mathType});
  return out;
}

// Every algorithm, best first by cuDNN's heuristics (search_algorithm times the first few).
std::vector<Candidate> ranked_candidates(const ConvPlan& plan, ConvPass pass, CudaContext& ctx) {
  int n = 0;
  switch (pass) {
    case ConvPass::Forward: {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(ctx.cudnn(), plan.x_desc.get(), plan.w_desc.get(),
                                                         plan.conv_desc.get(), plan.y_desc.get(),
                                                         CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf));
      return candidates_of(perf, n);
    }
    case ConvPass::BackwardData: {
      cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(ctx.cudnn(), plan.w_desc.get(), plan.y_desc.get(),
                                                              plan.conv_desc.get(), plan.x_desc.get(),
                                                              CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf));
      return candidates_of(perf, n);
    }
    default: {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(ctx.cudnn(), plan.x_desc.get(), plan.y_desc.get(),
                                                                plan.conv_desc.get(), plan.w_desc.get(),
                                                                CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, perf));
      return candidates_of(perf, n);
    }
  }
}

// The candidates that qualify (see the top of the file), in their order: Tensor Core ones only
// when prefer_tensor_ops and there is at least one.
std::vector<Candidate> qualifying(const std::vector<Candidate>& ranked, size_t cap, bool fma_only,
                                  bool deterministic_only, bool prefer_tensor_ops) {
  std::vector<Candidate> ok, tensor_ops;
  for (const Candidate& c : ranked) {
    if (c.status != CUDNN_STATUS_SUCCESS || c.memory > cap) continue;
    if (deterministic_only && c.determinism != CUDNN_DETERMINISTIC) continue;
    if (fma_only && c.math != CUDNN_FMA_MATH) continue;
    ok.push_back(c);
    if (c.math == CUDNN_TENSOR_OP_MATH) tensor_ops.push_back(c);
  }
  return prefer_tensor_ops && !tensor_ops.empty() ? tensor_ops : ok;
}

bool adopt(ConvPlan& plan, ConvPass pass, const Candidate& c, size_t cap, CudaContext& ctx) {
  return adopt_choice(plan, pass, c.algo, c.math, c.memory, cap, ctx);
}

// The plan's current algorithm, timed.
double time_choice(const ConvPlan& plan, ConvPass pass, const Tensor& x, const Tensor& w, const Tensor& y, void* out,
                   void* ws, CudaContext& ctx, TimingEvents& ev) {
  auto run = [&] {
    return run_pass(plan, pass, x.data(), w.data(), y.data(), out, ws, plan.workspace_bytes, 0.f, ctx) ==
           CUDNN_STATUS_SUCCESS;
  };
  return time_runs(ctx.stream(), run, ev);
}

}  // namespace

cudnnMathType_t requested_math(DType t, bool allow_tf32) {
  if (t != DType::F32) return CUDNN_TENSOR_OP_MATH;
  return allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

std::string search_policy(DType dtype) {
  // The tag changes whenever the search would choose differently, so that choices stored by a
  // search that chose otherwise are made again: "engines-fp32": fp32 passes search engine
  // configurations too; "-c3": cluster shapes are powers of two and short passes are timed over
  // more runs.
  return dtype == DType::F32 ? "tensor-core|timed|engines-fp32-c3" : "tensor-core|timed|engines-c3";
}

cudnnStatus_t workspace_needed(const ConvPlan& plan, ConvPass pass, CudaContext& ctx, size_t* needed) {
  switch (pass) {
    case ConvPass::Forward:
      return cudnnGetConvolutionForwardWorkspaceSize(ctx.cudnn(), plan.x_desc.get(), plan.w_desc.get(),
                                                     plan.conv_desc.get(), plan.y_desc.get(),
                                                     static_cast<cudnnConvolutionFwdAlgo_t>(plan.algo), needed);
    case ConvPass::BackwardData:
      return cudnnGetConvolutionBackwardDataWorkspaceSize(
          ctx.cudnn(), plan.w_desc.get(), plan.y_desc.get(), plan.conv_desc.get(), plan.x_desc.get(),
          static_cast<cudnnConvolutionBwdDataAlgo_t>(plan.algo), needed);
    default:
      return cudnnGetConvolutionBackwardFilterWorkspaceSize(
          ctx.cudnn(), plan.x_desc.get(), plan.y_desc.get(), plan.conv_desc.get(), plan.w_desc.get(),
          static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan.algo), needed);
  }
}

bool adopt_choice(ConvPlan& plan, ConvPass pass, int algo, cudnnMathType_t math, size_t workspace_bytes, size_t cap,
                  CudaContext& ctx) {
  plan.algo = algo;
  plan.math = math;
  // cuDNN decides Tensor Core use from algorithm + math type together.
  plan.conv_desc.set_math(math);
  size_t needed = 0;
  if (workspace_needed(plan, pass, ctx, &needed) != CUDNN_STATUS_SUCCESS || needed > cap) return false;
  plan.workspace_bytes = std::max(needed, workspace_bytes);
  return true;
}

cudnnStatus_t run_pass(const ConvPlan& plan, ConvPass pass, const void* x, const void* w, const void* y, void* out,
                       void* workspace, size_t workspace_bytes, float beta, CudaContext& ctx) {
  const float alpha = 1.f;
  switch (pass) {
    case ConvPass::Forward:
      return cudnnConvolutionForward(ctx.cudnn(), &alpha, plan.x_desc.get(), x, plan.w_desc.get(), w,
                                     plan.conv_desc.get(), static_cast<cudnnConvolutionFwdAlgo_t>(plan.algo), workspace,
                                     workspace_bytes, &beta, plan.y_desc.get(), out);
    case ConvPass::BackwardData:
      return cudnnConvolutionBackwardData(ctx.cudnn(), &alpha, plan.w_desc.get(), w, plan.y_desc.get(), y,
                                          plan.conv_desc.get(), static_cast<cudnnConvolutionBwdDataAlgo_t>(plan.algo),
                                          workspace, workspace_bytes, &beta, plan.x_desc.get(), out);
    default:
      return cudnnConvolutionBackwardFilter(ctx.cudnn(), &alpha, plan.x_desc.get(), x, plan.y_desc.get(), y,
                                            plan.conv_desc.get(),
                                            static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan.algo), workspace,
                                            workspace_bytes, &beta, plan.w_desc.get(), out);
  }
}

void search_algorithm(ConvPlan& plan, ConvPass pass, const Tensor& x, const Tensor& w, const Tensor& y, void* out,
                      bool fma_only, bool deterministic_only, CudaContext& ctx) {
  // Work queued on the other lane (cuda_context.h) would share the GPU with the timed runs.
  synchronize(ctx.device);
  const SearchWorkspace ws;
  const bool prefer_tensor_ops = x.dtype() != DType::F32;
  bool chosen = false;
  {
    std::vector<Candidate> shortlist =
        qualifying(ranked_candidates(plan, pass, ctx), ws.bytes(), fma_only, deterministic_only, prefer_tensor_ops);
    if (shortlist.size() > kTimedCandidates) shortlist.resize(kTimedCandidates);
    TimingEvents ev;
    double best_ms = std::numeric_limits<double>::infinity();
    Candidate best;
    for (const Candidate& c : shortlist) {
      if (!adopt(plan, pass, c, ws.bytes(), ctx)) continue;
      const double ms = time_choice(plan, pass, x, w, y, out, ws.ptr(), ctx, ev);
      if (ms < best_ms) {
        best_ms = ms;
        best = c;
      }
    }
    chosen = best_ms < std::numeric_limits<double>::infinity() && adopt(plan, pass, best, ws.bytes(), ctx);
  }
  GE_CHECK(chosen, "cuDNN has no usable ", pass_name(pass), " algorithm for x ", x.str(), ", w ", w.str(), ", y ",
           y.str(), fma_only ? " without TF32" : "", deterministic_only ? " (deterministic only)" : "", " within a ",
           ws.bytes() >> 20, " MiB workspace");
}

// ---- backend engine configurations (cudnn_engine.h)

namespace {

// The algorithm stays only when it is at least this much faster than the best configuration;
// within that band the configuration replaces it. Both are timed alone, which at small batches
// measures latency on an otherwise idle GPU, not what a kernel costs beside another lane's: a
// legacy choice (an sm80 CUTLASS kernel) that times as fast alone can run far slower inside the
// step than a configuration's Hopper kernel, and ties going to the configuration make separate
// processes' searches agree more often (docs/performance.md).
constexpr double kAlgorithmMustGain = 0.97;
constexpr double kEngineBudgetS = 0.5;  // per pass; the DCGAN's searches end well within it
// fp32 configurations run far longer: a tenth of the budget starts training much sooner and finds
// configurations as fast (docs/performance.md).
constexpr double kEngineBudgetFp32S = 0.05;

}  // namespace

void search_engine(ConvPlan& plan, ConvPass pass, const Tensor& x, const Tensor& w, const Tensor& y, void* out,
                   const Conv2dParams& p, bool fma_only, bool deterministic_only, CudaContext& ctx) {
  synchronize(ctx.device);
  const SearchWorkspace ws;
  TimingEvents ev;
  const double algo_ms = time_choice(plan, pass, x, w, y, out, ws.ptr(), ctx, ev);
  const EngineConv conv = engine_conv(pass, x, w, y, p, 0.f);
  const EngineFilter filter{deterministic_only, fma_only};
  auto time_plan = [&](const EnginePlan& ep) {
    if (ep.workspace_bytes() > ws.bytes()) return std::numeric_limits<double>::infinity();
    auto run = [&] { return ep.run(ctx.cudnn(), x.data(), w.data(), y.data(), out, ws.ptr()) == CUDNN_STATUS_SUCCESS; };
    return time_runs(ctx.stream(), run, ev);
  };
  const EngineSearchResult found = search_engine_config(ctx.cudnn(), conv, filter, time_plan,
                                                        x.dtype() == DType::F32 ? kEngineBudgetFp32S : kEngineBudgetS);
  if (found.name.empty() || algo_ms < kAlgorithmMustGain * found.ms) return;
  // Not built after all (false): the algorithm stays.
  (void)adopt_engine(plan, pass, x, w, y, p, found.name, fma_only, deterministic_only, ctx);
}

bool adopt_engine(ConvPlan& plan, ConvPass pass, const Tensor& x, const Tensor& w, const Tensor& y,
                  const Conv2dParams& p, const std::string& name, bool fma_only, bool deterministic_only,
                  CudaContext& ctx) {
  auto choice = std::make_shared<EngineChoice>(engine_conv(pass, x, w, y, p, 0.f), name,
                                               EngineFilter{deterministic_only, fma_only});
  const EnginePlan* built = choice->plan(ctx.cudnn());
  if (!built) return false;
  plan.workspace_bytes = std::max(plan.workspace_bytes, built->workspace_bytes());
  plan.engine = std::move(choice);
  return true;
}

}  // namespace gpu
}  // namespace ge
