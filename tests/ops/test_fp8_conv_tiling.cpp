// The FP8 warpgroup-MMA convolutions' index arithmetic (kernels/cuda/conv/fp8_conv_tiling.h), run
// on the CPU the way the kernel runs it: for every block, each of its 256 threads copies its
// chunks of each stage where fp8_conv::ThreadChunks, KCursor, a_source and b_source say; each
// warpgroup's two MMAs of a stage read A and B through their descriptors (a core matrix of 8 rows
// by 16 bytes, kLeadingBytes apart along K, kStrideBytes along the rows); the epilogue writes the
// accumulators where accumulator_row, accumulator_column and output_pixel say. Checked: no chunk
// is written twice in a stage, every byte an MMA reads was written in that stage (unwritten
// ones are NaN and would spread), every output element is written exactly once, and the result
// is the CPU emulation's (ops::fp8_conv2d_*): exactly with codes -1, 0 and 1, whose sums are
// integers, and to f32 rounding with random codes. The hardware's side (the descriptor and
// accumulator layouts, the MMAs themselves) is tests/ops/test_gpu_fp8_conv.cpp's.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/fp8_bits.h"
#include "cuda/conv/fp8_conv_tiling.h"
#include "ganengine/fp8.h"
#include "ganengine/ops.h"
#include "support/test_util.h"

using namespace ge;
using namespace ge::test;
namespace tiling = ge::gpu::fp8_conv;

