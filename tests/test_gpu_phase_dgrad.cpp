// The 128 -> 64-channel stride-2 backward-data on Hopper's warpgroup MMA
// (kernels/cuda/conv_phase_dgrad.h): against the CPU reference, run to run, and reached through
// the ops that the layers call (D's second layer's backward-data, G's fourth layer's forward).
#if GE_WITH_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "conv_phase_dgrad.h"
#include "test_util.h"
#include "trainer_compare.h"

namespace {

using ge::Device;
using ge::DType;
using ge::MemoryFormat;
using ge::Tensor;

const Device kGpu = Device::cuda(0);

Tensor random_half(const ge::Shape& s) {
  return ge::test::random_tensor(s, DType::F16, Device::cpu(), MemoryFormat::NHWC, -1.0, 1.0);
}

Tensor poisoned_like(const Tensor& like) {
  Tensor t = Tensor::empty(like.shape(), like.dtype(), kGpu, like.format());
  ge::test::poison(t);
  return t;
}

bool compute_capability_90() {
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
  return major == 9 && minor == 0;
}

// 4 images make two blocks each (two phases a block); 160, more than an H200's 132 SMs, one item
// of four phases each, several items a block.
TEST_CASE("gpu ops: the 128 to 64-channel stride-2 backward-data on warpgroup MMA matches the CPU") {
  GE_REQUIRE_GPU();
  if (!compute_capability_90()) {
    MESSAGE("GPU test skipped: the warpgroup-MMA kernel runs on compute capability 9.0 only");
    return;
  }
  const ge::Conv2dParams p{/*stride=*/2, /*pad=*/1};
  for (int64_t n : {4, 160}) {
    CAPTURE(n);
    const Tensor w = random_half({128, 64, 4, 4});
    const Tensor dy = random_half({n, 128, 16, 16});
    Tensor dx = Tensor::zeros({n, 64, 32, 32}, DType::F16, Device::cpu(), MemoryFormat::NHWC);
    ge::ops::conv2d_backward_data(dy, w, dx, p);
    const Tensor dyg = dy.to(kGpu), wg = w.to(kGpu);

    Tensor mine = poisoned_like(dx);
    REQUIRE(ge::gpu::conv2d_backward_data_phases(dyg, wg, mine, p));
    const std::vector<double> got = mine.to(Device::cpu()).to_doubles(), want = dx.to_doubles();
    double worst = 0, scale = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      worst = std::max(worst, std::fabs(got[i] - want[i]));  // a NaN left unwritten fails too
      if (std::isnan(got[i])) worst = INFINITY;
      scale = std::max(scale, std::fabs(want[i]));
    }
    // Sums of 512 products of values in [-1, 1): half rounding of the result, and the order.
    CHECK(worst <= 2e-3 * scale);

    Tensor again = poisoned_like(dx);
    REQUIRE(ge::gpu::conv2d_backward_data_phases(dyg, wg, again, p));
    CHECK(ge::test::same_tensor(again, mine));
    Tensor via_conv = poisoned_like(dx), via_transpose = poisoned_like(dx);
    ge::ops::conv2d_backward_data(dyg, wg, via_conv, p);
    ge::ops::conv_transpose2d_forward(dyg, wg, via_transpose, p);  // x = dy, w as (in, out, 4, 4)
    CHECK(ge::test::same_tensor(via_conv, mine));
    CHECK(ge::test::same_tensor(via_transpose, mine));
  }
  // What it does not take goes elsewhere: another channel count, NCHW, f32.
  const Tensor w96 = random_half({96, 64, 4, 4}).to(kGpu), dy96 = random_half({2, 96, 16, 16}).to(kGpu);
  Tensor out = Tensor::empty({2, 64, 32, 32}, DType::F16, kGpu, MemoryFormat::NHWC);
  CHECK_FALSE(ge::gpu::conv2d_backward_data_phases(dy96, w96, out, p));
  const Tensor w_nchw = random_half({128, 64, 4, 4}).to_format(MemoryFormat::NCHW).to(kGpu);
  const Tensor dy_nchw = random_half({2, 128, 16, 16}).to_format(MemoryFormat::NCHW).to(kGpu);
  Tensor out_nchw = Tensor::empty({2, 64, 32, 32}, DType::F16, kGpu, MemoryFormat::NCHW);
  CHECK_FALSE(ge::gpu::conv2d_backward_data_phases(dy_nchw, w_nchw, out_nchw, p));
  const Tensor w32 = ge::test::random_tensor({128, 64, 4, 4}, DType::F32, kGpu, MemoryFormat::NHWC, -1.0, 1.0);
  const Tensor dy32 = ge::test::random_tensor({2, 128, 16, 16}, DType::F32, kGpu, MemoryFormat::NHWC, -1.0, 1.0);
  Tensor out32 = Tensor::empty({2, 64, 32, 32}, DType::F32, kGpu, MemoryFormat::NHWC);
  CHECK_FALSE(ge::gpu::conv2d_backward_data_phases(dy32, w32, out32, p));
}

// Each GPU of a data-parallel run launches the kernel in its own context: the shared-memory
// attribute and the block count are per device, so the second GPU must give the first's bits.
TEST_CASE("gpu ops: the warpgroup-MMA backward-data on a second GPU gives the first GPU's bits") {
  GE_REQUIRE_GPUS(2);
  if (!compute_capability_90()) {
    MESSAGE("GPU test skipped: the warpgroup-MMA kernel runs on compute capability 9.0 only");
    return;
  }
  const ge::Conv2dParams p{/*stride=*/2, /*pad=*/1};
  const Tensor w = random_half({128, 64, 4, 4}), dy = random_half({160, 128, 16, 16});
  auto run_on = [&](Device gpu) {
    Tensor dx = Tensor::empty({160, 64, 32, 32}, DType::F16, gpu, MemoryFormat::NHWC);
    ge::test::poison(dx);
    REQUIRE(ge::gpu::conv2d_backward_data_phases(dy.to(gpu), w.to(gpu), dx, p));
    return dx.to(Device::cpu());
  };
  const Tensor first = run_on(kGpu), second = run_on(Device::cuda(1));
  CHECK(ge::test::same_tensor(second, first));
}

}  // namespace
#endif  // GE_WITH_CUDA
