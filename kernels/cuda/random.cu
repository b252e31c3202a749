// GPU Philox draws: one thread per Philox block (four elements), the same functions as the
// CPU reference in kernels/cpu/random.cpp, so both backends produce bitwise the same values.
#include "core/backend.h"
#include "core/philox.h"
#include "cuda/cuda_util.cuh"

namespace ge {
namespace gpu {
namespace {

// Where logical element i lives: NHWC tensors keep the draw tied to the logical index, so the
// values do not depend on the layout.
struct Layout {
  bool nhwc;
  int64_t C, H, W;

  __device__ __forceinline__ int64_t physical(int64_t i) const {
    if (!nhwc) return i;
    const int64_t w = i % W;
    const int64_t h = (i / W) % H;
    const int64_t c = (i / (W * H)) % C;
    const int64_t n = i / (W * H * C);
    return ((n * H + h) * W + w) * C + c;
  }
};

Layout layout_of(const Tensor& t) {
  if (t.rank() != 4 || t.format() == MemoryFormat::NCHW) return {false, 1, 1, 1};
  return {true, t.dim(1), t.dim(2), t.dim(3)};
}

enum class Distribution { Uniform, Normal };

template <class T, Distribution D>
__global__ void fill_kernel(T* out, int64_t n, Layout layout, uint64_t seed, uint64_t offset, float mean,
                            float stddev) {
  const int64_t blocks = (n + 3) / 4;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < blocks;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const philox::Block b = philox::block_at(seed, offset + static_cast<uint64_t>(k));
    float v[4];
    if (D == Distribution::Uniform) {
      for (int j = 0; j < 4; ++j) v[j] = philox::uniform_from_word(b.w[j]);
    } else {
      philox::normals_from_block(b, v);
      for (int j = 0; j < 4; ++j) v[j] = philox::affine(v[j], mean, stddev);
    }
    const int64_t first = 4 * k;
    for (int j = 0; j < 4 && first + j < n; ++j) store_float(out + layout.physical(first + j), v[j]);
  }
}

template <Distribution D>
void launch_fill(Tensor& t, uint64_t seed, uint64_t offset, float mean, float stddev) {
  check_gpu_float(t, D == Distribution::Uniform ? "fill_uniform: t" : "fill_normal: t");
  const int64_t n = t.numel();
  if (n == 0) return;
  const unsigned grid = grid_for(ceil_div(n, 4));
  GE_DISPATCH_FLOAT(t.dtype(), scalar_t,
                    fill_kernel<scalar_t, D><<<grid, kThreads, 0, stream_of(t)>>>(
                        t.data_as<scalar_t>(), n, layout_of(t), seed, offset, mean, stddev));
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void fill_uniform(Tensor& t, uint64_t seed, uint64_t offset) {
  launch_fill<Distribution::Uniform>(t, seed, offset, 0.f, 1.f);
}

void fill_normal(Tensor& t, uint64_t seed, uint64_t offset, float mean, float stddev) {
  launch_fill<Distribution::Normal>(t, seed, offset, mean, stddev);
}

}  // namespace gpu
}  // namespace ge