namespace {

const double kUnwritten = std::numeric_limits<double>::quiet_NaN();

std::vector<uint8_t> bytes_of(const Tensor& codes) {
  const uint8_t* p = codes.data_as<uint8_t>();
  return std::vector<uint8_t>(p, p + codes.numel());
}

// The kernel's result for geometry g: A's codes (format af) and the weights as the kernel reads
// them (plain, or arranged by phase), all sums in double, scale_invs 1.
std::vector<double> run_like_the_kernel(const tiling::Geometry& g, const std::vector<uint8_t>& a, Fp8Format af,
                                        const std::vector<uint8_t>& w) {
  const int n = tiling::tile_columns(g);
  const int64_t positions = g.positions();
  std::vector<double> out(static_cast<size_t>(g.images) * g.out_h * g.out_w * g.out_c, kUnwritten);
  const size_t b_at = size_t{tiling::kTileRows} * tiling::kStageK;
  struct Thread {
    tiling::ThreadChunks chunks;
    tiling::RowOrigin rows[2];
    tiling::KCursor k;
  };
  for (int phase = 0; phase < g.phases; ++phase)
    for (int col0 = 0; col0 < g.out_c; col0 += n)
      for (int64_t row0 = 0; row0 < positions; row0 += tiling::kTileRows) {
        CAPTURE(phase);
        CAPTURE(col0);
        CAPTURE(row0);
        const int64_t weights = tiling::block_weights(phase, col0, g);
        std::vector<Thread> threads;
        for (int t = 0; t < tiling::kThreads; ++t) {
          const tiling::ThreadChunks chunks(t);
          threads.push_back(
              {chunks,
               {tiling::row_origin(row0 + chunks.row(0), g, phase), tiling::row_origin(row0 + chunks.row(1), g, phase)},
               tiling::KCursor(16 * chunks.chunk, g)});
        }
        std::vector<double> acc(size_t{tiling::kTileRows} * n, 0.0);
        for (int stage = 0; stage < g.k_stages(); ++stage) {
          std::vector<double> smem(tiling::stage_bytes(n), kUnwritten);
          std::vector<bool> written(smem.size(), false);
          int64_t misplaced = 0;  // copies outside the stage or the source, or onto a written byte
          auto copy = [&](size_t at, const std::vector<uint8_t>& src, int64_t from, Fp8Format f) {
            if (at + 16 > smem.size() || from + 16 > static_cast<int64_t>(src.size())) {
              ++misplaced;
              return;
            }
            for (size_t b = 0; b < 16; ++b) {
              misplaced += written[at + b];
              written[at + b] = true;
              smem[at + b] = from < 0 ? 0.0 : fp8_bits_to_float(src[static_cast<size_t>(from) + b], f);
            }
          };
          for (Thread& th : threads) {
            for (int i = 0; i < 2; ++i) copy(th.chunks.offset(i), a, tiling::a_source(th.rows[i], th.k, g), af);
            for (int i = 0; i < n / 64; ++i) {
              const int64_t from = tiling::b_source(th.chunks.row(i), th.k, g);
              copy(b_at + th.chunks.offset(i), w, from < 0 ? -1 : weights + from, Fp8Format::E4M3);
            }
            th.k.advance(g);
          }
          REQUIRE(misplaced == 0);
          // A core matrix's byte (row, k) as a descriptor starting at `start` addresses it.
          auto element = [&](size_t start, int row, int k) {
            return smem[start + (k / 16) * tiling::kLeadingBytes + (row / 8) * tiling::kStrideBytes + (row % 8) * 16 +
                        k % 16];
          };
          for (int wg = 0; wg < 2; ++wg)
            for (int j = 0; j < tiling::kStageChunks / 2; ++j) {
              const size_t a_start = size_t{64} * wg * tiling::kStageK + 256 * j, b_start = b_at + 256 * j;
              for (int row = 0; row < 64; ++row)
                for (int col = 0; col < n; ++col) {
                  double sum = 0;
                  for (int k = 0; k < 32; ++k) sum += element(a_start, row, k) * element(b_start, col, k);
                  acc[static_cast<size_t>(64 * wg + row) * n + col] += sum;
                }
            }
        }
        int64_t overwritten = 0;  // stores outside the output or onto a written element
        for (int t = 0; t < tiling::kThreads; ++t)
          for (int h = 0; h < 2; ++h) {
            const int row = tiling::accumulator_row(t, h);
            if (row0 + row >= positions) continue;
            const int64_t pixel = tiling::output_pixel(row0 + row, g, phase) + col0;
            for (int j = 0; j < n / 8; ++j)
              for (int e = 0; e < 2; ++e) {
                const int col = tiling::accumulator_column(t, j, e);
                const size_t at = static_cast<size_t>(pixel + col);
                if (at >= out.size() || !std::isnan(out[at])) {
                  ++overwritten;
                  continue;
                }
                out[at] = acc[static_cast<size_t>(row) * n + col];
              }
          }
        REQUIRE(overwritten == 0);
      }
  return out;
}

struct Case {
  std::string name;
  Shape a, w, out;
  Fp8Format a_format;
  Conv2dParams p;
};

Fp8Tensor codes(const Shape& shape, Fp8Format f, bool unit) {
  std::vector<double> v = random_values(shape_numel(shape), -2.0, 2.0);
  if (unit)
    for (double& x : v) x = std::round(0.7 * x);
  const Tensor values = Tensor::from_doubles(v, shape, DType::F32, Device::cpu(), MemoryFormat::NHWC);
  return ops::fp8_quantized(values, make_fp8_scaling(f, Fp8DelayedScaling{}, Device::cpu()));
}

// The case as the kernel would run it against the emulation, with unit and with random codes.
void check(const Case& c, bool backward_data) {
  CAPTURE(c.name);
  tiling::Geometry g{};
  REQUIRE((backward_data ? tiling::backward_data_geometry(c.a, c.w, c.out, c.p, &g)
                         : tiling::forward_geometry(c.a, c.w, c.out, c.p, &g)));
  for (bool unit : {true, false}) {
    CAPTURE(unit);
    const Fp8Tensor a = codes(c.a, c.a_format, unit), w = codes(c.w, Fp8Format::E4M3, unit);
    std::vector<uint8_t> weights = bytes_of(w.data);
    if (backward_data) {
      const std::vector<uint8_t> plain = weights;
      for (size_t i = 0; i < weights.size(); ++i)
        weights[i] = plain[static_cast<size_t>(
            tiling::phase_weight_source(static_cast<int64_t>(i), static_cast<int>(c.w[0]), static_cast<int>(c.w[1])))];
    }
    const std::vector<double> got = run_like_the_kernel(g, bytes_of(a.data), c.a_format, weights);
    Tensor want = Tensor::empty(c.out, DType::F32, Device::cpu(), MemoryFormat::NHWC);
    if (backward_data)
      ops::fp8_conv2d_backward_data(a, w, want, c.p);
    else
      ops::fp8_conv2d_forward(a, w, want, c.p);
    // Storage order: both NHWC.
    const float* e = want.data_as<float>();
    const std::vector<double> expected(e, e + want.numel());
    if (unit)
      CHECK(got == expected);
    else
      CHECK(rel_error(got, expected) < 1e-5);
  }
}

}  // namespace

