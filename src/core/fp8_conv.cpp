// FP8 convolutions (ops.h). The emulation: each FP8 operand dequantized to f32
// (ops::fp8_dequantize), then the ordinary convolution pass on those values in f32 without TF32,
// whose inputs are then exact FP8 values times a scale_inv. What an FP8 Tensor Core convolution
// must agree with, up to the order and precision of its sums and where it applies the descale;
// on a compute capability 9.0 GPU the passes run on one where its kernel takes the shapes
// (cuda/conv/fp8_conv_wgmma.h, conv_fp8_wgrad.h; a build without CUDA answers no).
#include <string>
#include <vector>

#include "cuda/conv/conv_fp8_wgrad.h"
#include "cuda/conv/conv_phase_dgrad.h"
#include "cuda/conv/conv_phase_fprop.h"
#include "cuda/conv/fp8_conv_wgmma.h"
#include "cuda/conv/weight_fragments.h"
#include "ganengine/fp8.h"
#include "ganengine/ops.h"

namespace ge {
namespace ops {
namespace {

// The weights' format; the other operand's depends on the layer (an activation E4M3, a gradient
// E5M2), both of which the Tensor Cores take.
void require_e4m3_weights(const char* op, const Fp8Tensor& w) {
  GE_CHECK(w.format == Fp8Format::E4M3, op, ": w must be E4M3, is E5M2");
}

void require_result_dtype(const char* op, const Tensor& out, bool half_too) {
  GE_CHECK(out.dtype() == DType::F32 || (half_too && out.dtype() == DType::F16), op, ": the result must be f32",
           half_too ? " or f16" : "", ", got ", out.str());
}

Conv2dParams without_tf32(const Conv2dParams& p) {
  Conv2dParams exact = p;
  exact.allow_tf32 = false;
  return exact;
}

// Runs `pass` into out, through an f32 copy where out is f16.
template <class Pass>
void into_result(Tensor& out, const Pass& pass) {
  if (out.dtype() == DType::F32) return pass(out);
  Tensor f32 = Tensor::empty(out.shape(), DType::F32, out.device(), out.format());
  pass(f32);
  cast(f32, out);
}

}  // namespace

void fp8_conv2d_forward(const Fp8Tensor& x, const Fp8Tensor& w, Tensor& y, const Conv2dParams& p) {
  require_e4m3_weights("fp8_conv2d_forward", w);
  require_result_dtype("fp8_conv2d_forward", y, true);
  if (gpu::fp8_conv2d_forward_wgmma(x, w, y, p)) return;
  into_result(y, [&](Tensor& out) { conv2d_forward(fp8_dequantized(x), fp8_dequantized(w), out, without_tf32(p)); });
}

void fp8_conv2d_backward_data(const Fp8Tensor& dy, const Fp8Tensor& w, Tensor& dx, const Conv2dParams& p) {
  require_e4m3_weights("fp8_conv2d_backward_data", w);
  require_result_dtype("fp8_conv2d_backward_data", dx, true);
  if (gpu::fp8_conv2d_backward_data_wgmma(dy, w, dx, p)) return;
  into_result(
      dx, [&](Tensor& out) { conv2d_backward_data(fp8_dequantized(dy), fp8_dequantized(w), out, without_tf32(p)); });
}

bool fp8_conv2d_backward_data_moments(const Fp8Tensor& dy, const Fp8Tensor& w, Tensor& dx, const Conv2dParams& p,
                                      Tensor& moments) {
  require_e4m3_weights("fp8_conv2d_backward_data_moments", w);
  require_result_dtype("fp8_conv2d_backward_data_moments", dx, true);
  return gpu::fp8_conv2d_backward_data_phases(dy, w, dx, p, &moments);
}

bool fp8_conv2d_backward_data_beats_half(const Shape& dy, const Shape& w, const Shape& dx, const Conv2dParams& p,
                                         Device device) {
  return gpu::fp8_conv2d_backward_data_phases_takes(dy, w, dx, p, device) ||
         gpu::fp8_conv2d_backward_data_resident_takes(dy, w, dx, p, device);
}

bool fp8_conv2d_forward_beats_half(const Shape& x, const Shape& w, const Shape& y, const Conv2dParams& p,
                                   Device device) {
  return gpu::fp8_conv2d_forward_phases_takes(x, w, y, p, device) ||
         gpu::fp8_conv2d_forward_resident_takes(x, w, y, p, device);
}

bool fp8_conv2d_runs_on_codes(const Shape& x, const Shape& w, const Shape& y, const Conv2dParams& p, Device device) {
  return gpu::fp8_conv2d_backward_data_phases_takes(y, w, x, p, device) &&
         gpu::fp8_conv2d_forward_phases_takes(x, w, y, p, device) &&
         gpu::fp8_conv2d_backward_filter_takes(x, y, w, p, device);
}

bool fp8_weight_pass_reads_fragments(const Shape& w, Fp8WeightPass pass, Device device) {
  return gpu::fragment_layout(w, pass, device) != gpu::FragmentLayout::None;
}

void fp8_weight_fragments_all(const std::vector<Fp8WeightFragmentsOf>& jobs) {
  for (const Fp8WeightFragmentsOf& job : jobs) {
    const char* pass = job.pass == Fp8WeightPass::Forward ? "forward" : "backward-data";
    GE_CHECK(job.codes.defined() && job.codes.dtype() == DType::U8 && job.codes.format() == MemoryFormat::NHWC,
             "fp8_weight_fragments_all: the codes must be a weight's u8 NHWC codes, got ",
             job.codes.defined() ? job.codes.str() : std::string("undefined"));
    GE_CHECK(fp8_weight_pass_reads_fragments(job.codes.shape(), job.pass, job.codes.device()),
             "fp8_weight_fragments_all: no FP8 ", pass, " kernel reads a weight ", job.codes.str(),
             " as fragments (those read ", shape_str(gpu::fragment_weight(gpu::FragmentLayout::PhaseForward).shape()),
             " and ", shape_str(gpu::fragment_weight(gpu::FragmentLayout::ResidentForward).shape()),
             " weights on a compute capability 9.0 GPU)");
    GE_CHECK(gpu::fragments_fit(job.fragments, job.codes, job.codes.device()),
             "fp8_weight_fragments_all: the fragments of ", job.codes.str(), " must be a 16-byte aligned u8 tensor of ",
             job.codes.numel(), " bytes on its device, got ",
             job.fragments.defined() ? job.fragments.str() : std::string("undefined"));
    GE_CHECK(job.fragments.device() == jobs[0].fragments.device(), "fp8_weight_fragments_all: every job on ",
             jobs[0].fragments.device().str(), ", got one on ", job.fragments.device().str());
  }
  if (!jobs.empty()) gpu::lay_out_weight_fragments(jobs);
}

void fp8_conv2d_backward_filter(const Fp8Tensor& x, const Fp8Tensor& dy, Tensor& dw, const Conv2dParams& p,
                                float beta) {
  require_result_dtype("fp8_conv2d_backward_filter", dw, true);
  GE_CHECK(dw.dtype() == DType::F32 || beta == 0.f,
           "fp8_conv2d_backward_filter: an f16 result is overwritten (beta 0), not accumulated onto");
  if (gpu::fp8_conv2d_backward_filter_wgmma(x, dy, dw, p, beta)) return;
  into_result(dw, [&](Tensor& out) {
    conv2d_backward_filter(fp8_dequantized(x), fp8_dequantized(dy), out, without_tf32(p), beta);
  });
}

}  // namespace ops
}  // namespace ge
