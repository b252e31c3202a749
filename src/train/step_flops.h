// Analytic FLOPs of one DCGAN training step (docs/architecture.md, "Performance method").
// Only convolutions are counted — BatchNorm, activations, losses, casts, unscaling and Adam are
// memory-bound element-wise work whose FLOPs are well under 1% of the total at batch 64 and up
// (Adam's ~12 FLOPs per parameter, spread over the batch, included) and say nothing about how
// well the Tensor Cores are used. A multiply-add counts as 2 FLOPs, and a convolution's
// MACs include those against padding zeros (the usual convention, the one PyTorch's profilers
// use), so the count depends on shapes only, not on the algorithm cuDNN picks.
#pragma once
#include <cstdint>
#include <vector>

#include "ganengine/nn.h"

namespace ge {

// One convolution layer of the networks, per image. For a Conv2d, in/out are its input and
// output channels and sizes; for a ConvTranspose2d too (in = what it reads, out = what it writes).
struct ConvLayerShape {
  int64_t in_channels = 0, out_channels = 0;
  int64_t kernel = 0;
  int64_t in_size = 0, out_size = 0;  // square feature maps
  bool transposed = false;
};

// The convolution layers of make_generator / make_discriminator (src/nn/dcgan.cpp) in order.
// tests/test_step_flops.cpp checks them against the weights of the networks actually built.
std::vector<ConvLayerShape> generator_conv_layers(const nn::NetConfig& cfg);
std::vector<ConvLayerShape> discriminator_conv_layers(const nn::NetConfig& cfg);

// FLOPs of one pass of one layer over a batch: 2*N*K*C*R*S*P*Q for a convolution (output
// positions P*Q), 2*N*Cin*Cout*R*S*H*W for a transposed one (input positions H*W). Its
// backward-data and backward-filter passes cost exactly the same.
int64_t conv_pass_flops(const ConvLayerShape& layer, int64_t batch);

// FLOPs of the convolution passes one DcganTrainer::step runs (src/train/dcgan_trainer.cpp):
//   D on the real batch:   forward, backward data (not into the image), backward filter
//   G forward
//   D on fake.detach():    forward, backward data (not into the image), backward filter
//   D on fake for G's loss: forward, backward data through every layer (dfake), no filter
//   G backward:            backward data (not into the noise), backward filter
// For the 64x64 reference networks (nz 100, ngf 64, ndf 64, nc 3): 2,274,623,488 FLOPs per image.
int64_t dcgan_step_flops(const nn::NetConfig& cfg, int64_t batch);

}  // namespace ge
