// How the FP8 convolutions into f16 that hold their weights as register fragments launch
// (conv_phase_fprop.cu, conv_resident_fprop.cu, conv_resident_dgrad.cu): on w's E4M3 codes laid out
// as each thread's MMA fragments (16 bytes each; laid out ahead, or now: weight_fragments.h), the
// persistent convolution runs `blocks_per_image` blocks on each image, as many images at once as
// the SMs hold, each group of blocks taking every group-count-th image after its first.
#pragma once
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "cuda/conv/weight_fragments.h"
#include "cuda/cuda_util.cuh"
#include "cuda/kernel_launch.cuh"
#include "ganengine/fp8.h"
#include "ganengine/tensor.h"

namespace ge {
namespace gpu {

// The convolution: (the activation's codes, fragments, out, images, its scale_inv, w's).
using Fp8IntoF16Kernel = void (*)(const uint8_t*, const uint4*, __half*, int, const float*, const float*);

struct Fp8IntoF16Launch {
  FragmentLayout layout;          // of the fragments the convolution reads
  Fp8IntoF16Kernel e4m3, e5m2;    // the convolution, by the activation's format
  int blocks_per_image, threads;  // the convolution's blocks an image and threads a block
  size_t shared;                  // its dynamic shared memory
};

// Runs `launch` on `a` and `w` into `out` (checked by the caller: fp8_operands_into_f16 and the
// kernel's shapes; a's first dimension the images, at least one).
inline void launch_fp8_into_f16(const Fp8IntoF16Launch& launch, const Fp8Tensor& a, const Fp8Tensor& w, Tensor& out) {
  cudaStream_t stream = stream_of(out);
  const Tensor frag = weight_fragments_for(launch.layout, w, out.device());
  const Fp8IntoF16Kernel kernel = a.format == Fp8Format::E5M2 ? launch.e5m2 : launch.e4m3;
  const int device = out.device().index;
  set_function_attribute_once(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(launch.shared),
                              device);
  const int images = static_cast<int>(a.data.dim(0)), groups = sm_count(device) / launch.blocks_per_image;
  const int blocks = launch.blocks_per_image * std::max(1, std::min(images, groups));
  launch_kernel(kernel, static_cast<unsigned>(blocks), launch.threads, launch.shared, stream,
                static_cast<const uint8_t*>(a.data.data()), static_cast<const uint4*>(frag.data()),
                out.data_as<__half>(), images, a.scale_inv.data_as<float>(), w.scale_inv.data_as<float>());
  CUDA_CHECK_LAUNCH();
}

}  // namespace gpu
}  // namespace ge
