// CPU reference for conv2d's three passes (bias-free, dilation 1, groups 1).
//
// Every pass first reads its operands into double buffers in one canonical layout
// (activations N,C,H,W; filters K,C,R,S), accumulates in double, and rounds once to the
// output dtype on store. Memory format is therefore handled only at the edges, and the loops
// below are the plain definition of a convolution:
//   y[n,k,p,q] = sum_{c,r,s} x[n,c, p*stride-pad+r, q*stride-pad+s] * w[k,c,r,s].
// Each pass is parallel over output planes that no other iteration writes.
#include <vector>

#include "core/backend.h"
#include "cpu/cpu_util.h"

namespace ge {
namespace cpu {
namespace {

// Sizes of one convolution, input (N,C,H,W), filter (K,C,R,S), output (N,K,P,Q).
struct ConvGeometry {
  int64_t N, C, H, W;
  int64_t K, R, S;
  int64_t P, Q;
  int64_t stride, pad;
};

ConvGeometry make_geometry(const Shape& x, const Shape& w, const Shape& y, const Conv2dParams& p, const char* pass) {
  GE_CHECK(x.size() == 4 && w.size() == 4 && y.size() == 4, pass, ": tensors must be 4-D");
  GE_CHECK(p.stride >= 1 && p.pad >= 0, pass, ": bad stride ", p.stride, " / pad ", p.pad);
  ConvGeometry g{x[0], x[1], x[2], x[3], w[0], w[2], w[3], y[2], y[3], p.stride, p.pad};
  GE_CHECK(w[1] == g.C, pass, ": filter has ", w[1], " input channels, activations have ", g.C);
  GE_CHECK(y[0] == g.N && y[1] == g.K, pass, ": output shape ", shape_str(y), " does not match N=", g.N, " K=", g.K);
  const int64_t expect_p = (g.H + 2 * g.pad - g.R) / g.stride + 1;
  const int64_t expect_q = (g.W + 2 * g.pad - g.S) / g.stride + 1;
  GE_CHECK(g.P == expect_p && g.Q == expect_q, pass, ": output ", g.P, "x", g.Q, " but input ", g.H, "x", g.W,
           " with kernel ", g.R, "x", g.S, " stride ", g.stride, " pad ", g.pad, " gives ", expect_p, "x", expect_q);
  return g;
}

// The outputs o in [0, out_size) whose input position o*stride + shift lies in [0, in_size),
// as a half-open range [lo, hi). Hoisting this out of the inner loop removes its bounds checks.
struct Range {
  int64_t lo, hi;
};
Range valid_outputs(int64_t shift, int64_t stride, int64_t in_size, int64_t out_size) {
  // o*stride + shift >= 0  <=>  o >= ceil(-shift / stride)
  int64_t lo = shift >= 0 ? 0 : (-shift + stride - 1) / stride;
  // o*stride + shift <= in_size - 1  <=>  o <= floor((in_size - 1 - shift) / stride)
  int64_t last = in_size - 1 - shift;
  int64_t hi = last < 0 ? 0 : std::min(out_size, last / stride + 1);
  return {lo, std::max(lo, hi)};
}

// The walk all three passes share: for each tap (r, s), tap(r, s), then pair(o, i) for every
// output o = p*Q + q of a plane whose input pixel (p*stride-pad+r, q*stride-pad+s) lies in the
// image, i = that pixel's index in an input plane; outputs in row-major order.
template <class Tap, class Pair>
void for_each_tap(const ConvGeometry& g, const Tap& tap, const Pair& pair) {
  for (int64_t r = 0; r < g.R; ++r) {
    const Range rows = valid_outputs(r - g.pad, g.stride, g.H, g.P);
    for (int64_t s = 0; s < g.S; ++s) {
      const int64_t col_shift = s - g.pad;
      const Range cols = valid_outputs(col_shift, g.stride, g.W, g.Q);
      tap(r, s);
      for (int64_t pp = rows.lo; pp < rows.hi; ++pp) {
        const int64_t out_row = pp * g.Q, in_row = (pp * g.stride - g.pad + r) * g.W + col_shift;
        for (int64_t q = cols.lo; q < cols.hi; ++q) pair(out_row + q, in_row + q * g.stride);
      }
    }
  }
}

void check_operands(const Tensor& a, const Tensor& b, const Tensor& out) {
  require_cpu_floating(a, "conv operand");
  require_cpu_floating(b, "conv operand");
  require_cpu_floating(out, "conv output");
}

}  // namespace

void conv2d_forward(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p) {
  check_operands(x, w, y);
  const ConvGeometry g = make_geometry(x.shape(), w.shape(), y.shape(), p, "conv2d_forward");
  const std::vector<double> xs = load_all_logical(x);
  const std::vector<double> ws = load_all_logical(w);
  std::vector<double> ys(static_cast<size_t>(y.numel()), 0.0);

  parallel_for(g.N * g.K, [&](int64_t nk) {
    const int64_t n = nk / g.K, k = nk % g.K;
    double* out = ys.data() + nk * g.P * g.Q;
    for (int64_t c = 0; c < g.C; ++c) {
      const double* xplane = xs.data() + (n * g.C + c) * g.H * g.W;
      const double* wkc = ws.data() + (k * g.C + c) * g.R * g.S;
      double wv = 0.0;
      for_each_tap(
          g, [&](int64_t r, int64_t s) { wv = wkc[r * g.S + s]; },
          [&](int64_t o, int64_t i) { out[o] += wv * xplane[i]; });
    }
  });
  store_all_logical(y, ys);
}

// dx[n,c,h,w] = sum over (k,r,s) and the outputs (p,q) that read (h,w) of dy[n,k,p,q] * w[k,c,r,s]:
// the same index relation as the forward pass, scattered from outputs back to inputs.
void conv2d_backward_data(const Tensor& dy, const Tensor& w, Tensor& dx, const Conv2dParams& p) {
  check_operands(dy, w, dx);
  const ConvGeometry g = make_geometry(dx.shape(), w.shape(), dy.shape(), p, "conv2d_backward_data");
  const std::vector<double> dys = load_all_logical(dy);
  const std::vector<double> ws = load_all_logical(w);
  std::vector<double> dxs(static_cast<size_t>(dx.numel()), 0.0);

  parallel_for(g.N * g.C, [&](int64_t nc) {
    const int64_t n = nc / g.C, c = nc % g.C;
    double* dxplane = dxs.data() + nc * g.H * g.W;
    for (int64_t k = 0; k < g.K; ++k) {
      const double* dyplane = dys.data() + (n * g.K + k) * g.P * g.Q;
      const double* wkc = ws.data() + (k * g.C + c) * g.R * g.S;
      double wv = 0.0;
      for_each_tap(
          g, [&](int64_t r, int64_t s) { wv = wkc[r * g.S + s]; },
          [&](int64_t o, int64_t i) { dxplane[i] += wv * dyplane[o]; });
    }
  });
  store_all_logical(dx, dxs);
}

// grad[k,c,r,s] = sum_{n,p,q} dy[n,k,p,q] * x[n,c, p*stride-pad+r, q*stride-pad+s];
// dw = beta * dw + grad, in double, rounded once.
void conv2d_backward_filter(const Tensor& x, const Tensor& dy, Tensor& dw, const Conv2dParams& p, float beta) {
  check_operands(x, dy, dw);
  const ConvGeometry g = make_geometry(x.shape(), dw.shape(), dy.shape(), p, "conv2d_backward_filter");
  const std::vector<double> xs = load_all_logical(x);
  const std::vector<double> dys = load_all_logical(dy);
  std::vector<double> grad(static_cast<size_t>(dw.numel()), 0.0);

  // Each tap's sum runs over n, then the outputs in row-major order.
  parallel_for(g.K * g.C, [&](int64_t kc) {
    const int64_t k = kc / g.C, c = kc % g.C;
    double* acc = grad.data() + kc * g.R * g.S;
    for (int64_t n = 0; n < g.N; ++n) {
      const double* xplane = xs.data() + (n * g.C + c) * g.H * g.W;
      const double* dyplane = dys.data() + (n * g.K + k) * g.P * g.Q;
      double* tap_acc = nullptr;
      for_each_tap(
          g, [&](int64_t r, int64_t s) { tap_acc = acc + r * g.S + s; },
          [&](int64_t o, int64_t i) { *tap_acc += dyplane[o] * xplane[i]; });
    }
  });

  // beta == 0 must overwrite whatever dw held (even NaN), so the old value is not even read.
  if (beta != 0.f) {
    for (int64_t i = 0; i < dw.numel(); ++i) grad[static_cast<size_t>(i)] += beta * load_logical(dw, i);
  }
  store_all_logical(dw, grad);
}

}  // namespace cpu
}  // namespace ge
