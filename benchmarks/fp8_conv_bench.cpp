// ganengine_fp8_conv_bench [BATCH ...]: the FP8 warpgroup-MMA convolutions
// (kernels/cuda/conv/fp8_conv_wgmma.h) against the passes O3 and O4 run today, on the DCGAN's
// Tensor Core layer shapes (D's 64->128, 128->256 and 256->512 stride-2 layers at 64x64 images;
// G's transposed layers are the same passes with forward and backward-data swapped), f16 NHWC
// in and out (the FP8 filter gradient f32). For each shape and pass, device time per call (median of 7 windows of 20
// calls):
//   half       the half convolution the engine chooses (O3's pass);
//   O4 now     fp8_round_trip of both operands, then that half convolution (O4's pass);
//   FP8        fp8_quantize of both operands to u8, then the FP8 kernel;
//   FP8 conv   the FP8 kernel alone, with its TFLOP/s;
// and FP8 / half and FP8 / O4 now as speed ratios (above 1: faster). Not part of the training
// step; docs/performance.md ("FP8 convolutions") says what the numbers decide.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "core/backend.h"
#include "cuda/conv/conv_fp8_wgrad.h"
#include "cuda/conv/fp8_conv_wgmma.h"
#include "ganengine/error.h"
#include "ganengine/fp8.h"
#include "ganengine/ops.h"
#include "ganengine/tensor.h"
#include "runtime/gpu_measure.h"

