// One convolution pass as cuDNN runs it: the descriptors of its tensors and the algorithm chosen
// for them. cudnn_conv.cu keeps one plan per shape; conv_search.cu chooses the algorithm.
//
// Every pass is described with the tensors' forward-pass roles: x (N,C,H,W) the input,
// w (K,C,R,S) the weight, y (N,K,P,Q) the output. Each pass computes one from the other two.
#pragma once
#include <memory>

#include "core/backend.h"
#include "cuda/conv/conv_paths.h"
#include "cuda/conv/cudnn_descriptors.h"
#include "runtime/cuda_context.h"

namespace ge {
namespace gpu {

class EngineChoice;  // cudnn_engine.h

// fp32 without TF32: CUDNN_FMA_MATH (results match an fp32 CPU reference); fp32 with TF32:
// CUDNN_DEFAULT_MATH; f16/bf16: CUDNN_TENSOR_OP_MATH.
cudnnMathType_t requested_math(DType t, bool allow_tf32);

struct ConvPlan {
  ConvPlan(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p)
      : x_desc(x), w_desc(w), y_desc(y), conv_desc(p.pad, p.stride, requested_math(x.dtype(), p.allow_tf32)) {}
  TensorDescriptor x_desc;
  FilterDescriptor w_desc;
  TensorDescriptor y_desc;
  ConvolutionDescriptor conv_desc;  // carries the chosen algorithm's math type
  int algo = 0;                     // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t workspace_bytes = 0;  // enough for the algorithm and for the engine configuration
  // A backend engine configuration that ran faster than the algorithm (cudnn_engine.h); it
  // serves the runs with beta == 0 (training's), the algorithm the others.
  std::shared_ptr<EngineChoice> engine;
};

// The workspace the plan's algorithm (with the descriptor's current math type) needs; a status
// other than CUDNN_STATUS_SUCCESS means it does not support this convolution.
cudnnStatus_t workspace_needed(const ConvPlan& plan, ConvPass pass, CudaContext& ctx, size_t* needed);

// Makes (algo, math) the plan's choice with at least workspace_bytes of workspace; false when
// cuDNN refuses it for these descriptors or it needs more than cap.
bool adopt_choice(ConvPlan& plan, ConvPass pass, int algo, cudnnMathType_t math, size_t workspace_bytes, size_t cap,
                  CudaContext& ctx);

// Runs the pass with the plan's descriptors and the plan's algorithm on the context's stream:
// out = pass(inputs) + beta * out, where x, w and y are the forward roles and out stands in for
// the pass's own output (y, x or w).
cudnnStatus_t run_pass(const ConvPlan& plan, ConvPass pass, const void* x, const void* w, const void* y, void* out,
                       void* workspace, size_t workspace_bytes, float beta, CudaContext& ctx);

// Chooses the plan's algorithm, math type and workspace for these tensors (timing candidates on
// them; `out` stands in for the pass's output and is overwritten). fma_only: fp32 without TF32.
void search_algorithm(ConvPlan& plan, ConvPass pass, const Tensor& x, const Tensor& w, const Tensor& y, void* out,
                      bool fma_only, bool deterministic_only, CudaContext& ctx);

// After search_algorithm: searches the backend's engine configurations (cudnn_engine.h; with
// fma_only none that uses Tensor Cores) for the runs with beta == 0 and keeps one in plan.engine
// when it is at least 3% faster than the algorithm.
void search_engine(ConvPlan& plan, ConvPass pass, const Tensor& x, const Tensor& w, const Tensor& y, void* out,
                   const Conv2dParams& p, bool fma_only, bool deterministic_only, CudaContext& ctx);

// Takes a stored engine configuration into the plan (false when it cannot be built here).
bool adopt_engine(ConvPlan& plan, ConvPass pass, const Tensor& x, const Tensor& w, const Tensor& y,
                  const Conv2dParams& p, const std::string& name, bool fma_only, bool deterministic_only,
                  CudaContext& ctx);

// How choices are made for passes on `dtype`, for keys of anything that stores them:
// "tensor-core|timed|engines-c3" ("tensor-core|timed|engines-fp32-c3" for fp32).
std::string search_policy(DType dtype);

}  // namespace gpu
}  // namespace ge
