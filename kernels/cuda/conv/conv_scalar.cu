// See conv_scalar.h. With K = C * R * S values per image and the filter laid out like one image:
//   forward          y[n]  = sum_k x[n, k] w[k]         one block per image
//   backward-data    dx[n, k] = dy[n] w[k]              element-wise
//   backward-filter  dw[k] = sum_n dy[n] x[n, k]        images cut into slices, each slice's
//                    sums to the cuDNN workspace, then the slices added in order
// Threads move 8 values (16 bytes) at a time, which needs K % 8 == 0 and 16-byte alignment.
#include <initializer_list>

#include "cuda/conv/conv_scalar.h"
#include "cuda/cuda_util.cuh"
#include "cuda/image_dot.cuh"
#include "cuda/kernel_launch.cuh"
#include "cuda/vector_pack.cuh"

namespace ge {
namespace gpu {
namespace {

constexpr int kPack = 8;
// Forward: a block per image, each thread a few packs loaded at once. One warp walking an
// image (8192 values in D) would wait on 32 loads one after another, at any batch.
constexpr int kForwardThreads = 256;
constexpr int kSlices = 32;  // backward-filter: images are summed in this many slices, then the slices

template <class T>
__global__ void __launch_bounds__(kForwardThreads)
    scalar_forward_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, int K) {
  await_previous_kernel();
  const int n = blockIdx.x;
  const auto* xn = reinterpret_cast<const Pack<T, kPack>*>(x + static_cast<size_t>(n) * K);
  const auto* wp = reinterpret_cast<const Pack<T, kPack>*>(w);
  float acc = 0.f;
#pragma unroll 4
  for (int i = threadIdx.x; i < K / kPack; i += kForwardThreads) acc = dot_pack(xn[i], wp[i], acc);
  acc = block_sum<kForwardThreads>(acc);
  if (threadIdx.x == 0) store_float(&y[n], acc);
}

template <class T>
__global__ void scalar_backward_data_kernel(const T* __restrict__ dy, const T* __restrict__ w, T* __restrict__ dx,
                                            int N, int K) {
  await_previous_kernel();
  const int packs_per_image = K / kPack;
  const int64_t total = static_cast<int64_t>(N) * packs_per_image;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int n = static_cast<int>(i / packs_per_image), k = static_cast<int>(i % packs_per_image);
    const float g = load_float(&dy[n]);
    const Pack<T, kPack> wv = reinterpret_cast<const Pack<T, kPack>*>(w)[k];
    Pack<T, kPack> out;
#pragma unroll
    for (int e = 0; e < kPack; ++e) store_float(&out.v[e], g * load_float(&wv.v[e]));
    reinterpret_cast<Pack<T, kPack>*>(dx)[i] = out;
  }
}

// partial[slice][k] = sum over the slice's images n of dy[n] x[n, k]. Grid (K / 8 / 128, slices).
template <class T>
__global__ void scalar_backward_filter_kernel(const T* __restrict__ x, const T* __restrict__ dy,
                                              float* __restrict__ partial, int N, int K, int slices) {
  await_previous_kernel();
  const int pack = blockIdx.x * blockDim.x + threadIdx.x, slice = blockIdx.y;
  if (pack >= K / kPack) return;
  const int per_slice = (N + slices - 1) / slices;
  const int n0 = slice * per_slice, n1 = min(N, n0 + per_slice);
  float acc[kPack] = {};
  for (int n = n0; n < n1; ++n) {
    const float g = load_float(&dy[n]);
    const Pack<T, kPack> xv = reinterpret_cast<const Pack<T, kPack>*>(x + static_cast<size_t>(n) * K)[pack];
#pragma unroll
    for (int e = 0; e < kPack; ++e) acc[e] += g * load_float(&xv.v[e]);
  }
#pragma unroll
  for (int e = 0; e < kPack; ++e) partial[static_cast<size_t>(slice) * K + pack * kPack + e] = acc[e];
}

template <class T>
__global__ void scalar_sum_slices_kernel(const float* __restrict__ partial, int slices, int K, T* __restrict__ dw,
                                         float beta) {
  await_previous_kernel();
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= K) return;
  float total = 0.f;
  for (int s = 0; s < slices; ++s) total += partial[static_cast<size_t>(s) * K + k];
  if (beta != 0.f) total += beta * load_float(&dw[k]);
  store_float(&dw[k], total);
}

