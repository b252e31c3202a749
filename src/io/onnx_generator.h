// The DCGAN generator as an ONNX graph, for inference outside ganengine: input "z"
// (N, nz, 1, 1) with N left free, output "image" (N, nc, S, S) in [-1, 1]. Each block is
// ConvTranspose (no bias, 4x4 kernel; stride 1 and no padding first, then stride 2, padding 1),
// BatchNormalization in inference mode (the running statistics, epsilon 1e-5: PyTorch's
// eval()), Relu; the last ConvTranspose is followed by Tanh. Initializers keep the state_dict's
// names ("main.0.weight", "main.1.running_mean", ...).
#pragma once
#include "ganengine/state_dict.h"
#include "io/onnx_writer.h"

namespace ge::onnx {

// sd: the generator's state_dict as nn::state_dict gives it (f32 CPU tensors) for a network
// of shape cfg; `what` names its source in errors.
Graph generator_graph(const nn::StateDict& sd, const nn::NetConfig& cfg, const std::string& what);

}  // namespace ge::onnx
