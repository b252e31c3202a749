// Convolutions on the GPU through cuDNN's legacy API: forward, backward-data and
// backward-filter of a bias-free 2-D cross-correlation (dilation 1, groups 1). Transposed
// convolutions need nothing more: ops.h maps each of their passes onto one of these.
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

#include "conv_8ch.h"
#include "conv_gemm.h"
#include "conv_phase_dgrad.h"
#include "conv_plan.h"
#include "conv_scalar.h"
#include "cuda_util.cuh"
#include "cudnn_engine.h"
#include "ganengine/backend.h"
#include "ganengine/conv_algo_cache.h"
#include "ganengine/env_choice.h"

namespace ge {
namespace gpu {
namespace {

void check_conv(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p, ConvPass pass) {
  for (const Tensor* t : {&x, &w, &y}) {
    check_gpu_float(*t, "convolution tensor");
    GE_CHECK(t->rank() == 4, "conv2d ", pass_name(pass), ": tensors must be 4-D, got ", t->str());
  }
  GE_CHECK(x.dtype() == w.dtype() && x.dtype() == y.dtype(), "conv2d ", pass_name(pass),
           ": tensors must share a dtype: x ", x.str(), ", w ", w.str(), ", y ", y.str());
  GE_CHECK(x.device() == w.device() && x.device() == y.device(), "conv2d ", pass_name(pass),
           ": tensors must be on one device: x ", x.str(), ", w ", w.str(), ", y ", y.str());
  GE_CHECK(p.stride >= 1 && p.pad >= 0, "conv2d: stride must be >= 1 and pad >= 0, got stride ", p.stride,
           " pad ", p.pad);
  const int64_t H = x.dim(2), W = x.dim(3), R = w.dim(2), S = w.dim(3);
  GE_CHECK(H + 2 * p.pad >= R && W + 2 * p.pad >= S, "conv2d: kernel ", R, "x", S,
           " larger than the padded input ", x.str());
  const int64_t P = (H + 2 * p.pad - R) / p.stride + 1, Q = (W + 2 * p.pad - S) / p.stride + 1;
  // Every pass takes an x with fewer channels than w (ops.h: for forward and backward-filter the
  // rest are zeros, backward-data computes only x's).
  const bool x_channels_fit = x.dim(1) <= w.dim(1);
  GE_CHECK(x_channels_fit && y.dim(1) == w.dim(0) && y.dim(0) == x.dim(0) && y.dim(2) == P &&
               y.dim(3) == Q,
           "conv2d ", pass_name(pass), ": shapes do not fit: x ", x.str(), ", w ", w.str(), ", y ", y.str(),
           " (stride ", p.stride, ", pad ", p.pad, " gives output ", x.dim(0), "x", w.dim(0), "x", P, "x", Q,
           ")");
}

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
  return {device_class(x.device().index),  static_cast<int64_t>(pass),     static_cast<int64_t>(x.dtype()),
          static_cast<int64_t>(x.format()), static_cast<int64_t>(w.format()), static_cast<int64_t>(y.format()),
          x.dim(0),          x.dim(1),                       x.dim(2),
          x.dim(3),          w.dim(0),                       w.dim(2),
          w.dim(3),          p.stride,                       p.pad,
          tf32,              deterministic};
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
ConvPlan& plan_for(ConvPass pass, const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p,
                   float beta, CudaContext& ctx) {
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

// output = alpha * pass(inputs) + beta * output, with alpha = 1, through cuDNN (arguments checked).
void run_conv(ConvPass pass, const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p,
              float beta) {
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
             " builds on one handle but not on this lane's (set GANENGINE_CONV_ENGINES=off to use the legacy API)");
    CUDNN_CHECK(engine->run(ctx.cudnn(), x.data(), w.data(), y.data(), out, ws));
    return;
  }
  CUDNN_CHECK(run_pass(plan, pass, x.data(), w.data(), y.data(), out, ws, plan.workspace_bytes, beta, ctx));
}

// y = act(conv(x, w)), act nullptr for none: the hand-written kernels where they apply, else
// cuDNN followed by the activation as its own pass. Only the 8-channel forward and
// backward-filter read an x narrower than w (ops.h); the other kernels get a copy with w's
// channels.
void forward_with(const Tensor& x_in, const Tensor& w, Tensor& y, const Conv2dParams& p,
                  const ops::FusedActivation* act) {
  check_conv(x_in, w, y, p, ConvPass::Forward);
  if (conv2d_forward_8ch(x_in, w, y, p, act)) return;
  const Tensor x = ops::with_channels(x_in, w.dim(1));
  if (!conv2d_forward_scalar(x, w, y, p)) run_conv(ConvPass::Forward, x, w, y, p, 0.f);
  if (act) gpu::activation_forward(act->kind, y, y, act->negative_slope);
}

// dw = beta * dw + backward_filter(x, dy'), dy' = dy or, with act, the activation's gradient
// from its output y_act.
void backward_filter_with(const Tensor& x_in, const Tensor& dy, Tensor& dw, const Conv2dParams& p, float beta,
                          const ops::FusedActivation* act, const Tensor* y_act) {
  check_conv(x_in, dw, dy, p, ConvPass::BackwardFilter);
  if (conv2d_backward_filter_8ch(x_in, dy, dw, p, beta, act, y_act)) return;
  const Tensor x = ops::with_channels(x_in, dw.dim(1));  // every other kernel reads all of w's channels
  Tensor grad = dy;
  if (act) {
    grad = Tensor::empty(dy.shape(), dy.dtype(), dy.device(), dy.format());
    gpu::activation_backward(act->kind, *y_act, dy, grad, act->negative_slope);
  }
  if (!conv2d_backward_filter_scalar(x, grad, dw, p, beta) && !conv2d_backward_filter_gemm(x, grad, dw, p, beta))
    run_conv(ConvPass::BackwardFilter, x, dw, grad, p, beta);
}

}  // namespace

void conv2d_forward(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p) {
  forward_with(x, w, y, p, nullptr);
}

bool conv_transpose2d_forward_moments(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p,
                                      Tensor& moments) {
  // off: BatchNorm reads the layer's output for its statistics (for measurements).
  static const bool on = env_choice("GANENGINE_BN_MOMENTS", {"on", "off"}) == "on";
  if (!on) return false;
  check_conv(y, w, x, p, ConvPass::BackwardData);
  return conv2d_backward_data_phases(x, w, y, p, &moments);
}

void conv2d_backward_data(const Tensor& dy, const Tensor& w, Tensor& dx_out, const Conv2dParams& p) {
  check_conv(dx_out, w, dy, p, ConvPass::BackwardData);
  if (conv2d_backward_data_8ch(dy, w, dx_out, p)) return;
  if (conv2d_backward_data_phases(dy, w, dx_out, p)) return;
  // The other kernels write all of w's channels.
  ops::write_with_channels(dx_out, w.dim(1), [&](Tensor& dx) {
    if (!conv2d_backward_data_scalar(dy, w, dx, p) && !conv2d_backward_data_gemm(dy, w, dx, p))
      run_conv(ConvPass::BackwardData, dx, w, dy, p, 0.f);
  });
}

void conv2d_backward_filter(const Tensor& x, const Tensor& dy, Tensor& dw, const Conv2dParams& p, float beta) {
  backward_filter_with(x, dy, dw, p, beta, nullptr, nullptr);
}

void conv2d_activation_forward(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p,
                               const ops::FusedActivation& act) {
  forward_with(x, w, y, p, &act);
}

void conv2d_activation_backward_filter(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dw,
                                       const Conv2dParams& p, const ops::FusedActivation& act, float beta) {
  backward_filter_with(x, dy, dw, p, beta, &act, &y);
}

void conv2d_activation_backward_data(const Tensor& y, const Tensor& dy, const Tensor& w, Tensor& dx,
                                     const Conv2dParams& p, const ops::FusedActivation& act,
                                     const ops::InputActivation* input) {
  check_conv(dx, w, dy, p, ConvPass::BackwardData);
  const DxActivation through_input{input ? input->act : ops::FusedActivation{}, input ? &input->x : nullptr};
  if (conv2d_backward_data_8ch(dy, w, dx, p, &act, &y, input ? &through_input : nullptr)) return;
  Tensor dpre = Tensor::empty(dy.shape(), dy.dtype(), dy.device(), dy.format());
  gpu::activation_backward(act.kind, y, dy, dpre, act.negative_slope);
  conv2d_backward_data(dpre, w, dx, p);
  if (input) gpu::activation_backward(input->act.kind, input->x, dx, dx, input->act.negative_slope);
}

// A transposed convolution's forward is conv2d's backward-data (ops.h): x plays dy, y plays dx.
void conv_transpose2d_activation_forward(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p,
                                         const ops::FusedActivation& act) {
  check_conv(y, w, x, p, ConvPass::BackwardData);
  const DxActivation forward{act, nullptr};
  if (conv2d_backward_data_8ch(x, w, y, p, nullptr, nullptr, &forward)) return;
  conv2d_backward_data(x, w, y, p);
  gpu::activation_forward(act.kind, y, y, act.negative_slope);
}

}  // namespace gpu
}  // namespace ge