// x (N, C, R, S), w (1, C, R, S), y (N, 1, 1, 1): K = C * R * S values per image, or 0 when
// the passes here do not apply.
int64_t scalar_conv_size(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p) {
  const DType dt = x.dtype();
  if ((dt != DType::F16 && dt != DType::BF16) || w.dtype() != dt || y.dtype() != dt) return 0;
  if (x.rank() != 4 || w.rank() != 4 || y.rank() != 4 || x.format() != w.format()) return 0;
  if (w.dim(0) != 1 || w.dim(1) != x.dim(1) || w.dim(2) != x.dim(2) || w.dim(3) != x.dim(3) || p.pad != 0) return 0;
  if (y.dim(0) != x.dim(0) || y.dim(1) != 1 || y.dim(2) != 1 || y.dim(3) != 1) return 0;
  const int64_t K = w.numel();
  if (K % kPack != 0 || K > (int64_t{1} << 30) || x.dim(0) == 0 || x.dim(0) >= (int64_t{1} << 31)) return 0;
  for (const Tensor* t : {&x, &w})
    if (!aligned16(t->data())) return 0;
  return K;
}

}  // namespace

bool conv_scalar_applies(ConvPass pass, const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p) {
  return scalar_conv_size(x, w, y, p) != 0 && (pass != ConvPass::BackwardData || aligned16(x.data()));
}

bool conv2d_forward_scalar(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p) {
  const int64_t K = scalar_conv_size(x, w, y, p);
  if (K == 0) return false;
  const int N = static_cast<int>(x.dim(0));
  GE_DISPATCH_HALF(x.dtype(), T, {
    launch_kernel(scalar_forward_kernel<T>, static_cast<unsigned>(N), kForwardThreads, 0, stream_of(x), x.data_as<T>(),
                  w.data_as<T>(), y.data_as<T>(), static_cast<int>(K));
  });
  CUDA_CHECK_LAUNCH();
  return true;
}

bool conv2d_backward_data_scalar(const Tensor& dy, const Tensor& w, Tensor& dx, const Conv2dParams& p) {
  const int64_t K = scalar_conv_size(dx, w, dy, p);
  if (K == 0 || !aligned16(dx.data())) return false;
  const int N = static_cast<int>(dx.dim(0));
  GE_DISPATCH_HALF(dx.dtype(), T, {
    launch_kernel(scalar_backward_data_kernel<T>, grid_for(N * K / kPack), kThreads, 0, stream_of(dx), dy.data_as<T>(),
                  w.data_as<T>(), dx.data_as<T>(), N, static_cast<int>(K));
  });
  CUDA_CHECK_LAUNCH();
  return true;
}

bool conv2d_backward_filter_scalar(const Tensor& x, const Tensor& dy, Tensor& dw, const Conv2dParams& p, float beta) {
  const int64_t K = scalar_conv_size(x, dw, dy, p);
  if (K == 0) return false;
  const int N = static_cast<int>(x.dim(0)), slices = std::min(kSlices, N);
  CudaContext& ctx = context(x.device().index);
  float* partial = static_cast<float*>(workspace(ctx, static_cast<size_t>(slices) * K * sizeof(float)));
  GE_DISPATCH_HALF(x.dtype(), T, {
    constexpr int threads = 128;
    const dim3 grid(static_cast<unsigned>(ceil_div(K / kPack, threads)), static_cast<unsigned>(slices));
    launch_kernel(scalar_backward_filter_kernel<T>, grid, threads, 0, ctx.stream(), x.data_as<T>(), dy.data_as<T>(),
                  partial, N, static_cast<int>(K), slices);
    CUDA_CHECK_LAUNCH();
    launch_kernel(scalar_sum_slices_kernel<T>, static_cast<unsigned>(ceil_div(K, kThreads)), kThreads, 0, ctx.stream(),
                  partial, slices, static_cast<int>(K), dw.data_as<T>(), beta);
  });
  CUDA_CHECK_LAUNCH();
  return true;
}

}  // namespace gpu
}  // namespace ge
