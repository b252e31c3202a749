// Every way the GPU runs a convolution pass, in one ordered table per pass (conv_paths.cu): the
// first path that applies to the pass's tensors runs it. The paths compute the same function;
// where they differ in rounding, the tests say so (each path has GPU-vs-CPU tests of its own).
//
// A pass is described with the tensors' forward-pass roles: x (N, C, H, W) the input, w
// (K, C, R, S) the weight, y (N, K, P, Q) the output. Forward writes y, BackwardData writes x,
// BackwardFilter writes w (w = beta * w + the gradient).
#pragma once
#include <vector>

#include "core/backend.h"

namespace ge {
namespace gpu {

enum class ConvPass : int { Forward = 0, BackwardData = 1, BackwardFilter = 2 };
const char* pass_name(ConvPass pass);

struct DxActivation;  // conv_8ch.h

// One pass as the table sees it. Activations fused into the pass (ops.h's conv*_activation_*):
//  - Forward: act applied to y.
//  - BackwardFilter, BackwardData: act's gradient, given its output y_act, taken on y first.
//  - BackwardData: dx_act taken on x as it is written (the forward of a transposed convolution's
//    activation, or with dx_act->y the gradient of the activation that produced x).
struct ConvCall {
  ConvPass pass;
  Tensor x, w, y;  // handles: a pass writes through its output's
  Conv2dParams p;
  float beta = 0.f;
  const ops::FusedActivation* act = nullptr;
  const Tensor* y_act = nullptr;
  const DxActivation* dx_act = nullptr;
  bool has_activation() const { return act != nullptr || dx_act != nullptr; }
};

struct ConvPath {
  const char* name;
  const char* takes;  // the shapes it applies to, in words (ganengine info)
  // Whether it runs x with only the channels the layer's data has (an image's 1 or 3 of w's 8);
  // the other paths get x (or write it) with all of w's channels.
  bool narrow_channels;
  // Whether it takes the call's activations itself; the others get the call without them, the
  // dispatcher taking them apart before and after.
  bool fuses_activation;
  bool (*applies)(const ConvCall&);
  void (*run)(const ConvCall&);  // only where applies
};

// The paths of `pass`, in the order they are tried; the last (cuDNN) applies to every call.
const std::vector<ConvPath>& conv_paths(ConvPass pass);

// Runs the call on the first path that applies, as described above.
void run_conv_pass(const ConvCall& call);

// The legacy cuDNN API with a searched, cached algorithm (cudnn_conv.cu): every convolution.
void cudnn_conv(const ConvCall& call);

}  // namespace gpu
}  // namespace ge
