// What a CPU-only build answers for the GPU measurements of gpu_measure.h (their CUDA
// implementations live in kernels/cuda). `ganengine bench` refuses to
// start without a GPU, so these only keep the program linkable.
#ifndef GE_WITH_CUDA
#include "ganengine/error.h"
#include "ganengine/gpu_measure.h"

namespace ge {

namespace {
[[noreturn]] void no_cuda(const char* what) {
  fail(what, " needs a CUDA GPU, but this ganengine was built without CUDA");
}
}  // namespace

std::vector<double> time_on_stream_ms(Device, int, const std::function<void(int)>&) { no_cuda("GPU timing"); }
double measure_half_gemm_tflops(Device, DType) { no_cuda("the GEMM peak"); }
DeviceMemory device_memory(Device) { no_cuda("device memory info"); }
DeviceFacts device_facts(Device) { no_cuda("device facts"); }

}  // namespace ge
#endif