TEST_CASE(
    "fp8 conv tiling: the forward as its copies and MMA reads and stores move the bytes is the reference convolution") {
  // A K of 288 bytes that ends inside a stage, 32 channels (two taps a stage), 64-column tiles;
  // two 128-column tiles; three row tiles, the last partial.
  const std::vector<Case> cases = {
      {"3x3 32 -> 64", {2, 32, 9, 7}, {64, 32, 3, 3}, {2, 64, 9, 7}, Fp8Format::E5M2, {1, 1}},
      {"4x4 64 -> 256", {3, 64, 12, 12}, {256, 64, 4, 4}, {3, 256, 6, 6}, Fp8Format::E4M3, {2, 1}},
      {"4x4 32 -> 64, 320 rows", {5, 32, 16, 16}, {64, 32, 4, 4}, {5, 64, 8, 8}, Fp8Format::E4M3, {2, 1}}};
  for (const Case& c : cases) check(c, false);
}

TEST_CASE("fp8 conv tiling: the backward-data's phases give the reference backward-data") {
  // 128-column tiles; 64-column tiles over two row tiles; 96 dy channels (a stage's chunks across
  // a tap boundary at varying channels), odd sizes, two 128-column tiles.
  const Conv2dParams d{2, 1};
  const std::vector<Case> cases = {
      {"128 <- 64", {2, 64, 6, 6}, {64, 128, 4, 4}, {2, 128, 12, 12}, Fp8Format::E5M2, d},
      {"64 <- 32, 192 rows a phase", {3, 32, 8, 8}, {32, 64, 4, 4}, {3, 64, 16, 16}, Fp8Format::E5M2, d},
      {"256 <- 96, 5 x 3", {2, 96, 5, 3}, {96, 256, 4, 4}, {2, 256, 10, 6}, Fp8Format::E4M3, d}};
  for (const Case& c : cases) check(c, true);
}

TEST_CASE("fp8 conv tiling: shapes the kernels do not take") {
  tiling::Geometry g{};
  const Conv2dParams d{2, 1};
  CHECK(tiling::forward_geometry({2, 64, 32, 32}, {128, 64, 4, 4}, {2, 128, 16, 16}, d, &g));
  CHECK(g.k_bytes() == 1024);
  CHECK(tiling::tile_columns(g) == 128);
  CHECK_FALSE(tiling::forward_geometry({2, 48, 32, 32}, {128, 48, 4, 4}, {2, 128, 16, 16}, d, &g));  // 48 channels
  CHECK_FALSE(tiling::forward_geometry({2, 64, 32, 32}, {96, 64, 4, 4}, {2, 96, 16, 16}, d, &g));    // 96 outputs
  CHECK_FALSE(tiling::forward_geometry({2, 64, 32, 32}, {128, 64, 4, 4}, {2, 128, 15, 16}, d, &g));  // wrong y
  CHECK_FALSE(tiling::forward_geometry({2, 8, 64, 64}, {64, 8, 4, 4}, {2, 64, 32, 32}, d, &g));      // 8 channels
  // More rows than a grid's 65535 tiles of 128.
  CHECK_FALSE(tiling::forward_geometry({8400000, 32, 1, 1}, {64, 32, 1, 1}, {8400000, 64, 1, 1}, {1, 0}, &g));
  CHECK(tiling::backward_data_geometry({2, 256, 8, 8}, {256, 128, 4, 4}, {2, 128, 16, 16}, d, &g));
  CHECK(g.phases == 4);
  CHECK(g.k_bytes() == 4 * 256);
  CHECK_FALSE(tiling::backward_data_geometry({2, 256, 8, 8}, {256, 128, 4, 4}, {2, 128, 16, 16}, {1, 1}, &g));
  CHECK_FALSE(tiling::backward_data_geometry({2, 64, 8, 8}, {64, 64, 3, 3}, {2, 64, 16, 16}, d, &g));
  CHECK_FALSE(tiling::backward_data_geometry({2, 16, 8, 8}, {16, 64, 4, 4}, {2, 64, 16, 16}, d, &g));  // 16 dy channels
  CHECK_FALSE(tiling::backward_data_geometry({2, 64, 8, 8}, {64, 32, 4, 4}, {2, 32, 16, 16}, d, &g));  // 32 dx channels
}
