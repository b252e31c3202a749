#include "train/step_flops.h"

namespace ge {

namespace {
constexpr int64_t kKernel = 4;  // every DCGAN convolution is 4x4

int64_t sum_flops(const std::vector<ConvLayerShape>& layers, int64_t batch, size_t first) {
  int64_t total = 0;
  for (size_t i = first; i < layers.size(); ++i) total += conv_pass_flops(layers[i], batch);
  return total;
}
}  // namespace

// Mirrors make_generator: a 4x4 map from the 1x1 noise, then stride-2 blocks halving the
// width and doubling the size, then the image.
std::vector<ConvLayerShape> generator_conv_layers(const nn::NetConfig& cfg) {
  nn::validate(cfg);
  std::vector<ConvLayerShape> out;
  int64_t mult = cfg.image_size / 8;
  out.push_back({cfg.nz, cfg.ngf * mult, kKernel, 1, 4, true});
  int64_t size = 4;
  for (; mult > 1; mult /= 2, size *= 2)
    out.push_back({cfg.ngf * mult, cfg.ngf * mult / 2, kKernel, size, size * 2, true});
  out.push_back({cfg.ngf, cfg.nc, kKernel, size, size * 2, true});
  return out;
}

// Mirrors make_discriminator: stride-2 convolutions down to 4x4, then a 4x4 valid convolution
// to one logit.
std::vector<ConvLayerShape> discriminator_conv_layers(const nn::NetConfig& cfg) {
  nn::validate(cfg);
  std::vector<ConvLayerShape> out;
  const int64_t s = cfg.image_size;
  out.push_back({cfg.nc, cfg.ndf, kKernel, s, s / 2, false});
  int64_t mult = 1;
  for (int64_t size = s / 2; size > 4; size /= 2, mult *= 2)
    out.push_back({cfg.ndf * mult, cfg.ndf * mult * 2, kKernel, size, size / 2, false});
  out.push_back({cfg.ndf * mult, 1, kKernel, 4, 1, false});
  return out;
}

int64_t conv_pass_flops(const ConvLayerShape& l, int64_t batch) {
  // A transposed convolution is the adjoint of a convolution from its output to its input, so
  // its MACs are counted over its input positions; both forms are Cin*Cout*R*S per position.
  const int64_t positions = l.transposed ? l.in_size * l.in_size : l.out_size * l.out_size;
  return 2 * batch * l.in_channels * l.out_channels * l.kernel * l.kernel * positions;
}

int64_t dcgan_step_flops(const nn::NetConfig& cfg, int64_t batch) {
  const auto G = generator_conv_layers(cfg), D = discriminator_conv_layers(cfg);
  const int64_t d_all = sum_flops(D, batch, 0), d_data = sum_flops(D, batch, 1);
  const int64_t g_all = sum_flops(G, batch, 0), g_data = sum_flops(G, batch, 1);
  // Sequential::backward asks layer 0 for its input gradient only when the caller wants it:
  // D's updates start from data or fake.detach() (no), G's loss needs dfake (yes), and G's
  // backward never wants the noise gradient.
  const int64_t d_real = d_all /*fwd*/ + d_data /*bwd data*/ + d_all /*bwd filter*/;
  const int64_t d_fake = d_all + d_data + d_all;
  const int64_t d_for_g = d_all /*fwd*/ + d_all /*bwd data, into fake*/;
  const int64_t g = g_all /*fwd*/ + g_data /*bwd data*/ + g_all /*bwd filter*/;
  return d_real + d_fake + d_for_g + g;
}

}  // namespace ge
