// CPU reference of the Philox draws. Element i (logical NCHW order, whatever the layout) takes
// word i % 4 of block offset + i / 4, so the values depend only on (seed, offset, i) and match
// the GPU bit for bit (see philox.h for why the arithmetic is spelled out).
#include "core/backend.h"
#include "core/half_bits.h"
#include "core/philox.h"
#include "cpu/cpu_util.h"

namespace ge {
namespace cpu {
namespace {

// Values are computed in float and rounded once to the tensor's dtype.
void store_float(Tensor& t, int64_t i, float v) {
  const int64_t p = physical_offset(t, i);
  switch (t.dtype()) {
    case DType::F32: t.data_as<float>()[p] = v; return;
    case DType::F16: t.data_as<uint16_t>()[p] = float_to_half_bits(v); return;
    case DType::BF16: t.data_as<uint16_t>()[p] = float_to_bf16_bits(v); return;
    case DType::F64: t.data_as<double>()[p] = static_cast<double>(v); return;
    default: fail("random fill: expected a floating tensor, got ", t.str());
  }
}

// Runs per_block(block, first_element) for every Philox block the tensor needs; blocks are
// independent, so they are spread over threads in chunks.
template <class PerBlock>
void for_each_block(const Tensor& t, uint64_t seed, uint64_t offset, const PerBlock& per_block) {
  const int64_t blocks = (t.numel() + 3) / 4;
  constexpr int64_t kChunk = 4096;
  parallel_for((blocks + kChunk - 1) / kChunk, [&](int64_t chunk) {
    const int64_t end = std::min(blocks, (chunk + 1) * kChunk);
    for (int64_t k = chunk * kChunk; k < end; ++k)
      per_block(philox::block_at(seed, offset + static_cast<uint64_t>(k)), 4 * k);
  });
}

}  // namespace

void fill_uniform(Tensor& t, uint64_t seed, uint64_t offset) {
  require_cpu_floating(t, "fill_uniform: t");
  const int64_t n = t.numel();
  for_each_block(t, seed, offset, [&](const philox::Block& b, int64_t first) {
    for (int j = 0; j < 4 && first + j < n; ++j) store_float(t, first + j, philox::uniform_from_word(b.w[j]));
  });
}

void fill_normal(Tensor& t, uint64_t seed, uint64_t offset, float mean, float stddev) {
  require_cpu_floating(t, "fill_normal: t");
  const int64_t n = t.numel();
  for_each_block(t, seed, offset, [&](const philox::Block& b, int64_t first) {
    float z[4];
    philox::normals_from_block(b, z);
    for (int j = 0; j < 4 && first + j < n; ++j) store_float(t, first + j, philox::affine(z[j], mean, stddev));
  });
}

}  // namespace cpu
}  // namespace ge
