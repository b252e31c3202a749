// copy_padded on the GPU: one thread per destination element, bits moved as they are (so any
// dtype of one size is one kernel). The reference is kernels/cpu/pad.cpp.
#include "cuda_util.cuh"
#include "ganengine/backend.h"

namespace ge {
namespace gpu {
namespace {

struct PadGeometry {
  int64_t dN, dC, sN, sC, HW;
  bool nhwc;
};

template <class Bits>
__global__ void copy_padded_kernel(const Bits* __restrict__ src, Bits* __restrict__ dst, PadGeometry g) {
  const int64_t total = g.dN * g.dC * g.HW;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    // i is dst's physical index: (n, c, hw) from it in dst's layout, then src's index of the same.
    int64_t n, c, hw;
    if (g.nhwc) {
      c = i % g.dC;
      hw = i / g.dC % g.HW;
      n = i / (g.dC * g.HW);
    } else {
      hw = i % g.HW;
      c = i / g.HW % g.dC;
      n = i / (g.HW * g.dC);
    }
    Bits v = 0;
    if (n < g.sN && c < g.sC) v = src[g.nhwc ? (n * g.HW + hw) * g.sC + c : (n * g.sC + c) * g.HW + hw];
    dst[i] = v;
  }
}

}  // namespace

void copy_padded(const Tensor& src, Tensor& dst) {
  check_gpu_float(src, "copy_padded source");
  check_gpu_float(dst, "copy_padded destination");
  const PadGeometry g{dst.dim(0), dst.dim(1), src.dim(0), src.dim(1), dst.dim(2) * dst.dim(3),
                      dst.format() == MemoryFormat::NHWC};
  const int64_t total = dst.numel();
  if (total == 0) return;
  cudaStream_t stream = stream_of(dst);
  if (dtype_size(dst.dtype()) == 2)
    copy_padded_kernel<uint16_t><<<grid_for(total), kThreads, 0, stream>>>(
        static_cast<const uint16_t*>(src.data()), static_cast<uint16_t*>(dst.data()), g);
  else
    copy_padded_kernel<uint32_t><<<grid_for(total), kThreads, 0, stream>>>(
        static_cast<const uint32_t*>(src.data()), static_cast<uint32_t*>(dst.data()), g);
  CUDA_CHECK_LAUNCH();
}

}  // namespace gpu
}  // namespace ge
