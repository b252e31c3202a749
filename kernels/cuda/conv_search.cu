// Choosing cuDNN's algorithm for a convolution pass (conv_plan.h), once per shape.
//
// The default ("timed"): cuDNN's heuristics rank every algorithm without running any
// (cudnnGet*Algorithm_v7); the first kTimedCandidates usable ones are run on the real buffers and
// the fastest is kept. GANENGINE_CONV_SEARCH=find uses cudnnFind*AlgorithmEx instead, which times
// every algorithm, slow ones included: at batch 1024 its 17 searches took about 1.5 s of a 2.5 s
// start on the H200.
//
// Which algorithms qualify: fp32 without TF32 only FMA kernels (as PyTorch asserts for
// allow_tf32=False); with deterministic_only only those cuDNN reports deterministic; none that
// needs more than the search's workspace. Half-precision passes take Tensor Core algorithms and
// fall back to other math only when there is none: the plain fastest by cudnnFind*AlgorithmEx
// picked FMA kernels at batch 64 on the H200 that time well alone and then ran the captured step
// at 2.5-3.6 ms instead of 1.8 ms (the choice also varied from run to run).
// GANENGINE_CONV_ALGOS=fastest restores the plain choice.
//
// Every candidate is timed as a captured CUDA graph of kTimedRuns runs (graph_timing.h), as the
// training step runs it, and a short one again over more runs (time_runs): timed as stream calls,
// the legacy API's host work hid the kernels at small batches.
//
// Then (search_engine): cuDNN's backend engine configurations (cudnn_engine.h). The legacy API
// runs one configuration per algorithm; on the H200 at batch 1024 its choice for the 64 <-> 128-
// channel layers' backward-filter ran at 262 TFLOP/s where another tile with a cluster of 8 along
// N ran at 600 (GANENGINE_CONV_ENGINES=off keeps the legacy API alone). fp32 without TF32 takes
// engines without Tensor Cores (as PyTorch's cuDNN v8 path filters them): O0 steps 7% shorter at
// batch 256 and 1024 on the H200 (session 20).
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "conv_plan.h"
#include "cudnn_engine.h"
#include "ganengine/env_choice.h"
#include "graph_timing.h"

namespace ge {
namespace gpu {

namespace {

// Largest workspace an algorithm may ask for. Plenty on an H200, and bounded so that one
// exotic algorithm cannot take memory the activations need.
constexpr size_t kWorkspaceCap = size_t{256} << 20;
constexpr size_t kTimedCandidates = 4;
constexpr int kTimedRuns = 3;
// A pass shorter than kShortPassMs a run is timed again as a graph of about kShortGraphMs. At
// batch 64 one replay of 3 runs of a 5-15 us kernel moved by a few percent from replay to replay:
// enough to flip the choice between two engines for D's fourth layer's backward-data (G's second
// layer's forward) whose steps then ran 3% apart on the H200 (O2 0.80 against 0.83 ms; two of three
// processes that searched after the O0 runs of `ganengine bench` picked the slower, none of six
// that searched first; session 31).
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
// (which, searched in, stayed at the 256 MiB cap for the whole run). Smaller when the GPU
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

bool tensor_op_only() {
  static const bool on = env_choice("GANENGINE_CONV_ALGOS", {"tensor-core", "fastest"}) == "tensor-core";
  return on;
}

bool search_with_find() {
  static const bool on = env_choice("GANENGINE_CONV_SEARCH", {"timed", "find"}) == "find";
  return on;
}

bool engines_enabled() {
  static const bool on = env_choice("GANENGINE_CONV_ENGINES", {"on", "off"}) == "on";
  return on;
}

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
    out.push_back({static_cast<int>(perf[i].algo), perf[i].status, perf[i].memory, perf[i].determinism,
                   perf[i].mathType});
  return out;
}

// Every algorithm, best first: by cuDNN's heuristics, or (find) by timing each on the buffers.
std::vector<Candidate> ranked_candidates(const ConvPlan& plan, ConvPass pass, const Tensor& x, const Tensor& w,
                                         const Tensor& y, void* out, bool find, void* ws, size_t cap,
                                         CudaContext& ctx) {
  int n = 0;
  switch (pass) {
    case ConvPass::Forward: {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      if (find)
        CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
            ctx.cudnn(), plan.x_desc.get(), x.data(), plan.w_desc.get(), w.data(), plan.conv_desc.get(),
            plan.y_desc.get(), out, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf, ws, cap));
      else
        CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(ctx.cudnn(), plan.x_desc.get(), plan.w_desc.get(),
                                                           plan.conv_desc.get(), plan.y_desc.get(),
                                                           CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf));
      return candidates_of(perf, n);
    }
    case ConvPass::BackwardData: {
      cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      if (find)
        CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
            ctx.cudnn(), plan.w_desc.get(), w.data(), plan.y_desc.get(), y.data(), plan.conv_desc.get(),
            plan.x_desc.get(), out, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf, ws, cap));
      else
        CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(ctx.cudnn(), plan.w_desc.get(), plan.y_desc.get(),
                                                                plan.conv_desc.get(), plan.x_desc.get(),
                                                                CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf));
      return candidates_of(perf, n);
    }
    default: {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      if (find)
        CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
            ctx.cudnn(), plan.x_desc.get(), x.data(), plan.y_desc.get(), y.data(), plan.conv_desc.get(),
            plan.w_desc.get(), out, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, perf, ws, cap));
      else
        CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
            ctx.cudnn(), plan.x_desc.get(), plan.y_desc.get(), plan.conv_desc.get(), plan.w_desc.get(),
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

