// Helpers the per-op tests of tests/ops share, one namespace for each kind of op test
// (CONTRIBUTING.md): gradient checks, PyTorch goldens, the CPU reference's own cases, and the GPU
// against the CPU.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ganengine/ops.h"
#include "support/golden.h"
#include "support/test_util.h"

namespace ge::test {

// Central-difference gradient checks of the CPU ops' backward passes, in float64.
//
// Each check differentiates the scalar L = sum_i weights[i] * output[i] with random weights (a
// random linear functional of the op's output, so every output element contributes), and
// compares the analytic gradient (the op's backward with dy = weights) against
//   dL/dx_i ~ (L(x + h e_i) - L(x - h e_i)) / 2h,   h = 1e-6,
// with a tolerance of 1e-6 relative to the gradient's norm. Piecewise-linear activations skip
// points within 1e-3 of their kink, where the difference quotient straddles two slopes
// (the "kink window" of Caffe's GradientChecker).
namespace gradcheck {

using ge::DType;
using ge::MemoryFormat;
using ge::Shape;
using ge::Tensor;
using Values = std::vector<double>;
using LossOf = std::function<double(const Values&)>;

constexpr double kStep = 1e-6;
constexpr double kTolerance = 1e-6;

inline Tensor f64(const Values& v, const Shape& shape, MemoryFormat format = MemoryFormat::NCHW) {
  return Tensor::from_doubles(v, shape, DType::F64, ge::Device::cpu(), format);
}

inline Tensor f64_zeros(const Shape& shape, MemoryFormat format = MemoryFormat::NCHW) {
  return Tensor::zeros(shape, DType::F64, ge::Device::cpu(), format);
}

inline double weighted_sum(const Tensor& out, const Values& weights) {
  const Values v = out.to_doubles();
  REQUIRE(v.size() == weights.size());
  double s = 0.0;
  for (size_t i = 0; i < v.size(); ++i) s += weights[i] * v[i];
  return s;
}

// (L(x + h e_i) - L(x - h e_i)) / 2h for every i.
inline Values numeric_gradient(Values x, const LossOf& loss) {
  Values g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double original = x[i];
    x[i] = original + kStep;
    const double up = loss(x);
    x[i] = original - kStep;
    const double down = loss(x);
    x[i] = original;
    g[i] = (up - down) / (2 * kStep);
  }
  return g;
}

// Compares the two gradients over the elements not skipped; fails with the relative error.
inline void expect_same_gradient(const std::string& what, const Values& analytic, const Values& numeric,
                                 const std::vector<bool>& skip = {}) {
  REQUIRE(analytic.size() == numeric.size());
  Values a, n;
  for (size_t i = 0; i < analytic.size(); ++i) {
    if (!skip.empty() && skip[i]) continue;
    a.push_back(analytic[i]);
    n.push_back(numeric[i]);
  }
  REQUIRE(!a.empty());
  const double err = ge::test::rel_error(a, n);
  INFO(what, ": relative error ", err, " over ", a.size(), " elements");
  CHECK(err < kTolerance);
}

}  // namespace gradcheck

// PyTorch goldens: each op against PyTorch (float64 results of f32 inputs, stored in
// tests/goldens/golden_ops.safetensors): the CPU reference in NCHW, and the GPU in both layouts.
// fp32 must agree within 1e-5 of the tensor norm.
namespace goldens {

constexpr double kTol = 1e-5;

inline void expect_close(const Tensor& ours, const SafeTensorsFile& f, const std::string& key) {
  double err = rel_error(ours.to_doubles(), golden_tensor(f, key).to_doubles());
  INFO(key, ": relative error ", err);
  CHECK(err < kTol);
}

inline Tensor like(const Tensor& t) { return Tensor::empty(t.shape(), t.dtype(), t.device(), t.format()); }

// BCE's golden cases, defined in test_bce.cpp; the activations' GPU golden runs them too.
void bce_cases(Device d);

}  // namespace goldens

