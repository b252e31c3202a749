// Small helpers shared by the CPU reference kernels: argument checks, logical-order element
// access that works for NCHW and NHWC alike, and a plain thread pool-less parallel loop.
// Private to kernels/cpu; not part of the public API.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "ganengine/error.h"
#include "ganengine/tensor.h"

namespace ge {
namespace cpu {

inline void require_cpu_floating(const Tensor& t, const char* what) {
  GE_CHECK(t.defined(), what, " is not defined");
  GE_CHECK(t.device().is_cpu(), what, " must be on the CPU, got ", t.str());
  GE_CHECK(is_floating(t.dtype()), what, " must be floating, got ", t.str());
}

inline void require_same_shape(const Tensor& a, const Tensor& b, const char* what_a, const char* what_b) {
  GE_CHECK(a.shape() == b.shape(), what_a, " ", a.str(), " and ", what_b, " ", b.str(), " must have the same shape");
}

// Physical element offset of the i-th element in logical order (NCHW for 4-D tensors,
// row-major otherwise). Element-wise kernels address every operand through this so that
// operands in different memory formats still pair up element by element.
inline int64_t physical_offset(const Tensor& t, int64_t i) {
  if (t.rank() != 4 || t.format() == MemoryFormat::NCHW) return i;
  const int64_t C = t.shape()[1], H = t.shape()[2], W = t.shape()[3];
  const int64_t w = i % W;
  const int64_t h = (i / W) % H;
  const int64_t c = (i / (W * H)) % C;
  const int64_t n = i / (W * H * C);
  return offset4(MemoryFormat::NHWC, C, H, W, n, c, h, w);
}

inline double load_logical(const Tensor& t, int64_t i) {
  return load_as_double(t.data(), t.dtype(), physical_offset(t, i));
}

inline void store_logical(Tensor& t, int64_t i, double v) {
  store_from_double(t.data(), t.dtype(), physical_offset(t, i), v);
}

// All values in logical order; the inverse of store_all_logical.
inline std::vector<double> load_all_logical(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = load_logical(t, i);
  return v;
}

// Writes values (logical order) into t, rounding each once to t's dtype.
inline void store_all_logical(Tensor& t, const std::vector<double>& values) {
  GE_CHECK(static_cast<int64_t>(values.size()) == t.numel(), "value count ", values.size(), " does not match ",
           t.str());
  for (int64_t i = 0; i < t.numel(); ++i) store_logical(t, i, values[static_cast<size_t>(i)]);
}

// The arithmetic type an element-wise op computes in: fp32 for f32/f16/bf16 (PyTorch's
// "opmath"), fp64 for the gradient-checking f64 tensors.
inline bool computes_in_double(DType t) { return t == DType::F64; }

// Runs fn(i) for i in [0, count) on up to hardware_concurrency threads. Iterations must be
// independent (each writes only its own outputs); work is handed out one index at a time so
// uneven iterations still balance.
template <class Fn>
void parallel_for(int64_t count, const Fn& fn) {
  if (count <= 0) return;
  const int64_t hw = std::max(1u, std::thread::hardware_concurrency());
  const int64_t workers = std::min(hw, count);
  if (workers == 1) {
    for (int64_t i = 0; i < count; ++i) fn(i);
    return;
  }
  std::atomic<int64_t> next{0};
  auto drain = [&]() {
    for (int64_t i = next++; i < count; i = next++) fn(i);
  };
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(workers - 1));
  for (int64_t t = 1; t < workers; ++t) threads.emplace_back(drain);
  drain();
  for (auto& th : threads) th.join();
}

}  // namespace cpu
}  // namespace ge
