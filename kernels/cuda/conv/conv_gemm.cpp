// See conv_gemm.h. In cuBLAS's column-major terms, with L = C*R*S: an image's input (or input
// gradient) is a column of L values, as is output channel k's weight row, and dy is (K x N).
#include "cuda/conv/conv_gemm.h"

#include "runtime/cuda_context.h"

namespace ge {
namespace gpu {
namespace {

// Scratch the GEMMs may use: always this size, so cuBLAS's choice of algorithm is the same on
// both lanes and every run (results bitwise reproducible).
constexpr size_t kGemmWorkspace = size_t{4} << 20;

cudaDataType_t cuda_type(DType t) { return t == DType::F16 ? CUDA_R_16F : CUDA_R_16BF; }

// w (K, C, R, S) and t (N, C, R, S) of one half dtype and layout, with a 1x1 output, pad 0.
bool covers_input(const Tensor& t, const Tensor& w, const Tensor& one_pixel, const Conv2dParams& p) {
  const DType dt = w.dtype();
  if ((dt != DType::F16 && dt != DType::BF16) || t.dtype() != dt || one_pixel.dtype() != dt) return false;
  if (t.format() != w.format() || p.pad != 0 || one_pixel.dim(2) != 1 || one_pixel.dim(3) != 1) return false;
  if (t.dim(1) != w.dim(1) || t.dim(2) != w.dim(2) || t.dim(3) != w.dim(3)) return false;
  const int64_t limit = int64_t{1} << 31;
  return w.dim(1) * w.dim(2) * w.dim(3) < limit && w.dim(0) < limit && t.dim(0) < limit;
}

}  // namespace

bool conv_gemm_applies(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p) {
  return covers_input(x, w, y, p);
}

bool conv2d_backward_data_gemm(const Tensor& dy, const Tensor& w, Tensor& dx, const Conv2dParams& p) {
  if (!covers_input(dx, w, dy, p)) return false;
  const int L = static_cast<int>(w.dim(1) * w.dim(2) * w.dim(3)), K = static_cast<int>(w.dim(0));
  const int N = static_cast<int>(dx.dim(0));
  CudaContext& ctx = context(dx.device().index);
  const float alpha = 1.f, beta = 0.f;
  const cudaDataType_t type = cuda_type(w.dtype());
  // dx (L x N) = w (L x K) * dy (K x N).
  CUBLAS_CHECK(cublasGemmEx(lane_cublas(ctx, kGemmWorkspace), CUBLAS_OP_N, CUBLAS_OP_N, L, N, K, &alpha, w.data(), type,
                            L, dy.data(), type, K, &beta, dx.data(), type, L, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return true;
}

bool conv2d_backward_filter_gemm(const Tensor& x, const Tensor& dy, Tensor& dw, const Conv2dParams& p, float beta) {
  if (!covers_input(x, dw, dy, p)) return false;
  const int L = static_cast<int>(dw.dim(1) * dw.dim(2) * dw.dim(3)), K = static_cast<int>(dw.dim(0));
  const int N = static_cast<int>(x.dim(0));
  CudaContext& ctx = context(x.device().index);
  const float alpha = 1.f;
  const cudaDataType_t type = cuda_type(dw.dtype());
  // dw (L x K) = beta * dw + x (L x N) * dy^T (N x K).
  CUBLAS_CHECK(cublasGemmEx(lane_cublas(ctx, kGemmWorkspace), CUBLAS_OP_N, CUBLAS_OP_T, L, K, N, &alpha, x.data(), type,
                            L, dy.data(), type, K, &beta, dw.data(), type, L, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return true;
}

}  // namespace gpu
}  // namespace ge
