// ReLU, LeakyReLU and Tanh on the GPU: forward, and backward from the output.
// Element-wise over the physical buffer (x, y, dy, dx share shape, dtype and layout), computed
// in float and rounded once on store, 16 bytes per access where aligned. Reading before writing
// each element makes in-place use (y == x, dx == dy) safe. NaN propagates (a NaN input gives a
// NaN output, as in PyTorch), so an overflow upstream still reaches the loss scaler's check.
#include "core/backend.h"
#include "cuda/activation_math.cuh"
#include "cuda/cuda_util.cuh"
#include "cuda/kernel_launch.cuh"
#include "cuda/vector_pack.cuh"

namespace ge {
namespace gpu {
namespace {

template <class T, int V>
__global__ void activation_forward_kernel(ops::Activation a, const T* x, T* y, int64_t packs, float slope) {
  await_previous_kernel();
  for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < packs; p += (int64_t)gridDim.x * blockDim.x) {
    const Pack<T, V> in = reinterpret_cast<const Pack<T, V>*>(x)[p];
    Pack<T, V> out;
#pragma unroll
    for (int j = 0; j < V; ++j) store_float(&out.v[j], activate(a, load_float(&in.v[j]), slope));
    reinterpret_cast<Pack<T, V>*>(y)[p] = out;
  }
}

template <class T, int V>
__global__ void activation_backward_kernel(ops::Activation a, const T* y, const T* dy, T* dx, int64_t packs,
                                           float slope) {
  await_previous_kernel();
  for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < packs; p += (int64_t)gridDim.x * blockDim.x) {
    const Pack<T, V> yv = reinterpret_cast<const Pack<T, V>*>(y)[p];
    const Pack<T, V> gv = reinterpret_cast<const Pack<T, V>*>(dy)[p];
    reinterpret_cast<Pack<T, V>*>(dx)[p] = activate_grad_pack(a, yv, gv, slope);
  }
}

void check_same_layout(const Tensor& a, const Tensor& b, const char* what) {
  GE_CHECK(a.shape() == b.shape() && a.dtype() == b.dtype() && a.format() == b.format(), what,
           ": tensors must share shape, dtype and format: ", a.str(), " vs ", b.str());
}

}  // namespace

void activation_forward(ops::Activation a, const Tensor& x, Tensor& y, float negative_slope) {
  check_gpu_float(x, "activation x");
  check_same_layout(x, y, "activation_forward");
  const int64_t n = x.numel();
  if (n == 0) return;
  cudaStream_t stream = stream_of(x);
  GE_DISPATCH_FLOAT(x.dtype(), T, {
    constexpr int W = kWidePack<T>;
    if (pack_width<T>(n, 0, {x.data(), y.data()}) == W)
      launch_kernel(activation_forward_kernel<T, W>, grid_for(n / W), kThreads, 0, stream, a, x.data_as<T>(),
                    y.data_as<T>(), n / W, negative_slope);
    else
      launch_kernel(activation_forward_kernel<T, 1>, grid_for(n), kThreads, 0, stream, a, x.data_as<T>(),
                    y.data_as<T>(), n, negative_slope);
    CUDA_CHECK_LAUNCH();
  });
}

void activation_backward(ops::Activation a, const Tensor& y, const Tensor& dy, Tensor& dx, float negative_slope) {
  check_gpu_float(y, "activation y");
  check_same_layout(y, dy, "activation_backward");
  check_same_layout(y, dx, "activation_backward");
  const int64_t n = y.numel();
  if (n == 0) return;
  cudaStream_t stream = stream_of(y);
  GE_DISPATCH_FLOAT(y.dtype(), T, {
    constexpr int W = kWidePack<T>;
    if (pack_width<T>(n, 0, {y.data(), dy.data(), dx.data()}) == W)
      launch_kernel(activation_backward_kernel<T, W>, grid_for(n / W), kThreads, 0, stream, a, y.data_as<T>(),
                    dy.data_as<T>(), dx.data_as<T>(), n / W, negative_slope);
    else
      launch_kernel(activation_backward_kernel<T, 1>, grid_for(n), kThreads, 0, stream, a, y.data_as<T>(),
                    dy.data_as<T>(), dx.data_as<T>(), n, negative_slope);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace gpu
}  // namespace ge