// The CPU reference's own cases (through ge::ops on CPU tensors): tensors made from values,
// compared with hand-computed results.
namespace cpu_ref {

using ge::DType;
using ge::MemoryFormat;
using ge::Shape;
using ge::Tensor;
using Values = std::vector<double>;
constexpr MemoryFormat kNCHW = MemoryFormat::NCHW;
constexpr MemoryFormat kNHWC = MemoryFormat::NHWC;

inline Tensor make(const Values& v, const Shape& shape, DType dtype = DType::F32, MemoryFormat format = kNCHW) {
  return Tensor::from_doubles(v, shape, dtype, ge::Device::cpu(), format);
}

inline Tensor zeros(const Shape& shape, DType dtype = DType::F32, MemoryFormat format = kNCHW) {
  return Tensor::zeros(shape, dtype, ge::Device::cpu(), format);
}

// The same logical values in another dtype and/or format (values already representable).
inline Tensor convert(const Tensor& t, DType dtype, MemoryFormat format) {
  return make(t.to_doubles(), t.shape(), dtype, t.rank() == 4 ? format : kNCHW);
}

inline void expect_values(const Tensor& t, const Values& expected, double tol = 0.0) {
  const Values got = t.to_doubles();
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(std::abs(got[i] - expected[i]) <= tol * std::max(1.0, std::abs(expected[i])));
  }
}

inline void expect_identical(const Tensor& a, const Tensor& b) {
  CHECK(ge::test::max_abs_diff(a.to_doubles(), b.to_doubles()) == 0.0);
}

}  // namespace cpu_ref

// The CUDA backend against the CPU reference: each op, in f32, f16 and bf16, NCHW and NHWC,
// on fresh random inputs. Both backends read the same (already rounded) inputs; GPU outputs are
// poisoned with NaN first, so an element the GPU forgot to write fails the comparison. Results
// must agree within tolerance_for(dtype) relative to the reference's norm.
namespace gpu_ref {

using ge::Device;
using ge::DType;
using ge::MemoryFormat;
using ge::Shape;
using ge::Tensor;
using ge::ops::Activation;
using Values = std::vector<double>;

constexpr DType kDTypes[] = {DType::F32, DType::F16, DType::BF16};
constexpr MemoryFormat kFormats[] = {MemoryFormat::NCHW, MemoryFormat::NHWC};
const Device kGpu = Device::cuda(0);
const Device kCpu = Device::cpu();

inline Tensor random_cpu(const Shape& s, DType dt, MemoryFormat f = MemoryFormat::NCHW, double lo = -1.0,
                         double hi = 1.0) {
  return ge::test::random_tensor(s, dt, kCpu, s.size() == 4 ? f : MemoryFormat::NCHW, lo, hi);
}

inline Tensor zeros_cpu(const Shape& s, DType dt, MemoryFormat f = MemoryFormat::NCHW) {
  return Tensor::zeros(s, dt, kCpu, s.size() == 4 ? f : MemoryFormat::NCHW);
}

inline Tensor values_cpu(const Values& v, const Shape& s, DType dt = DType::F32) {
  return Tensor::from_doubles(v, s, dt, kCpu);
}

inline Tensor gpu(const Tensor& cpu) { return cpu.to(kGpu); }

// An output buffer on the GPU, shaped like the reference's, full of NaN.
inline Tensor poisoned_gpu(const Tensor& like) { return ge::test::poisoned_like(like, kGpu); }

inline void expect_close(const std::string& what, const Tensor& gpu_out, const Tensor& cpu_ref, double tol) {
  const double err = ge::test::rel_error(gpu_out.to(kCpu), cpu_ref);
  INFO(what, ": ", gpu_out.str(), " relative error ", err, " vs tolerance ", tol);
  CHECK(err <= tol);
}

inline void expect_close(const std::string& what, const Tensor& gpu_out, const Tensor& cpu_ref) {
  expect_close(what, gpu_out, cpu_ref, ge::test::tolerance_for(cpu_ref.dtype()));
}

inline void expect_identical(const std::string& what, const Tensor& gpu_out, const Tensor& cpu_ref) {
  INFO(what, ": ", gpu_out.str());
  CHECK(gpu_out.to(kCpu).to_doubles() == cpu_ref.to_doubles());
}

inline std::string tag(DType dt, MemoryFormat f) { return std::string(ge::dtype_name(dt)) + " " + ge::format_name(f); }

// A convolution's shapes: x (n, c, h, w), w (k, c, r, s).
struct ConvCase {
  int64_t n, c, h, w, k, r, s;
  int stride, pad;
  // The output's (and so dy's) shape: (n, k, P, Q).
  Shape y_shape() const { return {n, k, ge::conv_out_size(h, r, stride, pad), ge::conv_out_size(w, s, stride, pad)}; }
};

inline std::vector<Tensor> clones(const std::vector<Tensor>& v, Device d) {
  std::vector<Tensor> out;
  for (const Tensor& t : v) out.push_back(t.to(d));
  return out;
}

}  // namespace gpu_ref

}  // namespace ge::test
