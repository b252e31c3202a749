// Development probe (GPU): the phase-by-phase warpgroup-MMA backward-data of the 128 -> 64
// channel layer (conv_phase_dgrad.h) beside cuDNN's best for it (the engine search's
// configuration or legacy algorithm), both timed as graphs of 10 runs; the largest difference
// between their outputs relative to the largest output, and per output phase and 8-channel group
// of image 0 where they differ (to tell a wrong layout from rounding).
//
//   build/ganengine_wgmma_probe [batch ...]   (default: 1024 64)
#include <cmath>
#include <cstdio>

#include "conv_phase_dgrad.h"
#include "ganengine/cuda_context.h"
#include "probe_util.h"

using namespace ge;
using namespace ge::gpu;
using namespace ge::probe_util;

namespace {

void probe(int64_t N, CudaContext& ctx) {
  const int64_t K = 128, C = 64, P = 16, H = 32;
  const Conv2dParams p{/*stride=*/2, /*pad=*/1};
  Tensor w = random_half({K, C, 4, 4}, 2);
  Tensor dy = random_half({N, K, P, P}, 3);
  Tensor x = Tensor::empty({N, C, H, H}, DType::F16, Device::cuda(0), MemoryFormat::NHWC);
  Tensor dx_cudnn = Tensor::empty(x.shape(), DType::F16, Device::cuda(0), MemoryFormat::NHWC);
  Tensor dx_mine = Tensor::empty(x.shape(), DType::F16, Device::cuda(0), MemoryFormat::NHWC);
  const CudnnBackwardData cudnn(x, w, dy, dx_cudnn, p, ctx);
  const double cudnn_us = cudnn.time_us();
  const double mine_us = time_us(ctx, [&] { return conv2d_backward_data_phases(dy, w, dx_mine, p); });
  CUDA_CHECK(cudaMemset(dx_mine.data(), 0xff, dx_mine.nbytes()));  // every value must be written again
  const bool ran = conv2d_backward_data_phases(dy, w, dx_mine, p);
  CUDNN_CHECK(cudnn.run());
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
  const double flops = 2.0 * N * P * P * K * C * 16;
  std::printf(
      "N=%-4lld cuDNN %7.1f us (%3.0f TFLOP/s, %s)  phases on wgmma %s %7.1f us (%3.0f TFLOP/s, %.2fx) diff %.2e\n",
      (long long)N, cudnn_us, flops / cudnn_us * 1e-6, cudnn.name().c_str(), ran ? "ran" : "DID NOT RUN", mine_us,
      flops / mine_us * 1e-6, cudnn_us / mine_us, relative_diff(dx_cudnn, dx_mine));
  // Image 0 (NHWC, logical NCHW order from to_floats): max |difference| per phase and channel group.
  const std::vector<float> a = dx_cudnn.to_floats(), b = dx_mine.to_floats();
  for (int ph = 0; ph < 4; ++ph) {
    std::printf("  phase (%d,%d):", ph / 2, ph % 2);
    for (int g = 0; g < 8; ++g) {
      double m = 0;
      for (int c = 8 * g; c < 8 * g + 8; ++c)
        for (int oy = ph / 2; oy < H; oy += 2)
          for (int ox = ph % 2; ox < H; ox += 2) {
            const size_t i = (static_cast<size_t>(c) * H + oy) * H + ox;
            m = std::max(m, std::fabs(double(a[i]) - b[i]));
          }
      std::printf(" %.1e", m);
    }
    std::printf("\n");
  }
  std::printf("  image 0 channel 0 row 0 first 6: cuDNN");
  for (int ox = 0; ox < 6; ++ox) std::printf(" %.3f", a[ox]);
  std::printf(" | mine");
  for (int ox = 0; ox < 6; ++ox) std::printf(" %.3f", b[ox]);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  const ProbeArgs args = probe_args(argc, argv);
  CudaContext& ctx = context(0);
  for (int64_t N : args.batches) probe(N, ctx);
  return 0;
}
