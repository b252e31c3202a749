// Convolutions on the GPU through cuDNN's legacy API: forward, backward-data and
// backward-filter of a bias-free 2-D cross-correlation (dilation 1, groups 1). Transposed
// convolutions need nothing more: ops.h maps each of their passes onto one of these.
//
// Precision: compute type is fp32 for every dtype. fp32 tensors run with CUDNN_FMA_MATH (no
// TF32: results match an fp32 CPU reference) unless allow_tf32, which gives cuDNN
// CUDNN_DEFAULT_MATH (TF32 Tensor Cores allowed on sm_80+). f16/bf16 run with
// CUDNN_TENSOR_OP_MATH.
//
// Algorithms: the first call for a shape runs cudnnFind*AlgorithmEx (which times every
// algorithm on the real buffers) and caches the fastest one that succeeded, fits the workspace
// cap and respects the math rule above; later calls only look the plan up. The descriptors are
// cached in the same plan. Find allocates and synchronises, so warm every shape up once before
// capturing a CUDA graph: a search that would run during a capture throws instead.
// With ops::set_deterministic_convolutions(true), only algorithms cuDNN reports as deterministic
// qualify (a separate cache entry per setting). Choices persist across runs in a small file
// (conv_algo_cache.h): a shape found there is not searched again.
#include <algorithm>
#include <cstdlib>
#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "ganengine/backend.h"
#include "ganengine/conv_algo_cache.h"
#include "cuda_util.cuh"
#include "cudnn_descriptors.h"

