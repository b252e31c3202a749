// The half-precision GEMM rate this GPU reaches right now: the yardstick `ganengine bench`
// divides achieved TFLOP/s by. Measured in the same run as the training step, so clocks,
// power limits and the library versions are the same for both numbers.
#include <algorithm>
#include <vector>

#include "ganengine/ops.h"
#include "ganengine/tensor.h"
#include "runtime/cuda_context.h"
#include "runtime/gpu_measure.h"

namespace ge {

double measure_half_gemm_tflops(Device d, DType half) {
  GE_CHECK(d.is_cuda(), "measure_half_gemm_tflops on ", d.str());
  GE_CHECK(half == DType::F16 || half == DType::BF16, "measure_half_gemm_tflops: ", dtype_name(half),
           " is not a half type");
  // 8192^3: large enough that every SM is busy for ~1 ms and launch overhead vanishes, small
  // enough (3 x 128 MiB) to fit beside anything.
  constexpr int64_t n = 8192;
  const cudaDataType_t type = half == DType::F16 ? CUDA_R_16F : CUDA_R_16BF;
  Tensor a = Tensor::empty({n, n}, half, d), b = Tensor::empty({n, n}, half, d), c = Tensor::empty({n, n}, half, d);
  // Random inputs: Tensor Cores draw less power multiplying zeros, which would flatter the peak.
  // N(0, 1) keeps every sum (std ~ sqrt(8192) ~ 90) far inside fp16's range.
  ops::fill_normal(a, /*seed=*/0x9e3779b9, /*offset=*/0);
  ops::fill_normal(b, /*seed=*/0x9e3779b9, /*offset=*/ops::philox_counters_for(a.numel()));
  c.fill_zero();
  gpu::CudaContext& ctx = gpu::context(d.index);
  const int m = static_cast<int>(n);
  const float alpha = 1.f, beta = 0.f;  // CUBLAS_COMPUTE_32F takes f32 scalars
  return square_gemm_tflops(d, n, [&](int) {
    CUBLAS_CHECK(cublasGemmEx(ctx.cublas, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &alpha, a.data(), type, m, b.data(), type,
                              m, &beta, c.data(), type, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  });
}

double square_gemm_tflops(Device d, int64_t n, const std::function<void(int)>& gemm) {
  constexpr int kWarmup = 25, kTimed = 10;  // ~35 ms of warm-up: clocks ramp from idle
  // Warm-up: loads the kernel, lets the library pick it and allocate its workspace, raises clocks.
  for (int i = 0; i < kWarmup; ++i) gemm(i);
  CUDA_CHECK(cudaStreamSynchronize(gpu::context(d.index).main_stream()));
  std::vector<double> ms = time_on_stream_ms(d, kTimed, gemm);
  std::sort(ms.begin(), ms.end());
  const double median = (ms[kTimed / 2 - 1] + ms[kTimed / 2]) / 2;
  GE_CHECK(median > 0, "GEMM timing gave ", median, " ms");
  const double flops = 2.0 * n * n * n;
  return flops / (median * 1e-3) / 1e12;
}

}  // namespace ge
