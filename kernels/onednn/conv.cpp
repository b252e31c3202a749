// conv2d's three passes on oneDNN (transposed convolutions reach them through ops.h's mapping:
// a transposed forward is conv2d's backward-data, and so on). The reference is
// kernels/cpu/conv.cpp.
//
// Each pass is one convolution primitive per shape, made once (primitive_cache.h) with the
// layouts left to oneDNN (format "any": blocked nChw16c on AVX-512), the operands reordered in
// and the result reordered out. Inputs compute in compute_type (f32, or bf16 where native);
// outputs are always produced in f32 and rounded once into the tensor's dtype, so f16 is storage
// only and bf16 accumulates and rounds like the reference. Backward-filter's beta: the gradient
// lands in f32 and is added to beta * dw in f32 before that single rounding.
#include <string>

#include "core/backend.h"
#include "onednn/element_types.h"
#include "onednn/fast_ops.h"
#include "onednn/onednn_context.h"
#include "onednn/primitive_cache.h"
#include "onednn/reorder.h"

namespace ge::onednn {
namespace {

using dt = dnnl::memory::data_type;
using md = dnnl::memory::desc;

enum class Pass { Forward, BackwardData, BackwardFilter };

struct ConvPlan {
  dnnl::primitive prim;
  md x, w, y, scratch;  // the layouts the primitive reads and writes
};

// The primitive's view of one convolution: x (N,C,H,W), w (K,C,R,S), y (N,K,P,Q) in the roles
// of the pass; the right padding that gives exactly y's size (oneDNN wants it spelled out).
struct ConvShape {
  const Tensor& x;
  const Tensor& w;
  const Tensor& y;
  const Conv2dParams& p;
  dnnl::memory::dims strides() const { return {p.stride, p.stride}; }
  dnnl::memory::dims pad_left() const { return {p.pad, p.pad}; }
  dnnl::memory::dims pad_right() const {
    return {(y.dim(2) - 1) * p.stride + w.dim(2) - x.dim(2) - p.pad,
            (y.dim(3) - 1) * p.stride + w.dim(3) - x.dim(3) - p.pad};
  }
};

bool takes(const ConvShape& s) {
  const DType t = s.x.dtype();
  if (!fast_dtype(t) || s.w.dtype() != t || s.y.dtype() != t) return false;
  const auto pr = s.pad_right();
  return pr[0] >= 0 && pr[1] >= 0;
}

ConvPlan make_plan(Pass pass, const ConvShape& s) {
  const dt c = compute_type(s.x.dtype());
  // The output of each pass in f32; its inputs in the compute type.
  const md x = any_desc(s.x, pass == Pass::BackwardData ? dt::f32 : c);
  const md w = any_desc(s.w, pass == Pass::BackwardFilter ? dt::f32 : c);
  const md y = any_desc(s.y, pass == Pass::Forward ? dt::f32 : c);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const auto alg = dnnl::algorithm::convolution_direct;
  const dnnl::convolution_forward::desc fwd(dnnl::prop_kind::forward_training, alg, any_desc(s.x, c), any_desc(s.w, c),
                                            any_desc(s.y, c), s.strides(), s.pad_left(), s.pad_right());
  const dnnl::convolution_forward::primitive_desc hint(fwd, engine());
  switch (pass) {
    case Pass::Forward: {
      const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training, alg, x, w, y, s.strides(),
                                              s.pad_left(), s.pad_right());
      const dnnl::convolution_forward::primitive_desc pd(d, attr, engine());
      return {dnnl::convolution_forward(pd), pd.src_desc(), pd.weights_desc(), pd.dst_desc(), pd.scratchpad_desc()};
    }
    case Pass::BackwardData: {
      const dnnl::convolution_backward_data::desc d(alg, x, w, y, s.strides(), s.pad_left(), s.pad_right());
      const dnnl::convolution_backward_data::primitive_desc pd(d, attr, engine(), hint);
      return {dnnl::convolution_backward_data(pd), pd.diff_src_desc(), pd.weights_desc(), pd.diff_dst_desc(),
              pd.scratchpad_desc()};
    }
    case Pass::BackwardFilter: {
      const dnnl::convolution_backward_weights::desc d(alg, x, w, y, s.strides(), s.pad_left(), s.pad_right());
      const dnnl::convolution_backward_weights::primitive_desc pd(d, attr, engine(), hint);
      return {dnnl::convolution_backward_weights(pd), pd.src_desc(), pd.diff_weights_desc(), pd.diff_dst_desc(),
              pd.scratchpad_desc()};
    }
  }
  fail("unknown convolution pass");
}

std::shared_ptr<const ConvPlan> plan_for(Pass pass, const ConvShape& s) {
  static PrimitiveCache<ConvPlan> cache;
  const std::string key = std::to_string(static_cast<int>(pass)) + key_of(s.x) + key_of(s.w) + key_of(s.y) + "s" +
                          std::to_string(s.p.stride) + "p" + std::to_string(s.p.pad) + "c" +
                          std::to_string(static_cast<int>(compute_type(s.x.dtype())));
  return cache.get(key, [&] { return make_plan(pass, s); });
}

// dw = beta * dw + grad over the f32 gradient in dw's own layout, rounded once.
void add_scaled(const float* grad, Tensor& dw, float beta) {
  with_element_type(dw.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* out = static_cast<T*>(dw.data());
    const int64_t n = dw.numel();
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = narrow<T>(beta * widen(out[i]) + grad[i]);
  });
}

}  // namespace

