// Multi-tensor Adam on the GPU, PyTorch's formula (no weight decay, no amsgrad) in fp32:
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// Everything the decision needs lives on the device: the step count t (so bias corrections
// follow the real number of applied steps) and the skip flag raised by the loss scaler. That
// keeps the host out of the loop and the whole optimizer step capturable in a CUDA graph.
//
// Every block computes t = step[0] + 1 itself; the stored count is only advanced afterwards by
// a one-thread kernel on the same stream, so no block can see a half-updated step.
#include <type_traits>
#include <vector>

#include "core/adam_math.h"
#include "core/backend.h"
#include "cuda/aligned.h"
#include "cuda/cuda_util.cuh"
#include "cuda/kernel_launch.cuh"
#include "cuda/multi_tensor.cuh"
#include "cuda/unscale_math.cuh"
#include "cuda/vector_pack.cuh"

namespace ge {
namespace gpu {
namespace {

// kPendingGrad: gradients still to be unscaled into kGrad (ops::PendingGrads), of the parameter's type.
enum AdamBuffer { kParam = 0, kGrad, kExpAvg, kExpAvgSq, kHalfCopy, kPendingGrad, kAdamBuffers };
constexpr int kAdamTensors = 32;
// A block per 8192 elements, a thread taking four neighbouring elements of each buffer at a time
// (one 16- or 8-byte access each), two such groups loaded before either is used. The launch bounds
// keep four blocks an SM, so a DCGAN's networks (about 340 and 440 blocks) run in one wave: smaller
// blocks take two waves, far below memory bandwidth (docs/performance.md).
constexpr int64_t kAdamChunk = 8192;
constexpr int kAdamBlocksPerSm = 4;
constexpr int kVec = 4;
constexpr int kGroupsInFlight = 2;
using AdamTable = TensorTable<kAdamBuffers, kAdamTensors>;

// Any nonzero flag means one of the optimizer's losses overflowed this step.
__device__ __forceinline__ bool any_flag(const float* skip, int count) {
  for (int i = 0; i < count; ++i)
    if (skip[i] != 0.f) return true;
  return false;
}

struct NoCopy {};  // adam_chunk's copy type when the parameter has no half copy

// Elements [begin, end) of one parameter: parameter and moments of type S, the f32 gradient, and
// the half copy of type H (NoCopy: none). Whole groups of kVec elements where every buffer is
// aligned for them, the rest one element a thread; each element's arithmetic is adam_element's.
// kPending: each gradient is first unscale()d from `pending` (and written back with
// store_grads); `update` false (a skipped step) leaves the rest.
template <bool kPending, class S, class H>
__device__ __forceinline__ void adam_chunk(const AdamElementScalars& s, S* p, float* g, S* m, S* v, H* copy,
                                           const S* pending, ElementUnscale& unscale, bool store_grads, bool update,
                                           int64_t begin, int64_t end) {
  constexpr bool kCopy = !std::is_same<H, NoCopy>::value;
  using Quad = Pack<S, kVec>;
  using GradQuad = Pack<float, kVec>;
  using CopyQuad = Pack<typename std::conditional<kCopy, H, float>::type, kVec>;
  bool quads = aligned_to(p, sizeof(Quad)) && aligned_to(m, sizeof(Quad)) && aligned_to(v, sizeof(Quad)) &&
               aligned_to(g, sizeof(GradQuad));
  if constexpr (kCopy) quads = quads && aligned_to(copy, sizeof(CopyQuad));
  if constexpr (kPending) quads = quads && aligned_to(pending, sizeof(Quad));
  const int64_t quad_end = quads ? begin + (end - begin) / kVec * kVec : begin;
  const int64_t stride = int64_t{blockDim.x} * kVec;
  for (int64_t first = begin + threadIdx.x * kVec; first < quad_end; first += kGroupsInFlight * stride) {
    Quad pq[kGroupsInFlight], mq[kGroupsInFlight], vq[kGroupsInFlight], dq[kGroupsInFlight];
    GradQuad gq[kGroupsInFlight];
#pragma unroll
    for (int j = 0; j < kGroupsInFlight; ++j) {
      const int64_t i = first + j * stride;
      if (i >= quad_end) break;
      if (update) {
        pq[j] = *reinterpret_cast<const Quad*>(p + i);
        mq[j] = *reinterpret_cast<const Quad*>(m + i);
        vq[j] = *reinterpret_cast<const Quad*>(v + i);
      }
      if constexpr (kPending) dq[j] = *reinterpret_cast<const Quad*>(pending + i);
      if (!kPending || unscale.accumulate) gq[j] = *reinterpret_cast<const GradQuad*>(g + i);
    }
#pragma unroll
    for (int j = 0; j < kGroupsInFlight; ++j) {
      const int64_t i = first + j * stride;
      if (i >= quad_end) break;
      if constexpr (kPending) {
#pragma unroll
        for (int e = 0; e < kVec; ++e) gq[j].v[e] = unscale(load_float(&dq[j].v[e]), gq[j].v[e]);
        if (store_grads) *reinterpret_cast<GradQuad*>(g + i) = gq[j];
      }
      if (!update) continue;
      CopyQuad cq;  // unused without a copy
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        float pf = load_float(&pq[j].v[e]), mf = load_float(&mq[j].v[e]), vf = load_float(&vq[j].v[e]);
        adam_element(s, gq[j].v[e], pf, mf, vf);
        store_float(&pq[j].v[e], pf);
        store_float(&mq[j].v[e], mf);
        store_float(&vq[j].v[e], vf);
        if constexpr (kCopy) store_float(&cq.v[e], pf);
      }
      if constexpr (kCopy) *reinterpret_cast<CopyQuad*>(copy + i) = cq;
      *reinterpret_cast<Quad*>(p + i) = pq[j];
      *reinterpret_cast<Quad*>(m + i) = mq[j];
      *reinterpret_cast<Quad*>(v + i) = vq[j];
    }
  }
  for (int64_t i = quad_end + threadIdx.x; i < end; i += blockDim.x) {
    float gf;
    if constexpr (kPending) {
      gf = unscale(load_float(pending + i), unscale.accumulate ? g[i] : 0.f);
      if (store_grads) g[i] = gf;
    } else {
      gf = g[i];
    }
    if (!update) continue;
    float pf = load_float(p + i), mf = load_float(m + i), vf = load_float(v + i);
    adam_element(s, gf, pf, mf, vf);
    store_float(p + i, pf);
    store_float(m + i, mf);
    store_float(v + i, vf);
    if constexpr (kCopy) store_float(copy + i, pf);
  }
}

// Parameters and moments of type S: f32 (masters, or fp32 models), or half at O3, where the
// update is computed in fp32 and each buffer rounded once on store. kPending: the gradients are
// unscaled from the table's kPendingGrad buffers first (ops::PendingGrads), found_inf raised on any
// non-finite one.
template <class S, bool kPending>
__global__ void __launch_bounds__(kThreads, kAdamBlocksPerSm)
    adam_kernel(AdamTable table, const float* step, const float* skip, int skip_count, double lr, double beta1,
                double beta2, double eps, const float* scale, float* found_inf, bool accumulate, bool store_grads) {
  await_previous_kernel();
  const bool update = !any_flag(skip, skip_count);  // else the step overflowed: leave every buffer
  if (!kPending && !update) return;
  int tensor;
  int64_t begin, end;
  locate_chunk<kAdamChunk>(table, blockIdx.x, tensor, begin, end);

  // Scalars as PyTorch forms them from its Python-float hyper-parameters (adam_math.h).
  const AdamElementScalars s = adam_scalars(lr, beta1, beta2, eps, static_cast<double>(step[0]) + 1.0);

  S* param = static_cast<S*>(table.ptr[kParam][tensor]);
  float* grad = static_cast<float*>(table.ptr[kGrad][tensor]);
  S* exp_avg = static_cast<S*>(table.ptr[kExpAvg][tensor]);
  S* exp_avg_sq = static_cast<S*>(table.ptr[kExpAvgSq][tensor]);
  const S* pending = static_cast<const S*>(table.ptr[kPendingGrad][tensor]);
  ElementUnscale unscale{kPending ? 1.f / scale[0] : 1.f, accumulate};
  void* copy = table.ptr[kHalfCopy][tensor];
  if (!copy)
    adam_chunk<kPending, S, NoCopy>(s, param, grad, exp_avg, exp_avg_sq, nullptr, pending, unscale, store_grads, update,
                                    begin, end);
  else if (table.type[kHalfCopy][tensor] == ElemType::F16)
    adam_chunk<kPending>(s, param, grad, exp_avg, exp_avg_sq, static_cast<__half*>(copy), pending, unscale, store_grads,
                         update, begin, end);
  else
    adam_chunk<kPending>(s, param, grad, exp_avg, exp_avg_sq, static_cast<__nv_bfloat16*>(copy), pending, unscale,
                         store_grads, update, begin, end);
  if constexpr (kPending) {
    // Every writer stores the same 1.0, so the race between blocks is benign (as unscale_kernel).
    if (__syncthreads_or(unscale.saw_non_finite) && threadIdx.x == 0) found_inf[0] = 1.f;
  }
}

// Runs after every adam_kernel of the step, in stream order.
__global__ void advance_step_kernel(float* step, const float* skip, int skip_count) {
  await_previous_kernel();
  if (!any_flag(skip, skip_count)) step[0] += 1.f;
}

void check_like(const Tensor& t, const Tensor& param, DType dtype, const char* what) {
  GE_CHECK(t.defined() && t.device() == param.device() && t.dtype() == dtype && same_element_order(t, param),
           "adam_step: ", what, " must be ", dtype_name(dtype), " with ", param.numel(),
           " elements laid out as the parameter on ", param.device().str(), ", is ",
           t.defined() ? t.str() : std::string("undefined"));
}

}  // namespace

void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& exp_avg,
               const std::vector<Tensor>& exp_avg_sq, Tensor& step, const Tensor& skip, const ops::AdamConfig& cfg,
               const std::vector<Tensor>& half_copies, const ops::PendingGrads* pending) {
  const size_t n = params.size();
  // List lengths are checked once, in ops::adam_step.
  GE_CHECK(step.device().is_cuda() && step.dtype() == DType::F32 && step.numel() == 1,
           "adam_step: step must be an f32 (1) GPU tensor, is ", step.str());
  GE_CHECK(skip.device().is_cuda() && skip.dtype() == DType::F32 && skip.numel() >= 1 && skip.numel() <= 8,
           "adam_step: skip must be an f32 (1..8) GPU tensor, is ", skip.str());
  const int skip_count = static_cast<int>(skip.numel());

  std::vector<std::vector<const Tensor*>> buffers(kAdamBuffers);
  std::vector<size_t> relaid_copies;  // half copies in another memory format than their master
  for (size_t i = 0; i < n; ++i) {
    GE_CHECK(
        params[i].device() == step.device() && params[i].dtype() == params[0].dtype() &&
            (params[i].dtype() == DType::F32 || params[i].dtype() == DType::F16 || params[i].dtype() == DType::BF16),
        "adam_step: parameters must share one of f32/f16/bf16 on ", step.device().str(), ", got ", params[i].str());
    check_like(grads[i], params[i], DType::F32, "grad");
    check_like(exp_avg[i], params[i], params[i].dtype(), "exp_avg");
    check_like(exp_avg_sq[i], params[i], params[i].dtype(), "exp_avg_sq");
    const Tensor* half = nullptr;
    if (!half_copies.empty() && half_copies[i].defined()) {
      const Tensor& copy = half_copies[i];
      GE_CHECK(copy.device() == step.device() && copy.shape() == params[i].shape() &&
                   (copy.dtype() == DType::F16 || copy.dtype() == DType::BF16),
               "adam_step: half copy must be f16/bf16 shaped like its parameter ", params[i].str(), ", is ",
               copy.str());
      if (same_element_order(copy, params[i]))
        half = &copy;
      else
        relaid_copies.push_back(i);
    }
    buffers[kParam].push_back(&params[i]);
    buffers[kGrad].push_back(&grads[i]);
    buffers[kExpAvg].push_back(&exp_avg[i]);
    buffers[kExpAvgSq].push_back(&exp_avg_sq[i]);
    buffers[kHalfCopy].push_back(half);
    if (pending) check_like(pending->src[i], params[i], params[i].dtype(), "pending gradient");
    buffers[kPendingGrad].push_back(pending ? &pending->src[i] : nullptr);
  }

  cudaStream_t stream = stream_of(step);
  const float* step_ptr = step.data_as<float>();
  const float* skip_ptr = skip.data_as<float>();
  if (n > 0) {
    GE_DISPATCH_FLOAT(params[0].dtype(), S, {
      const float* scale = pending ? pending->scale.data_as<float>() : nullptr;
      float* found = pending ? pending->found_inf.data_as<float>() : nullptr;
      const bool accumulate = pending && pending->accumulate, store = !pending || pending->store_grads;
      for_each_table<kAdamBuffers, kAdamTensors, kAdamChunk>(buffers, [&](const AdamTable& table, int blocks) {
        auto kernel = pending ? adam_kernel<S, true> : adam_kernel<S, false>;
        launch_kernel(kernel, blocks, kThreads, 0, stream, table, step_ptr, skip_ptr, skip_count, cfg.lr, cfg.beta1,
                      cfg.beta2, cfg.eps, scale, found, accumulate, store);
        CUDA_CHECK_LAUNCH();
      });
    });
  }
  launch_kernel(advance_step_kernel, 1, 1, 0, stream, step.data_as<float>(), skip_ptr, skip_count);
  CUDA_CHECK_LAUNCH();
  // A copy laid out differently is refreshed by a layout-converting cast. Doing it even on a
  // skipped step is harmless: the copy is then the unchanged master rounded again, as before.
  for (size_t i : relaid_copies) {
    Tensor copy = half_copies[i];
    cast(params[i], copy);
  }
}

}  // namespace gpu
}  // namespace ge
