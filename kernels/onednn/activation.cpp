// ReLU, LeakyReLU and Tanh forward and backward, and the element-wise casts and scaling, as
// threaded loops over contiguous storage. Element-wise ops pair operands by position, so they
// take operands of one layout (the dispatch falls back to the reference otherwise). The
// arithmetic is the reference's (kernels/cpu/activation.cpp, cast.cpp, amp.cpp): fp32 from
// any storage type, one rounding on store; y may alias x and dx may alias dy.
#include <cmath>

#include "onednn/element_types.h"
#include "onednn/fast_ops.h"

namespace ge::onednn {
namespace {

bool same_layout(const Tensor& a, const Tensor& b) {
  return a.rank() == b.rank() && (a.rank() != 4 || a.format() == b.format());
}

inline float forward_one(ops::Activation a, float x, float slope) {
  switch (a) {
    case ops::Activation::ReLU: return std::isnan(x) ? x : (x > 0.f ? x : 0.f);
    case ops::Activation::LeakyReLU: return x > 0.f ? x : x * slope;
    case ops::Activation::Tanh: return std::tanh(x);
  }
  return x;
}

inline float backward_one(ops::Activation a, float y, float dy, float slope) {
  switch (a) {
    case ops::Activation::ReLU: return y > 0.f ? dy : 0.f;
    case ops::Activation::LeakyReLU: return y > 0.f ? dy : dy * slope;
    case ops::Activation::Tanh: return dy * (1.f - y * y);
  }
  return dy;
}

// One loop per activation kind, so the compiler vectorises the piecewise-linear ones.
template <class T, class Fn>
void map_in_place(const T* in, T* out, int64_t n, const Fn& fn) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = narrow<T>(fn(widen(in[i])));
}

// NCHW <-> NHWC with the dtype conversion, one (n, c) plane per iteration.
void cast_between_layouts(const Tensor& src, Tensor& dst) {
  const int64_t N = src.dim(0), C = src.dim(1), H = src.dim(2), W = src.dim(3);
  with_element_type(src.dtype(), [&](auto from) {
    with_element_type(dst.dtype(), [&](auto to) {
      using S = decltype(from);
      using D = decltype(to);
      const S* in = static_cast<const S*>(src.data());
      D* out = static_cast<D*>(dst.data());
#pragma omp parallel for schedule(static)
      for (int64_t nc = 0; nc < N * C; ++nc) {
        const int64_t n = nc / C, c = nc % C;
        for (int64_t h = 0; h < H; ++h)
          for (int64_t w = 0; w < W; ++w)
            out[offset4(dst.format(), C, H, W, n, c, h, w)] =
                narrow<D>(widen(in[offset4(src.format(), C, H, W, n, c, h, w)]));
      }
    });
  });
}

}  // namespace

bool activation_forward(ops::Activation a, const Tensor& x, Tensor& y, float negative_slope) {
  if (!fast_dtype(x.dtype()) || x.dtype() != y.dtype() || !same_layout(x, y)) return false;
  with_element_type(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(x.data());
    T* out = static_cast<T*>(y.data());
    switch (a) {
      case ops::Activation::ReLU:
        map_in_place(in, out, x.numel(), [](float v) { return forward_one(ops::Activation::ReLU, v, 0.f); });
        break;
      case ops::Activation::LeakyReLU:
        map_in_place(in, out, x.numel(), [=](float v) { return v > 0.f ? v : v * negative_slope; });
        break;
      case ops::Activation::Tanh: map_in_place(in, out, x.numel(), [](float v) { return std::tanh(v); }); break;
    }
  });
  return true;
}

bool activation_backward(ops::Activation a, const Tensor& y, const Tensor& dy, Tensor& dx, float negative_slope) {
  const DType t = y.dtype();
  if (!fast_dtype(t) || dy.dtype() != t || dx.dtype() != t || !same_layout(y, dy) || !same_layout(y, dx)) return false;
  with_element_type(t, [&](auto tag) {
    using T = decltype(tag);
    const T* ys = static_cast<const T*>(y.data());
    const T* gs = static_cast<const T*>(dy.data());
    T* out = static_cast<T*>(dx.data());
    const int64_t n = y.numel();
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = narrow<T>(backward_one(a, widen(ys[i]), widen(gs[i]), negative_slope));
  });
  return true;
}

bool cast(const Tensor& src, Tensor& dst) {
  if (!fast_dtype(src.dtype()) || !fast_dtype(dst.dtype())) return false;
  if (!same_layout(src, dst)) {
    if (src.rank() != 4) return false;
    cast_between_layouts(src, dst);
    return true;
  }
  with_element_type(src.dtype(), [&](auto from) {
    with_element_type(dst.dtype(), [&](auto to) {
      using S = decltype(from);
      using D = decltype(to);
      const S* in = static_cast<const S*>(src.data());
      D* out = static_cast<D*>(dst.data());
      const int64_t n = src.numel();
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i) out[i] = narrow<D>(widen(in[i]));
    });
  });
  return true;
}

bool scale_inplace(const Tensor& t, float factor) {
  if (!fast_dtype(t.dtype())) return false;
  with_element_type(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* data = static_cast<T*>(t.data());
    map_in_place(data, data, t.numel(), [=](float v) { return v * factor; });
  });
  return true;
}

}  // namespace ge::onednn
