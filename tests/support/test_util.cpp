#include "support/test_util.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>

namespace ge::test {

std::mt19937_64& rng() {
  static std::mt19937_64 gen = [] {
    const char* env = std::getenv("GE_TEST_SEED");
    uint64_t seed = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
    std::cerr << "[test] random seed " << seed << " (set GE_TEST_SEED=" << seed << " to repeat)\n";
    return std::mt19937_64(seed);
  }();
  return gen;
}

std::vector<double> random_values(int64_t n, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng());
  return v;
}

Tensor random_tensor(const Shape& shape, DType dtype, Device device, MemoryFormat format, double lo, double hi) {
  return Tensor::from_doubles(random_values(shape_numel(shape), lo, hi), shape, dtype, device, format);
}

double rel_error(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) return std::numeric_limits<double>::infinity();
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  if (den == 0) return std::sqrt(num);
  return std::sqrt(num / den);
}

double rel_error(const Tensor& a, const Tensor& b) { return rel_error(a.to_doubles(), b.to_doubles()); }

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double d = std::fabs(a[i] - b[i]);
    if (std::isnan(d)) return std::numeric_limits<double>::infinity();
    m = std::max(m, d);
  }
  return m;
}

Tensor f32_scalar(float v, Device device) { return Tensor::from_floats({v}, {1}, DType::F32, device); }

ChannelStats exact_channel_stats(const Tensor& t) {
  const std::vector<double> v = t.to(Device::cpu()).to_doubles();  // logical (N, C, H, W) order
  const int64_t C = t.dim(1), HW = t.dim(2) * t.dim(3), N = t.dim(0);
  ChannelStats s{std::vector<double>(C, 0.0), std::vector<double>(C, 0.0), std::vector<double>(C, 0.0)};
  for (int64_t c = 0; c < C; ++c) {
    double sum = 0, sq = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < HW; ++i) sum += v[(n * C + c) * HW + i];
    const double mean = sum / static_cast<double>(N * HW);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < HW; ++i) sq += (v[(n * C + c) * HW + i] - mean) * (v[(n * C + c) * HW + i] - mean);
    s.count[c] = static_cast<double>(N * HW);
    s.mean[c] = mean;
    s.var[c] = sq / s.count[c];
  }
  return s;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  const Tensor ha = a.to(Device::cpu()), hb = b.to(Device::cpu());
  return ha.shape() == hb.shape() && ha.dtype() == hb.dtype() && ha.format() == hb.format() &&
         std::memcmp(ha.data(), hb.data(), ha.nbytes()) == 0;
}

bool same_values_or_both_nan(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape() || a.format() != b.format()) return false;
  const std::vector<double> x = a.to_doubles(), y = b.to_doubles();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) && std::isnan(y[i])) continue;
    uint64_t bx = 0, by = 0;  // the bits, so that -0 and +0 differ
    std::memcpy(&bx, &x[i], sizeof(double));
    std::memcpy(&by, &y[i], sizeof(double));
    if (bx != by) return false;
  }
  return true;
}

void poison(Tensor& t) {
  Tensor host = Tensor::empty(t.shape(), t.dtype(), Device::cpu(), t.format());
  if (is_floating(t.dtype())) {
    for (int64_t i = 0; i < host.numel(); ++i)
      store_from_double(host.data(), t.dtype(), i, std::numeric_limits<double>::quiet_NaN());
  } else {
    std::memset(host.data(), 0xAB, host.nbytes());
  }
  t.copy_from(host);
}

Tensor poisoned_like(const Tensor& like, Device device) {
  Tensor t = Tensor::empty(like.shape(), like.dtype(), device, like.format());
  poison(t);
  return t;
}

double tolerance_for(DType t) {
  switch (t) {
    case DType::F64: return 1e-10;
    case DType::F32: return 1e-5;
    case DType::F16: return 1e-3;
    case DType::BF16: return 1e-2;
    default: return 0;
  }
}

std::string data_path(const std::string& name) {
  // GE_TEST_DATA_DIR: where tests/goldens is for a binary run away from its build tree.
  const char* dir = std::getenv("GE_TEST_DATA_DIR");
  return std::string(dir ? dir : GE_TEST_DATA_DIR) + "/" + name;
}

std::string ganengine_binary() {
  const char* bin = std::getenv("GE_BINARY");
  return bin ? bin : GE_BINARY;
}

}  // namespace ge::test