namespace ge {
namespace gpu {
namespace {

enum class ConvPass : int { Forward = 0, BackwardData = 1, BackwardFilter = 2 };

const char* pass_name(ConvPass pass) {
  switch (pass) {
    case ConvPass::Forward: return "forward";
    case ConvPass::BackwardData: return "backward-data";
    default: return "backward-filter";
  }
}

// Largest workspace an algorithm may ask for. Plenty on an H200, and bounded so that one
// exotic algorithm cannot take memory the activations need.
constexpr size_t kWorkspaceCap = size_t{256} << 20;

// The search's own workspace, freed when it ends: timing every algorithm needs the cap, the
// chosen ones usually far less, and only what they need stays allocated in the context's
// workspace (which, searched in, stayed at the 256 MiB cap for the whole run). Smaller when the GPU cannot spare the cap; the search then only considers
// algorithms that fit.
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

cudnnMathType_t requested_math(DType t, bool allow_tf32) {
  if (t != DType::F32) return CUDNN_TENSOR_OP_MATH;
  return allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

// Every pass is described with the tensors' forward-pass roles: x (N,C,H,W) the input,
// w (K,C,R,S) the weight, y (N,K,P,Q) the output. Each pass computes one from the other two.
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
  GE_CHECK(x.dim(1) == w.dim(1) && y.dim(1) == w.dim(0) && y.dim(0) == x.dim(0) && y.dim(2) == P &&
               y.dim(3) == Q,
           "conv2d ", pass_name(pass), ": shapes do not fit: x ", x.str(), ", w ", w.str(), ", y ", y.str(),
           " (stride ", p.stride, ", pad ", p.pad, " gives output ", x.dim(0), "x", w.dim(0), "x", P, "x", Q,
           ")");
}

// ---- plan cache

using ConvKey = std::array<int64_t, 17>;

// GPUs of one model share their plans: the lowest index of a device with the same name and
// multiprocessor count. Every replica of a multi-GPU run then uses the same algorithms, so
// replicas fed the same data compute bitwise the same gradients, and the search runs once.
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

struct ConvPlan {
  ConvPlan(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p)
      : x_desc(x), w_desc(w), y_desc(y), conv_desc(p.pad, p.stride, requested_math(x.dtype(), p.allow_tf32)) {}
  TensorDescriptor x_desc;
  FilterDescriptor w_desc;
  TensorDescriptor y_desc;
  ConvolutionDescriptor conv_desc;  // carries the chosen algorithm's math type after the search
  int algo = 0;                     // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t workspace_bytes = 0;
};

std::mutex g_plans_mutex;
std::map<ConvKey, std::unique_ptr<ConvPlan>> g_plans;  // nodes never move or go away

// Index of the fastest usable result (cuDNN sorts them by time), or -1.
// fp32 without TF32 accepts only FMA kernels, as PyTorch asserts for allow_tf32=False.
// Half-precision passes take the fastest Tensor Core algorithm cuDNN's timing found, and fall
// back to other math only when there is none. Taking the overall fastest measured by
// cudnnFind*AlgorithmEx picked FMA kernels at batch 64 on the H200 that time well alone and
// then ran the captured step at 2.5-3.6 ms instead of 1.8 ms (the choice also varied from run to
// run). GANENGINE_CONV_ALGOS=fastest restores the plain choice.
bool tensor_op_only() {
  static const bool on = [] {
    const char* v = std::getenv("GANENGINE_CONV_ALGOS");
    if (!v || !*v || std::string(v) == "tensor-core") return true;
    if (std::string(v) == "fastest") return false;
    fail("GANENGINE_CONV_ALGOS='", v, "' (expected tensor-core, the default, or fastest)");
  }();
  return on;
}

template <class Perf>
int pick_usable(const Perf* perf, int count, size_t workspace_cap, bool fma_only, bool deterministic_only,
                bool tensor_op = false) {
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    if (deterministic_only && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
    if (perf[i].memory > workspace_cap) continue;
    if (fma_only && perf[i].mathType != CUDNN_FMA_MATH) continue;
    if (tensor_op && perf[i].mathType != CUDNN_TENSOR_OP_MATH) continue;
    return i;
  }
  return tensor_op ? pick_usable(perf, count, workspace_cap, fma_only, deterministic_only, false) : -1;
}

template <class Perf>
void adopt(ConvPlan& plan, const Perf& perf) {
  plan.algo = static_cast<int>(perf.algo);
  plan.workspace_bytes = perf.memory;  // raised below to what cuDNN asks for at run time
  // cuDNN decides Tensor Core use from algorithm + math type together: run with the math type
  // the timing was taken with.
  plan.math = perf.mathType;
  plan.conv_desc.set_math(perf.mathType);
}

// The workspace the plan's algorithm needs with its descriptors (not CUDNN_STATUS_SUCCESS: the
// algorithm does not support this convolution).
cudnnStatus_t workspace_needed(const ConvPlan& plan, ConvPass pass, CudaContext& ctx, size_t* needed) {
  switch (pass) {
    case ConvPass::Forward:
      return cudnnGetConvolutionForwardWorkspaceSize(ctx.cudnn, plan.x_desc.get(), plan.w_desc.get(),
                                                     plan.conv_desc.get(), plan.y_desc.get(),
                                                     static_cast<cudnnConvolutionFwdAlgo_t>(plan.algo), needed);
    case ConvPass::BackwardData:
      return cudnnGetConvolutionBackwardDataWorkspaceSize(ctx.cudnn, plan.w_desc.get(), plan.y_desc.get(),
                                                          plan.conv_desc.get(), plan.x_desc.get(),
                                                          static_cast<cudnnConvolutionBwdDataAlgo_t>(plan.algo),
                                                          needed);
    default:
      return cudnnGetConvolutionBackwardFilterWorkspaceSize(
          ctx.cudnn, plan.x_desc.get(), plan.y_desc.get(), plan.conv_desc.get(), plan.w_desc.get(),
          static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan.algo), needed);
  }
}

// Takes a choice from the persisted cache, if cuDNN still accepts it for these descriptors.
bool adopt_cached(ConvPlan& plan, ConvPass pass, const ConvAlgoChoice& c, bool fma_only, CudaContext& ctx) {
  if (fma_only && c.math != CUDNN_FMA_MATH) return false;
  plan.algo = c.algo;
  plan.math = static_cast<cudnnMathType_t>(c.math);
  plan.conv_desc.set_math(plan.math);
  size_t needed = 0;
  if (workspace_needed(plan, pass, ctx, &needed) != CUDNN_STATUS_SUCCESS) return false;
  plan.workspace_bytes = std::max<size_t>(needed, c.workspace_bytes);
  return true;
}

// The persisted cache's key: the GPU model, cuDNN's version, the algorithm preference and the
// convolution (the in-memory key without its device class).
std::string persisted_key(const ConvKey& key, int device_index) {
  std::string s = device_model(device_index) + "|cudnn" + std::to_string(cudnnGetVersion()) +
                  (tensor_op_only() ? "|tensor-core|" : "|fastest|");
  for (size_t i = 1; i < key.size(); ++i) s += (i > 1 ? "," : "") + std::to_string(key[i]);
  return s;
}

// Times the algorithms on the real inputs; `out` is a buffer the pass may overwrite.
// Falls back to cuDNN's heuristic list when no timed algorithm qualifies.
void search_algorithm(ConvPlan& plan, ConvPass pass, const Tensor& x, const Tensor& w, const Tensor& y,
                      void* out, bool fma_only, bool deterministic_only, CudaContext& ctx) {
  const SearchWorkspace search_ws;
  void* ws = search_ws.ptr();
  const size_t cap = search_ws.bytes();
  int found = 0, index = -1;
  switch (pass) {
    case ConvPass::Forward: {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
          ctx.cudnn, plan.x_desc.get(), x.data(), plan.w_desc.get(), w.data(), plan.conv_desc.get(),
          plan.y_desc.get(), out, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, perf, ws, cap));
      index = pick_usable(perf, found, cap, fma_only, deterministic_only, x.dtype() != DType::F32 && tensor_op_only());
      if (index < 0) {
        CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
            ctx.cudnn, plan.x_desc.get(), plan.w_desc.get(), plan.conv_desc.get(), plan.y_desc.get(),
            CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, perf));
        index = pick_usable(perf, found, cap, fma_only, deterministic_only);
      }
      if (index >= 0) adopt(plan, perf[index]);
      break;
    }
    case ConvPass::BackwardData: {
      cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
          ctx.cudnn, plan.w_desc.get(), w.data(), plan.y_desc.get(), y.data(), plan.conv_desc.get(),
          plan.x_desc.get(), out, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &found, perf, ws, cap));
      index = pick_usable(perf, found, cap, fma_only, deterministic_only, x.dtype() != DType::F32 && tensor_op_only());
      if (index < 0) {
        CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
            ctx.cudnn, plan.w_desc.get(), plan.y_desc.get(), plan.conv_desc.get(), plan.x_desc.get(),
            CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &found, perf));
        index = pick_usable(perf, found, cap, fma_only, deterministic_only);
      }
      if (index >= 0) adopt(plan, perf[index]);
      break;
    }
    case ConvPass::BackwardFilter: {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
          ctx.cudnn, plan.x_desc.get(), x.data(), plan.y_desc.get(), y.data(), plan.conv_desc.get(),
          plan.w_desc.get(), out, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &found, perf, ws, cap));
      index = pick_usable(perf, found, cap, fma_only, deterministic_only, x.dtype() != DType::F32 && tensor_op_only());
      if (index < 0) {
        CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
            ctx.cudnn, plan.x_desc.get(), plan.y_desc.get(), plan.conv_desc.get(), plan.w_desc.get(),
            CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &found, perf));
        index = pick_usable(perf, found, cap, fma_only, deterministic_only);
      }
      if (index >= 0) adopt(plan, perf[index]);
      break;
    }
  }
  GE_CHECK(index >= 0, "cuDNN has no usable ", pass_name(pass), " algorithm for x ", x.str(), ", w ", w.str(),
           ", y ", y.str(), fma_only ? " without TF32" : "", deterministic_only ? " (deterministic only)" : "",
           " within a ", cap >> 20, " MiB workspace");

  // The heuristic fallback only estimates memory: ask for the exact size of the chosen one.
  size_t needed = 0;
  CUDNN_CHECK(workspace_needed(plan, pass, ctx, &needed));
  plan.workspace_bytes = std::max(plan.workspace_bytes, needed);
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
  CUDA_CHECK(cudaStreamIsCapturing(ctx.stream, &capture));
  if (capture != cudaStreamCaptureStatusNone)
    fail("cuDNN ", pass_name(pass), " algorithm search for x ", x.str(), ", w ", w.str(), ", y ", y.str(),
         " would run during CUDA graph capture: run warm-up steps with the same shapes before capturing");

  auto plan = std::make_unique<ConvPlan>(x, w, y, p);
  const bool fma_only = x.dtype() == DType::F32 && !p.allow_tf32;
  ConvAlgoCache& persisted = process_conv_algo_cache();
  const std::string persisted_as = persisted_key(key, x.device().index);
  const std::optional<ConvAlgoChoice> cached = persisted.find(persisted_as);
  if (!cached || !adopt_cached(*plan, pass, *cached, fma_only, ctx)) {
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
    persisted.store(persisted_as, ConvAlgoChoice{plan->algo, static_cast<int>(plan->math), plan->workspace_bytes});
  }
  std::lock_guard<std::mutex> lock(g_plans_mutex);
  return *g_plans.emplace(key, std::move(plan)).first->second;
}

