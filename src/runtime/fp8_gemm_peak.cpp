// The FP8 GEMM rate this GPU reaches right now, through cuBLASLt: the yardstick `ganengine bench`
// holds O4's achieved TFLOP/s against, measured in the same run as the training step (the same
// clocks, power limits and library versions), as the half-precision peak is for O0-O3.
#include <cublasLt.h>

#include "ganengine/ops.h"
#include "ganengine/tensor.h"
#include "runtime/cuda_context.h"
#include "runtime/gpu_measure.h"

namespace ge {

namespace {

void lt_check(cublasStatus_t status, const char* what) {
  GE_CHECK(status == CUBLAS_STATUS_SUCCESS, "cuBLASLt ", what, " failed: ", cublasGetStatusString(status),
           " (FP8 GEMMs need compute capability 8.9 or 9.0 and cuBLAS 12 or later)");
}

// The handle, descriptors and layouts of one GEMM, destroyed with it.
struct Fp8Gemm {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  ~Fp8Gemm() {
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    for (cublasLtMatrixLayout_t l : {a, b, c})
      if (l) cublasLtMatrixLayoutDestroy(l);
    if (op) cublasLtMatmulDescDestroy(op);
    if (handle) cublasLtDestroy(handle);
  }
};

}  // namespace

double measure_fp8_gemm_tflops(Device d) {
  GE_CHECK(d.is_cuda(), "measure_fp8_gemm_tflops on ", d.str());
  constexpr int64_t n = 8192;  // as the half peak: every SM busy, 2 x 64 MiB of operands
  constexpr size_t kWorkspace = size_t{32} << 20;
  // Random E4M3 operands (Tensor Cores draw less power on zeros): N(0, 1) values quantized with
  // scale 1; every sum (std ~ sqrt(8192)) stays far inside the f16 output's range.
  Tensor values = Tensor::empty({n, n}, DType::F16, d);
  Tensor a = Tensor::empty({n, n}, DType::U8, d), b = Tensor::empty({n, n}, DType::U8, d);
  Tensor c = Tensor::empty({n, n}, DType::F16, d), workspace = Tensor::empty({int64_t{kWorkspace}}, DType::U8, d);
  const Tensor one = Tensor::from_floats({1.f}, {1}, DType::F32, d);
  Tensor amax = Tensor::empty({1}, DType::F32, d);
  ops::fill_normal(values, /*seed=*/0x9e3779b9, /*offset=*/0);
  ops::fp8_quantize(values, one, Fp8Format::E4M3, a, amax);
  ops::fill_normal(values, /*seed=*/0x9e3779b9, /*offset=*/ops::philox_counters_for(values.numel()));
  ops::fp8_quantize(values, one, Fp8Format::E4M3, b, amax);
  values = Tensor();

  Fp8Gemm g;
  lt_check(cublasLtCreate(&g.handle), "handle creation");
  lt_check(cublasLtMatmulDescCreate(&g.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul descriptor");
  // FP8 GEMMs take both operands K-major: A transposed, B not ("TN").
  const cublasOperation_t transposed = CUBLAS_OP_T, plain = CUBLAS_OP_N;
  lt_check(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_TRANSA, &transposed, sizeof transposed), "TRANSA");
  lt_check(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_TRANSB, &plain, sizeof plain), "TRANSB");
  const auto m = static_cast<uint64_t>(n);
  lt_check(cublasLtMatrixLayoutCreate(&g.a, CUDA_R_8F_E4M3, m, m, static_cast<int64_t>(m)), "layout of A");
  lt_check(cublasLtMatrixLayoutCreate(&g.b, CUDA_R_8F_E4M3, m, m, static_cast<int64_t>(m)), "layout of B");
  lt_check(cublasLtMatrixLayoutCreate(&g.c, CUDA_R_16F, m, m, static_cast<int64_t>(m)), "layout of C");
  lt_check(cublasLtMatmulPreferenceCreate(&g.preference), "preference");
  const size_t workspace_bytes = kWorkspace;
  lt_check(cublasLtMatmulPreferenceSetAttribute(g.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &workspace_bytes, sizeof workspace_bytes),
           "workspace preference");
  cublasLtMatmulHeuristicResult_t choice{};
  int found = 0;
  lt_check(cublasLtMatmulAlgoGetHeuristic(g.handle, g.op, g.a, g.b, g.c, g.c, g.preference, 1, &choice, &found),
           "algorithm heuristic");
  GE_CHECK(found > 0,
           "cuBLASLt offers no E4M3 x E4M3 -> f16 GEMM on this GPU (it needs compute capability 8.9 or 9.0)");
  const float alpha = 1.f, beta = 0.f;
  cudaStream_t stream = gpu::context(d.index).main_stream();
  return square_gemm_tflops(d, n, [&](int) {
    lt_check(cublasLtMatmul(g.handle, g.op, &alpha, a.data(), g.a, b.data(), g.b, &beta, c.data(), g.c, c.data(), g.c,
                            &choice.algo, workspace.data(), workspace_bytes, stream),
             "FP8 matmul");
  });
}

}  // namespace ge