const char* pass_name(ConvPass pass) {
  switch (pass) {
    case ConvPass::Forward: return "forward";
    case ConvPass::BackwardData: return "backward-data";
    default: return "backward-filter";
  }
}

cudnnMathType_t requested_math(DType t, bool allow_tf32) {
  if (t != DType::F32) return CUDNN_TENSOR_OP_MATH;
  return allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

std::string search_policy(DType dtype) {
  // fp32 passes have searched engine configurations too since session 20: their own tag, so that
  // the choices stored without them are searched again. Since session 21 cluster shapes are powers
  // of two (cudnn_engine.cpp): a new tag again, so that stored clusters of 3 or 5 go. Since
  // session 31 short passes are timed over more runs (time_runs): "-c3", so that choices the
  // noisier timing stored are made again.
  const char* engines = dtype == DType::F32 ? "|engines-fp32-c3" : "|engines-c3";
  return std::string(tensor_op_only() ? "tensor-core" : "fastest") + (search_with_find() ? "|find" : "|timed") +
         (engines_enabled() ? engines : "");
}

cudnnStatus_t workspace_needed(const ConvPlan& plan, ConvPass pass, CudaContext& ctx, size_t* needed) {
  switch (pass) {
    case ConvPass::Forward:
      return cudnnGetConvolutionForwardWorkspaceSize(ctx.cudnn(), plan.x_desc.get(), plan.w_desc.get(),
                                                     plan.conv_desc.get(), plan.y_desc.get(),
                                                     static_cast<cudnnConvolutionFwdAlgo_t>(plan.algo), needed);
    case ConvPass::BackwardData:
      return cudnnGetConvolutionBackwardDataWorkspaceSize(ctx.cudnn(), plan.w_desc.get(), plan.y_desc.get(),
                                                          plan.conv_desc.get(), plan.x_desc.get(),
                                                          static_cast<cudnnConvolutionBwdDataAlgo_t>(plan.algo),
                                                          needed);
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
                                     plan.conv_desc.get(), static_cast<cudnnConvolutionFwdAlgo_t>(plan.algo),
                                     workspace, workspace_bytes, &beta, plan.y_desc.get(), out);
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
  const bool prefer_tensor_ops = x.dtype() != DType::F32 && tensor_op_only();
  bool chosen = false;
  if (search_with_find()) {
    // cuDNN timed them all: the first that qualifies and that cuDNN accepts is the fastest.
    for (const Candidate& c : qualifying(ranked_candidates(plan, pass, x, w, y, out, true, ws.ptr(), ws.bytes(), ctx),
                                         ws.bytes(), fma_only, deterministic_only, prefer_tensor_ops))
      if ((chosen = adopt(plan, pass, c, ws.bytes(), ctx))) break;
    // None of the timed ones qualified: the heuristics' first that cuDNN accepts.
    if (!chosen)
      for (const Candidate& c : qualifying(ranked_candidates(plan, pass, x, w, y, out, false, nullptr, 0, ctx),
                                           ws.bytes(), fma_only, deterministic_only, false))
        if ((chosen = adopt(plan, pass, c, ws.bytes(), ctx))) break;
  } else {
    std::vector<Candidate> shortlist = qualifying(
        ranked_candidates(plan, pass, x, w, y, out, false, ws.ptr(), ws.bytes(), ctx), ws.bytes(), fma_only,
        deterministic_only, prefer_tensor_ops);
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
// measures latency on an otherwise idle GPU, not what a kernel costs beside another lane's. On
// the H200 at batch 64, a process that kept the legacy API's choice for the 512 -> 256-channel
// backward-data (an sm80 CUTLASS kernel; no configuration had timed 3% faster) ran it in 33-35
// us inside the step, where processes that took a configuration ran its Hopper kernel in 20-22
// (CUPTI); with ties going to the configuration, steps of four processes that each searched for
// themselves spread 0.5-0.6% at 64 instead of 1.3-2.5% (session 24; other choices, such as D's
// second layer's forward cluster, still make an occasional search 2-5% slower there).
constexpr double kAlgorithmMustGain = 0.97;
constexpr double kEngineBudgetS = 0.5;  // per pass; the searches took 0.03-0.22 s on the H200
// fp32 configurations run far longer: on the H200 at O0, 0.5 s a pass took the first step at batch
// 1024 from 1.36 to 2.29 s after process start (the dataset excluded), 0.05 s to 1.71 s, and both
// found configurations as fast (86.1 ms steps; session 20 call 9).
constexpr double kEngineBudgetFp32S = 0.05;

}  // namespace

void search_engine(ConvPlan& plan, ConvPass pass, const Tensor& x, const Tensor& w, const Tensor& y, void* out,
                   const Conv2dParams& p, bool fma_only, bool deterministic_only, CudaContext& ctx) {
  if (!engines_enabled()) return;
  synchronize(ctx.device);
  const SearchWorkspace ws;
  TimingEvents ev;
  const double algo_ms = time_choice(plan, pass, x, w, y, out, ws.ptr(), ctx, ev);
  const EngineConv conv = engine_conv(pass, x, w, y, p, 0.f);
  const EngineFilter filter{deterministic_only, fma_only};
  auto time_plan = [&](const EnginePlan& ep) {
    if (ep.workspace_bytes() > ws.bytes()) return std::numeric_limits<double>::infinity();
    auto run = [&] {
      return ep.run(ctx.cudnn(), x.data(), w.data(), y.data(), out, ws.ptr()) == CUDNN_STATUS_SUCCESS;
    };
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
