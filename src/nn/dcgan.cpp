// The generator and discriminator of the DCGAN example, generalised to any power-of-two image
// size: 64 gives exactly main_amp.py's networks; each factor of two adds or removes one
// stride-2 block in the middle.
#include <cmath>

#include "ganengine/nn.h"

namespace ge::nn {

namespace {
int log2_exact(int v) {
  int k = 0;
  while (k < 30 && (1 << k) < v) ++k;  // 1 << 31 overflows an int; no supported size is near it
  return (1 << k) == v ? k : -1;
}
}  // namespace

void validate(const NetConfig& cfg) {
  const int k = log2_exact(cfg.image_size);
  if (k < 4 || k > 9)
    fail("--imageSize ", cfg.image_size,
         " is not supported (expected a power of two from 16 to 512; 64 is the example's)");
  if (cfg.nz < 1 || cfg.nz > 100000) fail("--nz ", cfg.nz, " out of range (expected 1..100000)");
  if (cfg.ngf < 1 || cfg.ngf > 4096) fail("--ngf ", cfg.ngf, " out of range (expected 1..4096)");
  if (cfg.ndf < 1 || cfg.ndf > 4096) fail("--ndf ", cfg.ndf, " out of range (expected 1..4096)");
  if (cfg.nc < 1 || cfg.nc > 4) fail("image channels nc=", cfg.nc, " (expected 1..4)");
}

std::unique_ptr<Sequential> make_generator(const NetConfig& cfg, const PrecisionPolicy& policy, Placement where) {
  validate(cfg);
  auto net = std::make_unique<Sequential>();
  int64_t mult = cfg.image_size / 8;  // 8 at 64x64: ngf*8 channels at 4x4
  auto block = [&](int64_t in, int64_t out, int stride, int pad) {
    net->add(std::make_unique<Conv2d>(in, out, 4, stride, pad, true, policy, where));
    net->add(std::make_unique<BatchNorm2d>(out, policy, where));
    net->add(std::make_unique<ActivationLayer>(ops::Activation::ReLU));
  };
  block(cfg.nz, cfg.ngf * mult, 1, 0);
  for (; mult > 1; mult /= 2) block(cfg.ngf * mult, cfg.ngf * mult / 2, 2, 1);
  net->add(std::make_unique<Conv2d>(cfg.ngf, cfg.nc, 4, 2, 1, true, policy, where));
  net->add(std::make_unique<ActivationLayer>(ops::Activation::Tanh));
  net->fuse();
  return net;
}

std::unique_ptr<Sequential> make_discriminator(const NetConfig& cfg, const PrecisionPolicy& policy, Placement where) {
  validate(cfg);
  auto net = std::make_unique<Sequential>();
  net->add(std::make_unique<Conv2d>(cfg.nc, cfg.ndf, 4, 2, 1, false, policy, where));
  net->add(std::make_unique<ActivationLayer>(ops::Activation::LeakyReLU, 0.2f));
  int64_t mult = 1;
  for (int size = cfg.image_size / 2; size > 4; size /= 2, mult *= 2) {
    net->add(std::make_unique<Conv2d>(cfg.ndf * mult, cfg.ndf * mult * 2, 4, 2, 1, false, policy, where));
    net->add(std::make_unique<BatchNorm2d>(cfg.ndf * mult * 2, policy, where));
    net->add(std::make_unique<ActivationLayer>(ops::Activation::LeakyReLU, 0.2f));
  }
  net->add(std::make_unique<Conv2d>(cfg.ndf * mult, 1, 4, 1, 0, false, policy, where));
  net->fuse();
  return net;
}

void assign_param(Param& p, const Tensor& values) {
  GE_CHECK(values.shape() == p.value.shape(), "parameter of shape ", shape_str(p.value.shape()), " given ",
           values.str());
  Tensor exact = ops::converted(values, DType::F32, p.value.format(), p.value.device());
  // The master keeps the unrounded fp32 values; the model copy is their rounding.
  if (p.master.defined()) p.master.copy_from(exact);
  p.value.copy_from(p.value.dtype() == DType::F32
                        ? exact
                        : ops::converted(exact, p.value.dtype(), p.value.format(), p.value.device()));
}

void weights_init(Sequential& net, uint64_t seed, uint64_t stream) {
  uint64_t offset = stream << 40;  // each network draws from its own region of the counter space
  for (auto& layer : net.layers()) {
    auto draw = [&](const Shape& shape, float mean) {
      Tensor t = Tensor::empty(shape, DType::F32);
      ops::fill_normal(t, seed, offset, mean, 0.02f);
      offset += ops::philox_counters_for(t.numel());
      return t;
    };
    if (auto* conv = dynamic_cast<Conv2d*>(layer.get())) {
      assign_param(conv->weight(), draw(conv->weight().value.shape(), 0.f));
    } else if (auto* bn = dynamic_cast<BatchNorm2d*>(layer.get())) {
      auto ps = bn->params();
      assign_param(*ps[0], draw(ps[0]->value.shape(), 1.f));
      assign_param(*ps[1], Tensor::zeros(ps[1]->value.shape(), DType::F32));
    }
  }
}

}  // namespace ge::nn