namespace {

using ge::Device;
using ge::DType;
using ge::Fp8Format;
using ge::MemoryFormat;
using ge::Shape;
using ge::Tensor;

const Device kGpu = Device::cuda(0);
constexpr int kWindows = 7, kCallsPerWindow = 20;

double median_ms(const std::function<void()>& call) {
  for (int i = 0; i < kCallsPerWindow; ++i) call();  // warm-up: plans, attributes, clocks
  std::vector<double> ms = ge::time_on_stream_ms(kGpu, kWindows, [&](int) {
    for (int i = 0; i < kCallsPerWindow; ++i) call();
  });
  std::sort(ms.begin(), ms.end());
  return ms[kWindows / 2] / kCallsPerWindow;
}

Tensor normal_half(const Shape& s, double stddev, uint64_t seed) {
  Tensor t = Tensor::empty(s, DType::F16, kGpu, MemoryFormat::NHWC);
  ge::ops::fill_normal(t, seed, 0, 0.f, static_cast<float>(stddev));
  return t;
}

// An operand in its three forms: half values, their round trip, and FP8 codes with their scaling.
struct Operand {
  Tensor values, round_trip;
  ge::Fp8Scaling state;
  ge::Fp8Tensor codes;
  Operand(const Shape& s, Fp8Format f, double stddev, uint64_t seed)
      : values(normal_half(s, stddev, seed)),
        round_trip(Tensor::empty(s, DType::F16, kGpu, MemoryFormat::NHWC)),
        state(ge::make_fp8_scaling(f, ge::Fp8DelayedScaling{}, kGpu)) {
    codes = {Tensor::empty(s, DType::U8, kGpu, MemoryFormat::NHWC), state.scale_inv, f};
    Tensor amax = state.current_amax();
    ge::ops::fp8_quantize(values, state.scale, f, codes.data, amax);
    ge::ops::fp8_update_scales({state}, ge::Fp8DelayedScaling{});
  }
  void quantize() {
    Tensor amax = state.current_amax();
    ge::ops::fp8_quantize(values, state.scale, codes.format, codes.data, amax);
  }
  void round() {
    const Tensor amax = state.current_amax();
    ge::ops::fp8_round_trip(values, state.scale, state.scale_inv, codes.format, round_trip, &amax);
  }
};

struct Layer {
  const char* name;
  int64_t c, k, h;  // in channels, out channels, input side
};

void run_batch(int64_t batch) {
  const ge::Conv2dParams p{/*stride=*/2, /*pad=*/1};
  std::printf("\nbatch %lld\n\n", static_cast<long long>(batch));
  std::printf(
      "| layer | pass | half ms | O4 now ms | FP8 ms | FP8 conv ms | FP8 conv TFLOP/s | FP8 / half | FP8 / O4 now |\n");
  std::printf("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const Layer& l :
       {Layer{"D 64->128", 64, 128, 32}, Layer{"D 128->256", 128, 256, 16}, Layer{"D 256->512", 256, 512, 8}}) {
    const Shape xs{batch, l.c, l.h, l.h}, ws{l.k, l.c, 4, 4}, ys{batch, l.k, l.h / 2, l.h / 2};
    const int64_t out_side = l.h / 2, macs = batch * out_side * out_side * l.k * l.c * 16;
    const double flops = 2.0 * static_cast<double>(macs);
    Operand x(xs, Fp8Format::E4M3, 1.0, 1), w(ws, Fp8Format::E4M3, 0.02, 2), dy(ys, Fp8Format::E5M2, 1e-3, 3);
    Tensor y = Tensor::empty(ys, DType::F16, kGpu, MemoryFormat::NHWC);
    Tensor dx = Tensor::empty(xs, DType::F16, kGpu, MemoryFormat::NHWC);
    // One pass's row: its half pass on values (`half`, run on the operands' values or their round
    // trips), the FP8 kernel on codes (`fp8_conv`, false: not taken), and the two operands.
    auto report = [&](const char* pass, const std::function<void(const Tensor&, const Tensor&)>& half,
                      const std::function<bool()>& fp8_conv, Operand& a, Operand& b) {
      if (!fp8_conv()) {
        std::printf("| %s | %s | not taken by the FP8 kernel |\n", l.name, pass);
        return;
      }
      const double t_half = median_ms([&] { half(a.values, b.values); });
      const double t_now = median_ms([&] {
        a.round();
        b.round();
        half(a.round_trip, b.round_trip);
      });
      const double t_conv = median_ms([&] { fp8_conv(); });
      const double t_fp8 = median_ms([&] {
        a.quantize();
        b.quantize();
        fp8_conv();
      });
      std::printf("| %s | %s | %.4f | %.4f | %.4f | %.4f | %.0f | %.2fx | %.2fx |\n", l.name, pass, t_half, t_now,
                  t_fp8, t_conv, flops / (t_conv * 1e-3) / 1e12, t_half / t_fp8, t_now / t_fp8);
    };
    auto row = [&](const char* pass, bool forward, Operand& a, Tensor& out) {
      report(
          pass,
          [&](const Tensor& av, const Tensor& wv) {
            forward ? ge::ops::conv2d_forward(av, wv, out, p) : ge::ops::conv2d_backward_data(av, wv, out, p);
          },
          [&] {
            return forward ? ge::gpu::fp8_conv2d_forward_wgmma(a.codes, w.codes, out, p)
                           : ge::gpu::fp8_conv2d_backward_data_wgmma(a.codes, w.codes, out, p);
          },
          a, w);
    };
    row("forward", true, x, y);
    row("backward-data", false, dy, dx);
    // The filter gradient into f16 on the half path (O3's weight gradients), f32 from the kernel.
    Tensor dw_half = Tensor::empty(ws, DType::F16, kGpu, MemoryFormat::NHWC);
    Tensor dw = Tensor::empty(ws, DType::F32, kGpu, MemoryFormat::NHWC);
    report(
        "backward-filter",
        [&](const Tensor& xv, const Tensor& dyv) { ge::ops::conv2d_backward_filter(xv, dyv, dw_half, p); },
        [&] { return ge::gpu::fp8_conv2d_backward_filter_wgmma(x.codes, dy.codes, dw, p, 0.f); }, x, dy);
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<int64_t> batches;
    for (int i = 1; i < argc; ++i) {
      char* end = nullptr;
      const long long b = std::strtoll(argv[i], &end, 10);
      if (!end || *end || b < 1) {
        std::fprintf(stderr, "ganengine_fp8_conv_bench: batch '%s' is not a positive integer\n", argv[i]);
        return 2;
      }
      batches.push_back(b);
    }
    if (batches.empty()) batches = {256, 1024};
    GE_CHECK(ge::cuda_available(), "ganengine_fp8_conv_bench needs a CUDA device");
    const ge::DeviceFacts facts = ge::device_facts(kGpu);
    std::printf("%s, compute capability %s, cuDNN %s\n", facts.name.c_str(), facts.compute_capability.c_str(),
                facts.cudnn.c_str());
    for (int64_t b : batches) run_batch(b);
    return 0;
  } catch (const ge::Error& e) {
    std::fprintf(stderr, "ganengine_fp8_conv_bench: %s\n", e.what());
    return 1;
  }
}
