// copy_padded on the GPU: one thread per destination element (or per 16-byte run of 8 channels
// of a 16-bit NHWC destination, or per pixel of a 16-bit NHWC trim from 8 channels), bits moved
// as they are (so any dtype of one size is one
// kernel). The reference is kernels/cpu/pad.cpp.
#include "core/backend.h"
#include "cuda/cuda_util.cuh"
#include "cuda/kernel_launch.cuh"
#include "cuda/vector_pack.cuh"

namespace ge {
namespace gpu {
namespace {

template <class Index>
struct PadGeometry {
  Index dN, dC, sN, sC, HW;
  bool nhwc;
};

// Index is 32-bit whenever the tensors allow: 64-bit division is far slower (docs/performance.md).
template <class Bits, class Index>
__global__ void copy_padded_kernel(const Bits* __restrict__ src, Bits* __restrict__ dst, PadGeometry<Index> g) {
  await_previous_kernel();
  const Index total = g.dN * g.dC * g.HW;
  for (Index i = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<Index>(gridDim.x) * blockDim.x) {
    // i is dst's physical index: (n, c, hw) from it in dst's layout, then src's index of the same.
    Index n, c, hw;
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

// NHWC 16-bit destinations whose channel count is a multiple of 8 (the images and first-layer
// weights padded from 3 to 8 channels): a thread writes one 16-byte run of 8 channels of one
// pixel: with one 2-byte element a thread the step's copies, the image batch's above all, take
// far longer (docs/performance.md).
template <class Index>
__global__ void copy_padded_nhwc_runs_kernel(const uint16_t* __restrict__ src, Pack<uint16_t, 8>* __restrict__ dst,
                                             PadGeometry<Index> g) {
  await_previous_kernel();
  const Index runs_per_pixel = g.dC / 8;
  const Index total = g.dN * g.HW * runs_per_pixel;
  for (Index j = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; j < total;
       j += static_cast<Index>(gridDim.x) * blockDim.x) {
    const Index pixel = j / runs_per_pixel, c0 = (j - pixel * runs_per_pixel) * 8;
    const Index n = pixel / g.HW;
    const uint16_t* from = src + pixel * g.sC;  // valid only while n < sN
    Pack<uint16_t, 8> out;
#pragma unroll
    for (int e = 0; e < 8; ++e) out.v[e] = n < g.sN && c0 + e < g.sC ? from[c0 + e] : uint16_t{0};
    dst[j] = out;
  }
}

// NHWC 16-bit trims from 8 channels to fewer (G's padded output and D's padded input gradient
// down to the image's 1 or 3 channels): a thread reads one pixel's 16 bytes at once and writes
// its first dC channels, faster than the one-element kernel (docs/performance.md).
template <class Index>
__global__ void copy_trimmed_nhwc_pixels_kernel(const Pack<uint16_t, 8>* __restrict__ src, uint16_t* __restrict__ dst,
                                                PadGeometry<Index> g) {
  await_previous_kernel();
  const Index total = g.dN * g.HW;  // pixels: dN <= sN when trimming channels only
  for (Index p = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; p < total;
       p += static_cast<Index>(gridDim.x) * blockDim.x) {
    const Pack<uint16_t, 8> in = src[p];
    for (Index c = 0; c < g.dC; ++c) dst[p * g.dC + c] = in.v[c];
  }
}

template <class Bits, class Index>
void launch(const Tensor& src, Tensor& dst, cudaStream_t stream) {
  const PadGeometry<Index> g{static_cast<Index>(dst.dim(0)),
                             static_cast<Index>(dst.dim(1)),
                             static_cast<Index>(src.dim(0)),
                             static_cast<Index>(src.dim(1)),
                             static_cast<Index>(dst.dim(2) * dst.dim(3)),
                             dst.format() == MemoryFormat::NHWC};
  if (sizeof(Bits) == 2 && g.nhwc && g.sC == 8 && g.dC < 8 && g.dN <= g.sN && aligned16(src.data())) {
    launch_kernel(copy_trimmed_nhwc_pixels_kernel<Index>, grid_for(dst.numel() / g.dC), kThreads, 0, stream,
                  static_cast<const Pack<uint16_t, 8>*>(src.data()), static_cast<uint16_t*>(dst.data()), g);
  } else if (sizeof(Bits) == 2 && g.nhwc && g.dC % 8 == 0 && aligned16(dst.data())) {
    launch_kernel(copy_padded_nhwc_runs_kernel<Index>, grid_for(dst.numel() / 8), kThreads, 0, stream,
                  static_cast<const uint16_t*>(src.data()), static_cast<Pack<uint16_t, 8>*>(dst.data()), g);
  } else {
    launch_kernel(copy_padded_kernel<Bits, Index>, grid_for(dst.numel()), kThreads, 0, stream,
                  static_cast<const Bits*>(src.data()), static_cast<Bits*>(dst.data()), g);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void copy_padded(const Tensor& src, Tensor& dst) {
  check_gpu_float(src, "copy_padded source");
  check_gpu_float(dst, "copy_padded destination");
  if (dst.numel() == 0) return;
  cudaStream_t stream = stream_of(dst);
  const bool narrow = dst.numel() < (int64_t{1} << 31) && src.numel() < (int64_t{1} << 31);
  if (dtype_size(dst.dtype()) == 2)
    narrow ? launch<uint16_t, uint32_t>(src, dst, stream) : launch<uint16_t, uint64_t>(src, dst, stream);
  else
    narrow ? launch<uint32_t, uint32_t>(src, dst, stream) : launch<uint32_t, uint64_t>(src, dst, stream);
}

}  // namespace gpu
}  // namespace ge
