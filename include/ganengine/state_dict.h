// A network's weights under PyTorch's state_dict names ("main.0.weight",
// "main.1.running_mean", "main.1.num_batches_tracked", ...), so files we write load into the
// example's Generator/Discriminator in Python and theirs load into ours.
#pragma once
#include <map>
#include <string>

#include "ganengine/nn.h"

namespace ge::nn {

using StateDict = std::map<std::string, Tensor>;

// CPU tensors: weights and running statistics as f32 (the fp32 master where one exists),
// num_batches_tracked as an i64 scalar.
StateDict state_dict(Sequential& net);
// Strict, like PyTorch's load_state_dict: every key must be present with the right shape and
// nothing else may be there; `what` names the source in error messages (a file name).
void load_state_dict(Sequential& net, const StateDict& sd, const std::string& what);

// A state_dict from a file, by its content: a safetensors file, or a .pth written by torch.save
// (its ZIP format or the legacy one). Names saved from a DataParallel wrapper ("module.main.0.weight")
// lose their "module." prefix when every name has it.
StateDict load_state_dict_file(const std::string& path);

// A DCGAN generator's shape (nz, ngf, nc, imageSize) read off its weights: main.0.weight is
// (nz, ngf*mult, 4, 4), the last transposed convolution (ngf, nc, 4, 4), and k transposed
// convolutions make images of side 2^(k+1). `what` names the source in errors.
NetConfig infer_generator_config(const StateDict& sd, const std::string& what);

}  // namespace ge::nn
