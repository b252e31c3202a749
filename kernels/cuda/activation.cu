// ReLU, LeakyReLU and Tanh on the GPU: forward, and backward from the output.
// Element-wise over the physical buffer (x, y, dy, dx share shape, dtype and layout), computed
// in float and rounded once on store. Reading before writing each element makes in-place use
// (y == x, dx == dy) safe. NaN propagates (a NaN input gives a NaN output, as in PyTorch), so an
// overflow upstream still reaches the loss scaler's finite check.
#include "ganengine/backend.h"
#include "cuda_util.cuh"

namespace ge {
namespace gpu {
namespace {

template <ops::Activation A>
__device__ __forceinline__ float activate(float x, float slope) {
  if (A == ops::Activation::ReLU) return x <= 0.f ? 0.f : x;  // NaN falls through to x
  if (A == ops::Activation::LeakyReLU) return x > 0.f ? x : x * slope;
  return tanhf(x);
}

// d(activation)/dx written in terms of the output y, which is all an in-place layer keeps.
template <ops::Activation A>
__device__ __forceinline__ float activate_grad(float y, float dy, float slope) {
  if (A == ops::Activation::ReLU) return y > 0.f ? dy : 0.f;
  if (A == ops::Activation::LeakyReLU) return y > 0.f ? dy : dy * slope;
  return dy * (1.f - y * y);
}

template <ops::Activation A, class T>
__global__ void activation_forward_kernel(const T* x, T* y, int64_t n, float slope) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    store_float(y + i, activate<A>(load_float(x + i), slope));
}

template <ops::Activation A, class T>
__global__ void activation_backward_kernel(const T* y, const T* dy, T* dx, int64_t n, float slope) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    store_float(dx + i, activate_grad<A>(load_float(y + i), load_float(dy + i), slope));
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
    const T* xp = x.data_as<T>();
    T* yp = y.data_as<T>();
    switch (a) {
      case ops::Activation::ReLU:
        activation_forward_kernel<ops::Activation::ReLU, T>
            <<<grid_for(n), kThreads, 0, stream>>>(xp, yp, n, negative_slope);
        break;
      case ops::Activation::LeakyReLU:
        activation_forward_kernel<ops::Activation::LeakyReLU, T>
            <<<grid_for(n), kThreads, 0, stream>>>(xp, yp, n, negative_slope);
        break;
      case ops::Activation::Tanh:
        activation_forward_kernel<ops::Activation::Tanh, T>
            <<<grid_for(n), kThreads, 0, stream>>>(xp, yp, n, negative_slope);
        break;
    }
    CUDA_CHECK_LAUNCH();
  });
}

void activation_backward(ops::Activation a, const Tensor& y, const Tensor& dy, Tensor& dx,
                         float negative_slope) {
  check_gpu_float(y, "activation y");
  check_same_layout(y, dy, "activation_backward");
  check_same_layout(y, dx, "activation_backward");
  const int64_t n = y.numel();
  if (n == 0) return;
  cudaStream_t stream = stream_of(y);
  GE_DISPATCH_FLOAT(y.dtype(), T, {
    const T* yp = y.data_as<T>();
    const T* dyp = dy.data_as<T>();
    T* dxp = dx.data_as<T>();
    switch (a) {
      case ops::Activation::ReLU:
        activation_backward_kernel<ops::Activation::ReLU, T>
            <<<grid_for(n), kThreads, 0, stream>>>(yp, dyp, dxp, n, negative_slope);
        break;
      case ops::Activation::LeakyReLU:
        activation_backward_kernel<ops::Activation::LeakyReLU, T>
            <<<grid_for(n), kThreads, 0, stream>>>(yp, dyp, dxp, n, negative_slope);
        break;
      case ops::Activation::Tanh:
        activation_backward_kernel<ops::Activation::Tanh, T>
            <<<grid_for(n), kThreads, 0, stream>>>(yp, dyp, dxp, n, negative_slope);
        break;
    }
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace gpu
}  // namespace ge