// output = alpha * pass(inputs) + beta * output, with alpha = 1.
void run_conv(ConvPass pass, const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p,
              float beta) {
  check_conv(x, w, y, p, pass);
  CudaContext& ctx = context(x.device().index);
  ConvPlan& plan = plan_for(pass, x, w, y, p, beta, ctx);
  void* ws = plan.workspace_bytes > 0 ? workspace(ctx, plan.workspace_bytes) : nullptr;
  const float alpha = 1.f;
  switch (pass) {
    case ConvPass::Forward:
      CUDNN_CHECK(cudnnConvolutionForward(ctx.cudnn, &alpha, plan.x_desc.get(), x.data(), plan.w_desc.get(),
                                          w.data(), plan.conv_desc.get(),
                                          static_cast<cudnnConvolutionFwdAlgo_t>(plan.algo), ws,
                                          plan.workspace_bytes, &beta, plan.y_desc.get(), y.data()));
      break;
    case ConvPass::BackwardData:
      CUDNN_CHECK(cudnnConvolutionBackwardData(ctx.cudnn, &alpha, plan.w_desc.get(), w.data(),
                                               plan.y_desc.get(), y.data(), plan.conv_desc.get(),
                                               static_cast<cudnnConvolutionBwdDataAlgo_t>(plan.algo), ws,
                                               plan.workspace_bytes, &beta, plan.x_desc.get(), x.data()));
      break;
    case ConvPass::BackwardFilter:
      CUDNN_CHECK(cudnnConvolutionBackwardFilter(ctx.cudnn, &alpha, plan.x_desc.get(), x.data(),
                                                 plan.y_desc.get(), y.data(), plan.conv_desc.get(),
                                                 static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan.algo), ws,
                                                 plan.workspace_bytes, &beta, plan.w_desc.get(), w.data()));
      break;
  }
}

}  // namespace

void conv2d_forward(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p) {
  run_conv(ConvPass::Forward, x, w, y, p, 0.f);
}

void conv2d_backward_data(const Tensor& dy, const Tensor& w, Tensor& dx, const Conv2dParams& p) {
  run_conv(ConvPass::BackwardData, dx, w, dy, p, 0.f);
}

void conv2d_backward_filter(const Tensor& x, const Tensor& dy, Tensor& dw, const Conv2dParams& p, float beta) {
  run_conv(ConvPass::BackwardFilter, x, dw, dy, p, beta);
}

}  // namespace gpu
}  // namespace ge
