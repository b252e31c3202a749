// CPU reference cast between f32, f16, bf16 and f64, optionally changing the memory format.
// Every value passes through double (exact for all four types) and is rounded once to the
// destination type, to nearest even, so the result equals the GPU's single rounding.
#include <cstring>

#include "core/backend.h"
#include "core/half_bits.h"
#include "core/round_from_double.h"
#include "cpu/cpu_util.h"

namespace ge {
namespace cpu {
namespace {

double load_exact(const void* base, DType t, int64_t i) {
  switch (t) {
    case DType::F32: return static_cast<const float*>(base)[i];
    case DType::F16: return half_bits_to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::BF16: return bf16_bits_to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::F64: return static_cast<const double*>(base)[i];
    default: fail("cast: expected a floating source, got ", dtype_name(t));
  }
}

void store_rounded(void* base, DType t, int64_t i, double v) {
  switch (t) {
    case DType::F32: static_cast<float*>(base)[i] = static_cast<float>(v); return;
    case DType::F16: static_cast<uint16_t*>(base)[i] = double_to_half_bits(v); return;
    case DType::BF16: static_cast<uint16_t*>(base)[i] = double_to_bf16_bits(v); return;
    case DType::F64: static_cast<double*>(base)[i] = v; return;
    default: fail("cast: expected a floating destination, got ", dtype_name(t));
  }
}

bool same_layout(const Tensor& a, const Tensor& b) { return a.rank() != 4 || a.format() == b.format(); }

}  // namespace

void cast(const Tensor& src, Tensor& dst) {
  require_cpu_floating(src, "cast: src");
  require_cpu_floating(dst, "cast: dst");
  require_same_shape(src, dst, "cast: src", "cast: dst");
  const int64_t n = src.numel();
  if (n == 0) return;
  const bool linear = same_layout(src, dst);
  // In place works element by element only: a layout change would read what it already wrote.
  GE_CHECK(!src.same_storage(dst) || (linear && dtype_size(src.dtype()) == dtype_size(dst.dtype())), "cast: src ",
           src.str(), " and dst ", dst.str(), " share storage");
  if (linear && src.dtype() == dst.dtype()) {
    std::memmove(dst.data(), src.data(), src.nbytes());
    return;
  }
  constexpr int64_t kChunk = 1 << 14;
  parallel_for((n + kChunk - 1) / kChunk, [&](int64_t chunk) {
    const int64_t end = std::min(n, (chunk + 1) * kChunk);
    for (int64_t i = chunk * kChunk; i < end; ++i) {
      const int64_t from = linear ? i : physical_offset(src, i);
      const int64_t to = linear ? i : physical_offset(dst, i);
      store_rounded(dst.data(), dst.dtype(), to, load_exact(src.data(), src.dtype(), from));
    }
  });
}

}  // namespace cpu
}  // namespace ge
