// ops::ema_update on the GPU: one multi-tensor launch (multi_tensor.cuh) over every averaged
// tensor, each element
//   average = __fadd_rn(__fmul_rn(decay, average), __fmul_rn(1 - decay, value))
// rounded step by step (no contraction into a fused multiply-add), bitwise what the CPU
// reference kernels/cpu/ema.cpp computes. The decay travels as kernel parameters and the table
// of tensors by value, so the launch is capturable in a CUDA graph as it stands. Assumes each
// average (f32) and its value (f32, f16 or bf16) store their elements in the same order.
#include <vector>

#include "core/backend.h"
#include "cuda/cuda_util.cuh"
#include "cuda/kernel_launch.cuh"
#include "cuda/multi_tensor.cuh"

namespace ge {
namespace gpu {
namespace {

constexpr int kEmaTensors = 48;
using EmaTable = TensorTable<2, kEmaTensors>;  // buffer 0: the f32 average, 1: the value (any dtype)

__global__ void ema_kernel(EmaTable table, float keep, float take) {
  await_previous_kernel();
  int tensor;
  int64_t begin, end;
  locate_chunk(table, blockIdx.x, tensor, begin, end);
  float* average = static_cast<float*>(table.ptr[0][tensor]);
  const void* value = table.ptr[1][tensor];
  const ElemType value_type = table.type[1][tensor];
  const int64_t stride = blockDim.x;
  for (int64_t first = begin + threadIdx.x; first < end; first += kElemsInFlight * stride) {
    float a[kElemsInFlight], v[kElemsInFlight];
#pragma unroll
    for (int j = 0; j < kElemsInFlight; ++j) {
      const int64_t i = first + j * stride;
      if (i >= end) break;
      a[j] = average[i];
      v[j] = bits_to_float(value_type, load_bits_dyn(value, value_type, i));
    }
#pragma unroll
    for (int j = 0; j < kElemsInFlight; ++j) {
      const int64_t i = first + j * stride;
      if (i >= end) break;
      average[i] = __fadd_rn(__fmul_rn(keep, a[j]), __fmul_rn(take, v[j]));
    }
  }
}

}  // namespace

void ema_update(const std::vector<Tensor>& averages, const std::vector<Tensor>& values, double decay) {
  GE_CHECK(averages.size() == values.size(), "ema_update: ", averages.size(), " averages for ", values.size(),
           " values");
  std::vector<std::vector<const Tensor*>> buffers(2);
  for (size_t i = 0; i < averages.size(); ++i) {
    check_gpu_float(averages[i], "ema_update average");
    check_gpu_float(values[i], "ema_update value");
    GE_CHECK(averages[i].dtype() == DType::F32 && same_element_order(averages[i], values[i]),
             "ema_update: the average ", averages[i].str(), " must be f32 and store its elements in the order of ",
             values[i].str());
    buffers[0].push_back(&averages[i]);
    buffers[1].push_back(&values[i]);
  }
  if (averages.empty()) return;
  cudaStream_t stream = stream_of(averages[0]);
  const auto keep = static_cast<float>(decay);
  const auto take = static_cast<float>(1.0 - decay);
  for_each_table<2, kEmaTensors>(buffers, [&](const EmaTable& table, int blocks) {
    launch_kernel(ema_kernel, blocks, kThreads, 0, stream, table, keep, take);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace gpu
}  // namespace ge
