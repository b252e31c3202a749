// The convolution paths of conv_paths.h, in the order they are tried, and the ops.h entry
// points of every convolution pass, which hand their tensors to the first that applies.
#include "cuda/conv/conv_paths.h"

#include <string>
#include <vector>

#include "cuda/conv/conv_8ch.h"
#include "cuda/conv/conv_gemm.h"
#include "cuda/conv/conv_phase_dgrad.h"
#include "cuda/conv/conv_scalar.h"
#include "cuda/cuda_util.cuh"
#include "ganengine/ops.h"

namespace ge {
namespace gpu {
namespace {

// ---- the paths

bool direct8_applies(const ConvCall& c) {
  switch (c.pass) {
    case ConvPass::Forward: return conv2d_forward_8ch_applies(c.x, c.w, c.y, c.p);
    case ConvPass::BackwardData: return conv2d_backward_data_8ch_applies(c.y, c.w, c.x, c.p, c.act, c.y_act, c.dx_act);
    default: return conv2d_backward_filter_8ch_applies(c.x, c.y, c.w, c.p, c.act, c.y_act);
  }
}

void direct8_run(const ConvCall& c) {
  Tensor out = c.pass == ConvPass::Forward ? c.y : c.pass == ConvPass::BackwardData ? c.x : c.w;
  bool ran = false;
  switch (c.pass) {
    case ConvPass::Forward: ran = conv2d_forward_8ch(c.x, c.w, out, c.p, c.act); break;
    case ConvPass::BackwardData: ran = conv2d_backward_data_8ch(c.y, c.w, out, c.p, c.act, c.y_act, c.dx_act); break;
    default: ran = conv2d_backward_filter_8ch(c.x, c.y, out, c.p, c.beta, c.act, c.y_act); break;
  }
  GE_CHECK(ran, "the 8-channel ", pass_name(c.pass), " did not take a call its applies() took");
}

bool phases_applies(const ConvCall& c) { return conv2d_backward_data_phases_applies(c.y, c.w, c.x, c.p); }

void phases_run(const ConvCall& c) {
  Tensor dx = c.x;
  GE_CHECK(conv2d_backward_data_phases(c.y, c.w, dx, c.p), "the phase-decomposed backward-data did not take a call");
}

bool scalar_applies(const ConvCall& c) { return conv_scalar_applies(c.pass, c.x, c.w, c.y, c.p); }

void scalar_run(const ConvCall& c) {
  Tensor out = c.pass == ConvPass::Forward ? c.y : c.pass == ConvPass::BackwardData ? c.x : c.w;
  bool ran = false;
  switch (c.pass) {
    case ConvPass::Forward: ran = conv2d_forward_scalar(c.x, c.w, out, c.p); break;
    case ConvPass::BackwardData: ran = conv2d_backward_data_scalar(c.y, c.w, out, c.p); break;
    default: ran = conv2d_backward_filter_scalar(c.x, c.y, out, c.p, c.beta); break;
  }
  GE_CHECK(ran, "the one-output-per-image ", pass_name(c.pass), " did not take a call its applies() took");
}

bool gemm_applies(const ConvCall& c) { return conv_gemm_applies(c.x, c.w, c.y, c.p); }

void gemm_run(const ConvCall& c) {
  Tensor out = c.pass == ConvPass::BackwardData ? c.x : c.w;
  const bool ran = c.pass == ConvPass::BackwardData ? conv2d_backward_data_gemm(c.y, c.w, out, c.p)
                                                    : conv2d_backward_filter_gemm(c.x, c.y, out, c.p, c.beta);
  GE_CHECK(ran, "the GEMM ", pass_name(c.pass), " did not take a call its applies() took");
}

bool always(const ConvCall&) { return true; }

// ---- the tables

const ConvPath kDirect8{"8-channel direct (conv_8ch*.cu)",
                        "f16/bf16 NHWC, 4x4 stride 2 pad 1, 8 input channels (of which x may hold 1 or 3), "
                        "64k output channels: D's first and G's last layer",
                        /*narrow_channels=*/true,
                        /*fuses_activation=*/true,
                        direct8_applies,
                        direct8_run};
const ConvPath kPhases{"phase-decomposed backward-data on warpgroup MMA (sm90a/conv_phase_dgrad.cu)",
                       "f16 NHWC on compute capability 9.0, 128 -> 64 channels, 4x4 stride 2 pad 1, 16x16 -> 32x32",
                       /*narrow_channels=*/true,
                       /*fuses_activation=*/false,
                       phases_applies,
                       phases_run};
const ConvPath kScalar{"one output per image (conv_scalar.cu)",
                       "f16/bf16, one output channel, a kernel as large as the input, no padding: D's last layer",
                       /*narrow_channels=*/false,
                       /*fuses_activation=*/false,
                       scalar_applies,
                       scalar_run};
const ConvPath kGemm{"one GEMM over the batch (conv_gemm.cpp, cuBLAS)",
                     "f16/bf16, a kernel covering the unpadded input (one output pixel): G's first layer",
                     /*narrow_channels=*/false,
                     /*fuses_activation=*/false,
                     gemm_applies,
                     gemm_run};
const ConvPath kCudnn{"cuDNN (cudnn_conv.cu: searched algorithm or engine configuration)",
                      "every convolution",
                      /*narrow_channels=*/false,
                      /*fuses_activation=*/false,
                      always,
                      cudnn_conv};

// The activations of `call` taken apart, around the call without them on the table's paths.
void run_with_activations_apart(const ConvCall& call) {
  ConvCall plain = call;
  plain.act = nullptr;
  plain.y_act = nullptr;
  plain.dx_act = nullptr;
  if (call.act && call.pass != ConvPass::Forward) {
    plain.y = Tensor::empty(call.y.shape(), call.y.dtype(), call.y.device(), call.y.format());
    gpu::activation_backward(call.act->kind, *call.y_act, call.y, plain.y, call.act->negative_slope);
  }
  run_conv_pass(plain);
  if (call.act && call.pass == ConvPass::Forward) {
    Tensor y = call.y;
    gpu::activation_forward(call.act->kind, y, y, call.act->negative_slope);
  }
  if (call.dx_act) {
    Tensor dx = call.x;
    const ops::FusedActivation& a = call.dx_act->act;
    if (call.dx_act->y)
      gpu::activation_backward(a.kind, *call.dx_act->y, dx, dx, a.negative_slope);
    else
      gpu::activation_forward(a.kind, dx, dx, a.negative_slope);
  }
}

// The first of `paths` that is not narrow_channels and applies (the last always does).
void run_first_full(const ConvCall& call, const std::vector<ConvPath>& paths) {
  for (const ConvPath& path : paths)
    if (!path.narrow_channels && path.applies(call)) return path.run(call);
  fail("no convolution path applies to the ", pass_name(call.pass), " of x ", call.x.str());
}

void check_conv(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p, ConvPass pass) {
  for (const Tensor* t : {&x, &w, &y}) {
    check_gpu_float(*t, "convolution tensor");
    GE_CHECK(t->rank() == 4, "conv2d ", pass_name(pass), ": tensors must be 4-D, got ", t->str());
  }
  GE_CHECK(x.dtype() == w.dtype() && x.dtype() == y.dtype(), "conv2d ", pass_name(pass),
           ": tensors must share a dtype: x ", x.str(), ", w ", w.str(), ", y ", y.str());
  GE_CHECK(x.device() == w.device() && x.device() == y.device(), "conv2d ", pass_name(pass),
           ": tensors must be on one device: x ", x.str(), ", w ", w.str(), ", y ", y.str());
  GE_CHECK(p.stride >= 1 && p.pad >= 0, "conv2d: stride must be >= 1 and pad >= 0, got stride ", p.stride, " pad ",
           p.pad);
  const int64_t H = x.dim(2), W = x.dim(3), R = w.dim(2), S = w.dim(3);
  GE_CHECK(H + 2 * p.pad >= R && W + 2 * p.pad >= S, "conv2d: kernel ", R, "x", S, " larger than the padded input ",
           x.str());
  const int64_t P = (H + 2 * p.pad - R) / p.stride + 1, Q = (W + 2 * p.pad - S) / p.stride + 1;
  // Every pass takes an x with fewer channels than w (ops.h: for forward and backward-filter the
  // rest are zeros, backward-data computes only x's).
  const bool x_channels_fit = x.dim(1) <= w.dim(1);
  GE_CHECK(x_channels_fit && y.dim(1) == w.dim(0) && y.dim(0) == x.dim(0) && y.dim(2) == P && y.dim(3) == Q, "conv2d ",
           pass_name(pass), ": shapes do not fit: x ", x.str(), ", w ", w.str(), ", y ", y.str(), " (stride ", p.stride,
           ", pad ", p.pad, " gives output ", x.dim(0), "x", w.dim(0), "x", P, "x", Q, ")");
}

}  // namespace

const char* pass_name(ConvPass pass) {
  switch (pass) {
    case ConvPass::Forward: return "forward";
    case ConvPass::BackwardData: return "backward-data";
    default: return "backward-filter";
  }
}

const std::vector<ConvPath>& conv_paths(ConvPass pass) {
  static const std::vector<ConvPath> forward{kDirect8, kScalar, kCudnn};
  static const std::vector<ConvPath> backward_data{kDirect8, kPhases, kScalar, kGemm, kCudnn};
  static const std::vector<ConvPath> backward_filter{kDirect8, kScalar, kGemm, kCudnn};
  switch (pass) {
    case ConvPass::Forward: return forward;
    case ConvPass::BackwardData: return backward_data;
    default: return backward_filter;
  }
}

void run_conv_pass(const ConvCall& call) {
  const std::vector<ConvPath>& paths = conv_paths(call.pass);
  if (call.has_activation()) {
    for (const ConvPath& path : paths)
      if (path.fuses_activation && path.applies(call)) return path.run(call);
    return run_with_activations_apart(call);
  }
  for (const ConvPath& path : paths)
    if (path.narrow_channels && path.applies(call)) return path.run(call);
  // The other paths read (or write) x with all of w's channels.
  const int64_t channels = call.w.dim(1);
  ConvCall full = call;
  if (call.pass != ConvPass::BackwardData) {
    full.x = ops::with_channels(call.x, channels);
    return run_first_full(full, paths);
  }
  Tensor dx = call.x;
  ops::write_with_channels(dx, channels, [&](Tensor& wide) {
    full.x = wide;
    run_first_full(full, paths);
  });
}

std::vector<std::string> describe_conv_paths() {
  std::vector<std::string> out;
  for (ConvPass pass : {ConvPass::Forward, ConvPass::BackwardData, ConvPass::BackwardFilter}) {
    out.push_back(std::string(pass_name(pass)) + ":");
    int i = 0;
    for (const ConvPath& path : conv_paths(pass))
      out.push_back("  " + std::to_string(++i) + ". " + path.name + ": " + path.takes);
  }
  return out;
}

// ---- ops.h's convolution passes

void conv2d_forward(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p) {
  check_conv(x, w, y, p, ConvPass::Forward);
  run_conv_pass({ConvPass::Forward, x, w, y, p});
}

bool conv_transpose2d_forward_moments(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p,
                                      Tensor& moments) {
  // Only the phase-decomposed kernel forms the moments as it writes y.
  check_conv(y, w, x, p, ConvPass::BackwardData);
  return conv2d_backward_data_phases(x, w, y, p, &moments);
}

void conv2d_backward_data(const Tensor& dy, const Tensor& w, Tensor& dx, const Conv2dParams& p) {
  check_conv(dx, w, dy, p, ConvPass::BackwardData);
  run_conv_pass({ConvPass::BackwardData, dx, w, dy, p});
}

void conv2d_backward_filter(const Tensor& x, const Tensor& dy, Tensor& dw, const Conv2dParams& p, float beta) {
  check_conv(x, dw, dy, p, ConvPass::BackwardFilter);
  run_conv_pass({ConvPass::BackwardFilter, x, dw, dy, p, beta});
}

void conv2d_activation_forward(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p,
                               const ops::FusedActivation& act) {
  check_conv(x, w, y, p, ConvPass::Forward);
  run_conv_pass({ConvPass::Forward, x, w, y, p, 0.f, &act});
}

void conv2d_activation_backward_filter(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dw,
                                       const Conv2dParams& p, const ops::FusedActivation& act, float beta) {
  check_conv(x, dw, dy, p, ConvPass::BackwardFilter);
  GE_CHECK(y.dtype() != DType::U8 || conv2d_backward_filter_8ch_applies(x, dy, dw, p, &act, &y),
           "conv2d_activation_backward_filter: y as codes on the GPU takes only the shapes ",
           "ops::conv2d_activation_runs_from_codes names; x ", x.str(), ", dy ", dy.str());
  run_conv_pass({ConvPass::BackwardFilter, x, dw, dy, p, beta, &act, &y});
}

void conv2d_activation_backward_data(const Tensor& y, const Tensor& dy, const Tensor& w, Tensor& dx,
                                     const Conv2dParams& p, const ops::FusedActivation& act,
                                     const ops::InputActivation* input) {
  check_conv(dx, w, dy, p, ConvPass::BackwardData);
  const DxActivation through_input{input ? input->act : ops::FusedActivation{}, input ? &input->x : nullptr};
  GE_CHECK(y.dtype() != DType::U8 ||
               conv2d_backward_data_8ch_applies(dy, w, dx, p, &act, &y, input ? &through_input : nullptr),
           "conv2d_activation_backward_data: y as codes on the GPU takes only the shapes ",
           "ops::conv2d_activation_runs_from_codes names; dy ", dy.str(), ", dx ", dx.str());
  run_conv_pass({ConvPass::BackwardData, dx, w, dy, p, 0.f, &act, &y, input ? &through_input : nullptr});
}

// A transposed convolution's forward is conv2d's backward-data (ops.h): x plays dy, y plays dx.
void conv_transpose2d_activation_forward(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p,
                                         const ops::FusedActivation& act) {
  check_conv(y, w, x, p, ConvPass::BackwardData);
  const DxActivation forward{act, nullptr};
  run_conv_pass({ConvPass::BackwardData, y, w, x, p, 0.f, nullptr, nullptr, &forward});
}

}  // namespace gpu
}  // namespace ge