bool conv2d_forward(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p) {
  const ConvShape s{x, w, y, p};
  if (!takes(s)) return false;
  const auto plan = plan_for(Pass::Forward, s);
  dnnl::memory xm = input_in_layout(x, plan->x, Slot::InputA, Slot::WidenA);
  dnnl::memory wm = input_in_layout(w, plan->w, Slot::InputB, Slot::WidenB);
  dnnl::memory ym = output_in_layout(y, plan->y, Slot::Output);
  dnnl::memory scratch(plan->scratch, engine(), workspace(Slot::Scratchpad, plan->scratch.get_size()));
  plan->prim.execute(stream(),
                     {{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, ym}, {DNNL_ARG_SCRATCHPAD, scratch}});
  stream().wait();
  store_result(ym, y, Slot::WidenOutput);
  return true;
}

bool conv2d_backward_data(const Tensor& dy, const Tensor& w, Tensor& dx, const Conv2dParams& p) {
  const ConvShape s{dx, w, dy, p};
  if (!takes(s)) return false;
  const auto plan = plan_for(Pass::BackwardData, s);
  dnnl::memory dym = input_in_layout(dy, plan->y, Slot::InputA, Slot::WidenA);
  dnnl::memory wm = input_in_layout(w, plan->w, Slot::InputB, Slot::WidenB);
  dnnl::memory dxm = output_in_layout(dx, plan->x, Slot::Output);
  dnnl::memory scratch(plan->scratch, engine(), workspace(Slot::Scratchpad, plan->scratch.get_size()));
  plan->prim.execute(
      stream(),
      {{DNNL_ARG_DIFF_DST, dym}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DIFF_SRC, dxm}, {DNNL_ARG_SCRATCHPAD, scratch}});
  stream().wait();
  store_result(dxm, dx, Slot::WidenOutput);
  return true;
}

bool conv2d_backward_filter(const Tensor& x, const Tensor& dy, Tensor& dw, const Conv2dParams& p, float beta) {
  const ConvShape s{x, dw, dy, p};
  if (!takes(s)) return false;
  const auto plan = plan_for(Pass::BackwardFilter, s);
  dnnl::memory xm = input_in_layout(x, plan->x, Slot::InputA, Slot::WidenA);
  dnnl::memory dym = input_in_layout(dy, plan->y, Slot::InputB, Slot::WidenB);
  // beta == 0 overwrites dw (even NaN there is never read); otherwise the gradient goes to an
  // f32 copy in dw's layout first and is added.
  dnnl::memory dwm = beta == 0.f ? output_in_layout(dw, plan->w, Slot::Output)
                                 : dnnl::memory(plan->w, engine(), workspace(Slot::Output, plan->w.get_size()));
  dnnl::memory scratch(plan->scratch, engine(), workspace(Slot::Scratchpad, plan->scratch.get_size()));
  plan->prim.execute(
      stream(),
      {{DNNL_ARG_SRC, xm}, {DNNL_ARG_DIFF_DST, dym}, {DNNL_ARG_DIFF_WEIGHTS, dwm}, {DNNL_ARG_SCRATCHPAD, scratch}});
  stream().wait();
  if (beta == 0.f) {
    store_result(dwm, dw, Slot::WidenOutput);
  } else {
    // Into a separate f32 buffer: dw still holds the values beta scales.
    const dnnl::memory::desc flat = user_desc(dw, dt::f32);
    dnnl::memory grad = dwm;
    if (!(flat == plan->w)) {
      grad = dnnl::memory(flat, engine(), workspace(Slot::WidenOutput, flat.get_size()));
      dnnl::reorder(dwm, grad).execute(stream(), dwm, grad);
      stream().wait();
    }
    add_scaled(static_cast<const float*>(grad.get_data_handle()), dw, beta);
  }
  return true;
}

// The fused convolutions: the convolution, then the activation's pass over its output (or its
// gradient first), exactly the reference's sequence (kernels/cpu/conv_activation.cpp).
bool conv2d_activation_forward(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p,
                               const ops::FusedActivation& act) {
  if (!onednn::conv2d_forward(x, w, y, p)) return false;
  return onednn::activation_forward(act.kind, y, y, act.negative_slope);
}

bool conv2d_activation_backward_filter(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dw,
                                       const Conv2dParams& p, const ops::FusedActivation& act, float beta) {
  if (!takes({x, dw, dy, p}) || !fast_dtype(y.dtype())) return false;
  Tensor dpre = Tensor::empty(dy.shape(), dy.dtype(), dy.device(), dy.format());
  return onednn::activation_backward(act.kind, y, dy, dpre, act.negative_slope) &&
         onednn::conv2d_backward_filter(x, dpre, dw, p, beta);
}

bool conv2d_activation_backward_data(const Tensor& y, const Tensor& dy, const Tensor& w, Tensor& dx,
                                     const Conv2dParams& p, const ops::FusedActivation& act,
                                     const ops::InputActivation* input) {
  if (!takes({dx, w, dy, p}) || !fast_dtype(y.dtype())) return false;
  Tensor dpre = Tensor::empty(dy.shape(), dy.dtype(), dy.device(), dy.format());
  if (!onednn::activation_backward(act.kind, y, dy, dpre, act.negative_slope) ||
      !onednn::conv2d_backward_data(dpre, w, dx, p))
    return false;
  return !input || onednn::activation_backward(input->act.kind, input->x, dx, dx, input->act.negative_slope);
}

bool conv_transpose2d_activation_forward(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p,
                                         const ops::FusedActivation& act) {
  if (!onednn::conv2d_backward_data(x, w, y, p)) return false;
  return onednn::activation_forward(act.kind, y, y, act.negative_slope);
}

}  // namespace ge::onednn
