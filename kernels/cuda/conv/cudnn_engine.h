// cuDNN's backend (graph) API for one convolution pass: its engines and their knobs, which the
// legacy API hides behind a handful of algorithm numbers. The legacy API picks one kernel
// configuration per algorithm by heuristics; for some of our shapes (the 64 <-> 128-channel
// layer pair at batch 1024) that choice runs far below the Tensor Core rate the same kernels
// reach on the neighbouring layers, and the backend lets us time other configurations.
//
// An engine configuration is named by a string, "e<global index>" followed by ",<knob type>=<value>"
// for each knob choice, so a choice can be stored (conv_algo_cache.h) and rebuilt later.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/aligned.h"
#include "cuda/conv/conv_plan.h"

namespace ge {
namespace gpu {

// One pass of a 2-D cross-correlation as the backend describes it: the forward roles' shapes
// (x N,C,H,W; w K,C,R,S; y N,K,P,Q), their element strides and one data type.
struct EngineConv {
  ConvPass pass = ConvPass::Forward;
  cudnnDataType_t dtype = CUDNN_DATA_HALF;
  int64_t x_dims[4], w_dims[4], y_dims[4];
  int64_t x_strides[4], w_strides[4], y_strides[4];
  // Paddings before and after each spatial dimension (h, w), as the backend takes them:
  // engine_conv gives both the convolution's pad.
  int64_t pre_pad[2] = {0, 0}, post_pad[2] = {0, 0};
  int64_t stride = 1;
  float beta = 0.f;  // out = pass(inputs) + beta * out, baked into the plan
};

// Plans are built for tensors whose data starts on this many bytes; run() refuses others.
constexpr int64_t kEngineAlignment = 16;
inline bool engine_aligned(const void* p) { return aligned_to(p, kEngineAlignment); }

// The description of tensors x, w, y (in their own memory formats) for this pass.
EngineConv engine_conv(ConvPass pass, const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p,
                       float beta);

// Which engine configurations may run: without non-deterministic ones when asked, and never
// those that reduce in reduced precision (fp16 accumulation would not match PyTorch's fp32
// accumulation) or compile kernels at run time (seconds at the first step).
struct EngineFilter {
  bool deterministic_only = false;
  bool fma_only = false;  // fp32 without TF32: no Tensor Core engine
};

// A finalized execution plan (with the descriptors it was built from) and the workspace it needs.
class EnginePlan {
 public:
  struct Parts;
  explicit EnginePlan(std::unique_ptr<Parts> parts);
  ~EnginePlan();
  EnginePlan(const EnginePlan&) = delete;
  EnginePlan& operator=(const EnginePlan&) = delete;
  size_t workspace_bytes() const;
  const std::string& name() const;
  // out = pass(x, w, y) + beta * out on the handle's stream (x, w, y: the forward roles; out
  // stands in for the pass's output). CUDNN_STATUS_BAD_PARAM when a pointer is not aligned to
  // kEngineAlignment bytes.
  cudnnStatus_t run(cudnnHandle_t handle, const void* x, const void* w, const void* y, void* out,
                    void* workspace) const;

 private:
  std::unique_ptr<Parts> parts_;
};

// The configuration the search settles on, its time per run and how many were timed.
struct EngineSearchResult {
  std::string name;  // "" when none could be built
  double ms = 0;
  int timed = 0;
};

// A greedy search over configurations: the first few the backend's heuristics list (modes A
// and B), then, from the fastest, one knob at a time (tile size, cluster shape, then the others)
// moved to each value it allows, keeping every move that is faster. Building a plan takes
// about a millisecond; timing it is the cost (a whole search takes a fraction of a second for the
// DCGAN's passes, where timing an exhaustive list takes seconds a pass: docs/performance.md), so
// the search stops after budget_s seconds: a slow configuration can overrun that by its own timing
// runs. time_ms runs a plan and returns milliseconds per run (infinity when a run fails).
EngineSearchResult search_engine_config(cudnnHandle_t handle, const EngineConv& conv, const EngineFilter& filter,
                                        const std::function<double(const EnginePlan&)>& time_ms, double budget_s);

// The plan of a named configuration; nullptr when this cuDNN or this convolution does not
// support it (a stored name from another cuDNN version, say).
std::unique_ptr<EnginePlan> build_engine_plan(cudnnHandle_t handle, const EngineConv& conv, const std::string& name,
                                              const EngineFilter& filter);

// The configuration chosen for one convolution pass and its plans, one per cuDNN handle: each
// lane runs on its own handle, and a plan is built with the handle that runs it.
class EngineChoice {
 public:
  EngineChoice(const EngineConv& conv, std::string name, const EngineFilter& filter)
      : conv_(conv), name_(std::move(name)), filter_(filter) {}
  const std::string& name() const { return name_; }
  // The plan for this handle, built on first use; nullptr when it cannot be built.
  const EnginePlan* plan(cudnnHandle_t handle);

 private:
  const EngineConv conv_;
  const std::string name_;
  const EngineFilter filter_;
  std::mutex mu_;
  std::map<cudnnHandle_t, std::unique_ptr<EnginePlan>> plans_;
};

}  // namespace gpu
}  // namespace ge
