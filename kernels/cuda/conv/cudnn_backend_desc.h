// Ownership of cuDNN backend descriptors, for the convolution engine search
// (cudnn_engine.cpp). A descriptor that fails to build stays null
// and every later set/finalize on it fails, so a chain of && stops at the first refusal.
#pragma once
#include <cudnn.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "cuda/conv/conv_plan.h"

namespace ge {
namespace gpu {
namespace backend {

class Desc {
 public:
  explicit Desc(cudnnBackendDescriptorType_t type) {
    if (cudnnBackendCreateDescriptor(type, &d_) != CUDNN_STATUS_SUCCESS) d_ = nullptr;
  }
  ~Desc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  Desc(Desc&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  Desc& operator=(Desc&& o) noexcept {
    if (this != &o) {
      if (d_) cudnnBackendDestroyDescriptor(d_);
      d_ = std::exchange(o.d_, nullptr);
    }
    return *this;
  }
  Desc(const Desc&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }
  cudnnBackendDescriptor_t* ptr() { return &d_; }
  bool ok() const { return d_ != nullptr; }
  bool set(cudnnBackendAttributeName_t attr, cudnnBackendAttributeType_t type, int64_t count, const void* v) {
    return d_ && cudnnBackendSetAttribute(d_, attr, type, count, v) == CUDNN_STATUS_SUCCESS;
  }
  bool set_desc(cudnnBackendAttributeName_t attr, const Desc& other) {
    cudnnBackendDescriptor_t o = other.get();
    return set(attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o);
  }
  bool set_int(cudnnBackendAttributeName_t attr, int64_t v) { return set(attr, CUDNN_TYPE_INT64, 1, &v); }
  bool finalize() { return d_ && cudnnBackendFinalize(d_) == CUDNN_STATUS_SUCCESS; }
  int64_t get_int(cudnnBackendAttributeName_t attr) const {
    int64_t v = -1, n = 0;
    if (cudnnBackendGetAttribute(d_, attr, CUDNN_TYPE_INT64, 1, &n, &v) != CUDNN_STATUS_SUCCESS || n != 1) return -1;
    return v;
  }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// `count` fresh descriptors of one type for a get-attribute call that fills an array.
inline std::vector<Desc> fresh(cudnnBackendDescriptorType_t type, int64_t count) {
  std::vector<Desc> v;
  for (int64_t i = 0; i < count; ++i) v.emplace_back(type);
  return v;
}

inline std::vector<cudnnBackendDescriptor_t> raw(const std::vector<Desc>& v) {
  std::vector<cudnnBackendDescriptor_t> r;
  for (const Desc& d : v) r.push_back(d.get());
  return r;
}

inline bool built(Desc& d, bool ok) { return ok && d.finalize(); }

// One convolution pass as a backend operation over tensors x, w, y in their forward roles (a
// backward-data's dx is x, its dy y; a backward-filter's dw is w): the convolution descriptor
// (f32 accumulation, 2-D cross-correlation, no dilation) into `conv` and the pass, out =
// pass(inputs) + beta * out, into `op`. False when cuDNN refuses either.
inline bool conv_operation(ConvPass pass, const Desc& x, const Desc& w, const Desc& y, int64_t stride,
                           const int64_t (&pre_pad)[2], const int64_t (&post_pad)[2], float beta, Desc& conv,
                           Desc& op) {
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t ones[2] = {1, 1}, strides[2] = {stride, stride};
  conv = Desc(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  if (!built(conv, conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute) &&
                       conv.set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode) &&
                       conv.set_int(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, 2) &&
                       conv.set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, ones) &&
                       conv.set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, strides) &&
                       conv.set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pre_pad) &&
                       conv.set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, post_pad)))
    return false;
  // Each pass names the same three tensors by its own attributes.
  struct Attrs {
    cudnnBackendDescriptorType_t type;
    cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
  };
  static const Attrs kAttrs[3] = {
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA}};
  const Attrs& a = kAttrs[static_cast<int>(pass)];
  op = Desc(a.type);
  const float alpha = 1.f;
  return built(op, op.set_desc(a.x, x) && op.set_desc(a.w, w) && op.set_desc(a.y, y) && op.set_desc(a.conv, conv) &&
                       op.set(a.alpha, CUDNN_TYPE_FLOAT, 1, &alpha) && op.set(a.beta, CUDNN_TYPE_FLOAT, 1, &beta));
}

// The engine an engine configuration names; a null Desc when it cannot be read.
inline Desc engine_of(const Desc& cfg) {
  Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  int64_t n = 0;
  if (cudnnBackendGetAttribute(cfg.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                               engine.ptr()) != CUDNN_STATUS_SUCCESS ||
      n != 1)
    return Desc(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  return engine;
}

// Whether an engine carries a behaviour note; nullopt when its notes cannot be read.
inline std::optional<bool> has_behavior_note(const Desc& engine, cudnnBackendBehaviorNote_t note) {
  cudnnBackendBehaviorNote_t notes[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
  int64_t n = 0;
  if (cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                               CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &n, notes) != CUDNN_STATUS_SUCCESS)
    return std::nullopt;
  for (int64_t i = 0; i < n; ++i)
    if (notes[i] == note) return true;
  return false;
}

}  // namespace backend
}  // namespace gpu
}  // namespace ge
