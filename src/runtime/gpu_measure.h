// Measuring on the GPU for `ganengine bench`: device-side timing of work issued to a device's
// stream, the half-precision GEMM rate the hardware reaches in the same run (the yardstick
// achieved TFLOP/s are compared with), memory in use, and what the numbers were measured on.
// CUDA builds only: in a CPU-only build each of these throws ge::Error.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ganengine/dtype.h"

namespace ge {

// Calls body(w) for w = 0..windows-1 and returns each call's milliseconds as the device saw
// them: CUDA events are recorded on the context stream (ge::gpu::context(k).main_stream()) before the
// first call and after each, back to back, so asynchronous work is timed when it runs, not when
// it is issued. Waits for the device at the end only (the host may run ahead meanwhile).
std::vector<double> time_on_stream_ms(Device d, int windows, const std::function<void(int)>& body);

// TFLOP/s of cublasGemmEx on 8192^3 with half (f16 or bf16) inputs and output and fp32
// accumulation (CUBLAS_COMPUTE_32F): random inputs, warm-up, median of 10 timed GEMMs.
// Its buffers come from the caching allocator and are returned to it.
double measure_half_gemm_tflops(Device d, DType half);
// TFLOP/s of `gemm`, which issues one n x n x n GEMM on d's context stream a call: 25 calls of
// warm-up, then the median of 10 timed (the measurement both peaks share).
double square_gemm_tflops(Device d, int64_t n, const std::function<void(int)>& gemm);
// TFLOP/s of cublasLtMatmul on 8192^3 with E4M3 inputs, an f16 output and fp32 accumulation
// (both operands K-major, as FP8 GEMMs take them): O4's yardstick, measured as the half one is.
double measure_fp8_gemm_tflops(Device d);

// cudaMemGetInfo: the whole device as the driver sees it (every process, our CUDA context,
// cuDNN/cuBLAS workspaces and the caching allocator's reserve included).
struct DeviceMemory {
  size_t free_bytes = 0, total_bytes = 0;
  size_t used_bytes() const { return total_bytes - free_bytes; }
};
DeviceMemory device_memory(Device d);

// What a benchmark ran on, as strings for logs: the GPU's name, "580.65.06", "13.0", ...
struct DeviceFacts {
  std::string name;
  std::string compute_capability;  // "9.0"
  int sm_count = 0;
  std::string driver;        // the kernel module's version ("unknown" when unreadable)
  std::string driver_cuda;   // the newest CUDA the driver supports
  std::string cuda_runtime;  // the runtime this binary uses
  std::string cudnn;         // loaded library
  std::string cublas;        // loaded library
};
DeviceFacts device_facts(Device d);

}  // namespace ge
