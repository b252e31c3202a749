// GPU casts among f32, f16 and bf16, optionally converting NCHW <-> NHWC. Values are widened
// to float (exact) and rounded once on store with the round-to-nearest-even intrinsics, the
// same result as the CPU reference for every non-NaN input.
#include "core/backend.h"
#include "cuda/aligned.h"
#include "cuda/cuda_util.cuh"
#include "cuda/kernel_launch.cuh"

namespace ge {
namespace gpu {
namespace {

// Four consecutive elements, aligned so that one vector instruction moves them.
template <class T>
struct alignas(4 * sizeof(T)) Pack4 {
  T v[4];
};

// Same layout: element i to element i. Pack-aligned buffers move four elements per access.
template <class S, class D>
__global__ void cast_linear_vec4(const S* __restrict__ src, D* __restrict__ dst, int64_t packs) {
  await_previous_kernel();
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < packs;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const Pack4<S> in = reinterpret_cast<const Pack4<S>*>(src)[p];
    Pack4<D> out;
#pragma unroll
    for (int j = 0; j < 4; ++j) store_float(&out.v[j], load_float(&in.v[j]));
    reinterpret_cast<Pack4<D>*>(dst)[p] = out;
  }
}

template <class S, class D>
__global__ void cast_linear(const S* __restrict__ src, D* __restrict__ dst, int64_t n) {
  await_previous_kernel();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    store_float(dst + i, load_float(src + i));
}

// Layout change as a batch of matrix transposes: src holds `batch` row-major (rows x cols)
// matrices, dst the (cols x rows) transposes. NCHW -> NHWC is rows = C, cols = H*W; the
// reverse is rows = H*W, cols = C. A shared-memory tile keeps reads and writes coalesced.
constexpr int kTile = 32;
constexpr int kTileRowsPerPass = 8;

template <class S, class D>
__global__ void cast_transpose(const S* __restrict__ src, D* __restrict__ dst, int64_t batch, int64_t rows,
                               int64_t cols) {
  await_previous_kernel();
  __shared__ float tile[kTile][kTile + 1];  // +1: columns fall in different banks
  const int64_t col_tiles_start = static_cast<int64_t>(blockIdx.x) * kTile;
  const int64_t row_tiles = (rows + kTile - 1) / kTile;
  // Loops, not a grid dimension per axis, because grid y and z stop at 65535.
  for (int64_t b = blockIdx.z; b < batch; b += gridDim.z) {
    const S* s = src + b * rows * cols;
    D* d = dst + b * rows * cols;
    for (int64_t rt = blockIdx.y; rt < row_tiles; rt += gridDim.y) {
      const int64_t r0 = rt * kTile;
      const int64_t c0 = col_tiles_start;
      for (int j = threadIdx.y; j < kTile; j += kTileRowsPerPass) {
        const int64_t r = r0 + j, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[j][threadIdx.x] = load_float(s + r * cols + c);
      }
      __syncthreads();
      for (int j = threadIdx.y; j < kTile; j += kTileRowsPerPass) {
        const int64_t c = c0 + j, r = r0 + threadIdx.x;
        if (r < rows && c < cols) store_float(d + c * rows + r, tile[threadIdx.x][j]);
      }
      __syncthreads();
    }
  }
}

template <class S, class D>
void launch_linear(const Tensor& src, Tensor& dst, cudaStream_t stream) {
  const int64_t n = src.numel();
  const S* s = src.data_as<S>();
  D* d = dst.data_as<D>();
  // Pack4 of any of our types is at most 16 bytes, so 16-byte alignment of both suffices.
  if (n % 4 == 0 && aligned16(s) && aligned16(d)) {
    launch_kernel(cast_linear_vec4<S, D>, grid_for(n / 4), kThreads, 0, stream, s, d, n / 4);
  } else {
    launch_kernel(cast_linear<S, D>, grid_for(n), kThreads, 0, stream, s, d, n);
  }
  CUDA_CHECK_LAUNCH();
}

template <class S, class D>
void launch_transpose(const Tensor& src, Tensor& dst, cudaStream_t stream) {
  const int64_t N = src.dim(0), C = src.dim(1), HW = src.dim(2) * src.dim(3);
  const bool to_nhwc = src.format() == MemoryFormat::NCHW;
  const int64_t rows = to_nhwc ? C : HW;
  const int64_t cols = to_nhwc ? HW : C;
  const dim3 block(kTile, kTileRowsPerPass);
  const dim3 grid(static_cast<unsigned>(ceil_div(cols, kTile)),
                  static_cast<unsigned>(std::min<int64_t>(ceil_div(rows, kTile), 65535)),
                  static_cast<unsigned>(std::min<int64_t>(N, 65535)));
  launch_kernel(cast_transpose<S, D>, grid, block, 0, stream, src.data_as<S>(), dst.data_as<D>(), N, rows, cols);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void cast(const Tensor& src, Tensor& dst) {
  check_gpu_float(src, "cast: src");
  check_gpu_float(dst, "cast: dst");
  GE_CHECK(src.shape() == dst.shape(), "cast: src ", src.str(), " and dst ", dst.str(), " differ in shape");
  GE_CHECK(src.device() == dst.device(), "cast: src ", src.str(), " and dst ", dst.str(), " on different devices");
  if (src.numel() == 0) return;
  // One channel, or one pixel an image (G's noise, (N, 100, 1, 1)), lies in the same order in
  // either layout: it is copied element by element, not transposed a block per image (the noise's
  // cast is the first kernel of G's forward).
  const bool same_order = src.rank() == 4 && (src.dim(1) == 1 || src.dim(2) * src.dim(3) == 1);
  const bool linear = src.rank() != 4 || src.format() == dst.format() || same_order;
  GE_CHECK(!src.same_storage(dst) || (linear && dtype_size(src.dtype()) == dtype_size(dst.dtype())), "cast: src ",
           src.str(), " and dst ", dst.str(), " share storage");
  cudaStream_t stream = stream_of(src);
  if (linear && src.dtype() == dst.dtype()) {
    if (!src.same_storage(dst))
      CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  GE_DISPATCH_FLOAT(src.dtype(), S, GE_DISPATCH_FLOAT(dst.dtype(), D, {
                      if (linear)
                        launch_linear<S, D>(src, dst, stream);
                      else
                        launch_transpose<S, D>(src, dst, stream);
                    }));
}

}  // namespace gpu
}  // namespace ge
