// The cuDNN path of conv_paths.h, the one that applies to every convolution: forward,
// backward-data and backward-filter of a bias-free 2-D cross-correlation (dilation 1, groups 1)
// through cuDNN's legacy API, or a backend engine configuration where the search found a faster
// one (cudnn_engine.h).
//
// Precision: compute type is fp32 for every dtype; the math types are requested_math's
// (conv_plan.h): no TF32 for fp32 unless allow_tf32, Tensor Cores for f16/bf16.
//
// Plans: the first call for a shape builds its descriptors and chooses an algorithm
// (conv_search.cu), or takes the choice an earlier run stored in the algorithm cache file
// (conv_algo_cache.h); later calls only look the plan up. Choosing allocates and synchronises,
// so warm every shape up once before capturing a CUDA graph: a search that would run during a
// capture throws instead. With ops::set_deterministic_convolutions(true), only algorithms cuDNN
// reports as deterministic qualify (a separate plan per setting).
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/backend.h"
#include "core/conv_algo_cache.h"
#include "cuda/conv/conv_paths.h"
#include "cuda/conv/conv_plan.h"
#include "cuda/conv/cudnn_engine.h"
#include "cuda/cuda_util.cuh"

namespace ge {
namespace gpu {
namespace {

// ---- plan cache

using ConvKey = std::array<int64_t, 17>;

// "NVIDIA_H200/132sm/cc9.0": what makes two GPUs run the same algorithms alike (no blanks).
std::string device_model(int index) {
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  std::string name = prop.name;
  for (char& ch : name)
    if (ch == ' ' || ch == '\t') ch = '_';
  return name + "/" + std::to_string(prop.multiProcessorCount) + "sm/cc" + std::to_string(prop.major) + "." +
         std::to_string(prop.minor);
}

// GPUs of one model share their plans: the lowest index of a device of the same model. Every
// replica of a multi-GPU run then uses the same algorithms, so replicas fed the same data
// compute bitwise the same gradients, and the search runs once.
int64_t device_class(int index) {
  static std::mutex mu;
  static std::map<int, int64_t> classes;
  std::lock_guard<std::mutex> lock(mu);
  auto it = classes.find(index);
  if (it != classes.end()) return it->second;
  const std::string mine = device_model(index);
  int64_t cls = index;
  for (int d = 0; d < index; ++d)
    if (device_model(d) == mine) {
      cls = d;
      break;
    }
  return classes[index] = cls;
}

ConvKey make_key(ConvPass pass, const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p) {
  const bool tf32 = x.dtype() == DType::F32 && p.allow_tf32;
  const bool deterministic = ops::deterministic_convolutions();
  return {device_class(x.device().index),
          static_cast<int64_t>(pass),
          static_cast<int64_t>(x.dtype()),
          static_cast<int64_t>(x.format()),
          static_cast<int64_t>(w.format()),
          static_cast<int64_t>(y.format()),
          x.dim(0),
          x.dim(1),
          x.dim(2),
          x.dim(3),
          w.dim(0),
          w.dim(2),
          w.dim(3),
          p.stride,
          p.pad,
          tf32,
          deterministic};
}

std::mutex g_plans_mutex;
std::map<ConvKey, std::unique_ptr<ConvPlan>> g_plans;  // nodes never move or go away

// Takes a choice from the persisted cache, if cuDNN still accepts it for these descriptors.
bool adopt_cached(ConvPlan& plan, ConvPass pass, const ConvAlgoChoice& c, bool fma_only, CudaContext& ctx) {
  if (fma_only && c.math != CUDNN_FMA_MATH) return false;
  return adopt_choice(plan, pass, c.algo, static_cast<cudnnMathType_t>(c.math), c.workspace_bytes, SIZE_MAX, ctx);
}

// The persisted cache's key: the GPU model, cuDNN's version, the algorithm preference and the
// convolution (the in-memory key without its device class).
std::string persisted_key(const ConvKey& key, int device_index, DType dtype) {
  std::string s =
      device_model(device_index) + "|cudnn" + std::to_string(cudnnGetVersion()) + "|" + search_policy(dtype) + "|";
  for (size_t i = 1; i < key.size(); ++i) s += (i > 1 ? "," : "") + std::to_string(key[i]);
  return s;
}

// The cached plan for this convolution, searched on first use. beta != 0 means the output
// holds values to accumulate into, so the search writes into a scratch copy instead.
ConvPlan& plan_for(ConvPass pass, const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p, float beta,
                   CudaContext& ctx) {
  const ConvKey key = make_key(pass, x, w, y, p);
  {
    std::lock_guard<std::mutex> lock(g_plans_mutex);
    auto it = g_plans.find(key);
    if (it != g_plans.end()) return *it->second;
  }
  // The search times algorithms, allocates and synchronises: impossible inside a graph capture.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(ctx.stream(), &capture));
  if (capture != cudaStreamCaptureStatusNone)
    fail("cuDNN ", pass_name(pass), " algorithm search for x ", x.str(), ", w ", w.str(), ", y ", y.str(),
         " would run during CUDA graph capture: run warm-up steps with the same shapes before capturing");

  auto plan = std::make_unique<ConvPlan>(x, w, y, p);
  const bool fma_only = x.dtype() == DType::F32 && !p.allow_tf32;
  ConvAlgoCache& persisted = process_conv_algo_cache();
  const std::string persisted_as = persisted_key(key, x.device().index, x.dtype());
  const std::optional<ConvAlgoChoice> cached = persisted.find(persisted_as);
  if (cached && adopt_cached(*plan, pass, *cached, fma_only, ctx)) {
    // A stored engine configuration that no longer builds leaves the algorithm alone in charge.
    if (!cached->engine.empty())
      (void)adopt_engine(*plan, pass, x, w, y, p, cached->engine, fma_only, key[16] != 0, ctx);
  } else {
    // The search writes its trial results into the output, or into a scratch copy when the
    // output holds values to accumulate into.
    const Tensor& output = pass == ConvPass::Forward ? y : (pass == ConvPass::BackwardData ? x : w);
    Tensor scratch;
    void* out = output.data();
    if (beta != 0.f) {
      scratch = Tensor::empty(output.shape(), output.dtype(), output.device(), output.format());
      out = scratch.data();
    }
    // The search runs without the lock: it synchronises this GPU's stream, which may be waiting
    // in an NCCL collective for a replica whose thread would otherwise wait here for the lock
    // (a deadlock). Two replicas may then search the same shape; the first plan stored is the
    // one every replica uses, so they still compute identically.
    search_algorithm(*plan, pass, x, w, y, out, fma_only, key[16] != 0, ctx);
    // Engine configurations serve beta == 0 only, so only such a first call searches them.
    if (beta == 0.f) search_engine(*plan, pass, x, w, y, out, p, fma_only, key[16] != 0, ctx);
    persisted.store(persisted_as, ConvAlgoChoice{plan->algo, static_cast<int>(plan->math), plan->workspace_bytes,
                                                 plan->engine ? plan->engine->name() : std::string()});
  }
  std::lock_guard<std::mutex> lock(g_plans_mutex);
  return *g_plans.emplace(key, std::move(plan)).first->second;
}

}  // namespace

// output = alpha * pass(inputs) + beta * output, with alpha = 1 (conv_paths.cu checked the arguments).
void cudnn_conv(const ConvCall& call) {
  const ConvPass pass = call.pass;
  const Tensor &x = call.x, &w = call.w, &y = call.y;
  const Conv2dParams& p = call.p;
  const float beta = call.beta;
  CudaContext& ctx = context(x.device().index);
  ConvPlan& plan = plan_for(pass, x, w, y, p, beta, ctx);
  void* ws = plan.workspace_bytes > 0 ? workspace(ctx, plan.workspace_bytes) : nullptr;
  void* out = pass == ConvPass::Forward ? y.data() : (pass == ConvPass::BackwardData ? x.data() : w.data());
  // The engine's plans assume aligned data (cudnn_engine.h); a view that starts elsewhere
  // runs on the algorithm.
  const bool aligned = engine_aligned(x.data()) && engine_aligned(w.data()) && engine_aligned(y.data());
  if (plan.engine && beta == 0.f && aligned) {
    const EnginePlan* engine = plan.engine->plan(ctx.cudnn());
    GE_CHECK(engine, "cuDNN engine configuration ", plan.engine->name(), " for ", pass_name(pass), " of x ", x.str(),
             " builds on one handle but not on this lane's");
    CUDNN_CHECK(engine->run(ctx.cudnn(), x.data(), w.data(), y.data(), out, ws));
    return;
  }
  CUDNN_CHECK(run_pass(plan, pass, x.data(), w.data(), y.data(), out, ws, plan.workspace_bytes, beta, ctx));
}

}  // namespace gpu
}  // namespace ge
