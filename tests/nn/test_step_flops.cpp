// The analytic FLOP count `ganengine bench` divides by: checked against a hand count and
// against the shapes of the networks actually built.
#include <cstdio>
#include <string>

#include "support/test_util.h"
#include "train/step_flops.h"

using namespace ge;

namespace {

// "Conv2d(3, 64, 4, 2, 1, bias=False)" -> stride 2, pad 1.
void stride_pad(const std::string& describe, int& stride, int& pad) {
  long long in = 0, out = 0, k = 0;
  const size_t open = describe.find('(');
  REQUIRE(open != std::string::npos);
  REQUIRE(std::sscanf(describe.c_str() + open, "(%lld, %lld, %lld, %d, %d", &in, &out, &k, &stride, &pad) == 5);
}

// The layer list of step_flops.cpp against the convolutions of a network built by dcgan.cpp:
// same channels and kernels (from the weight shapes), same kind, and each layer's sizes follow
// from its input size, stride and padding.
void check_layers(nn::Sequential& net, const std::vector<ConvLayerShape>& expected, int64_t input_size) {
  size_t i = 0;
  int64_t size = input_size;
  for (auto& layer : net.layers()) {
    auto* conv = dynamic_cast<nn::Conv2d*>(layer.get());
    if (!conv) continue;
    REQUIRE(i < expected.size());
    const ConvLayerShape& e = expected[i++];
    const std::string d = conv->describe();
    const bool transposed = d.rfind("ConvTranspose2d(", 0) == 0;
    CAPTURE(d);
    CHECK(e.transposed == transposed);
    const Shape w = conv->weight().value.shape();  // PyTorch: Conv2d (out, in, k, k); transposed (in, out, k, k)
    CHECK(e.in_channels == (transposed ? w[0] : w[1]));
    CHECK(e.out_channels == (transposed ? w[1] : w[0]));
    CHECK(e.kernel == w[2]);
    int stride = 0, pad = 0;
    stride_pad(d, stride, pad);
    CHECK(e.in_size == size);
    size = transposed ? conv_transpose_out_size(size, w[2], stride, pad) : conv_out_size(size, w[2], stride, pad);
    CHECK(e.out_size == size);
  }
  CHECK(i == expected.size());
}

}  // namespace

TEST_CASE("step flops: the layer lists match the networks dcgan.cpp builds") {
  const PrecisionPolicy policy = resolve_policy(OptLevel::O0);
  for (int image_size : {16, 32, 64, 128}) {
    nn::NetConfig cfg;
    cfg.image_size = image_size;
    cfg.nz = 7;
    cfg.ngf = 3;
    cfg.ndf = 5;
    cfg.nc = 2;
    CAPTURE(image_size);
    auto G = nn::make_generator(cfg, policy, nn::Placement::for_device(Device::cpu(), policy.compute_dtype));
    auto D = nn::make_discriminator(cfg, policy, nn::Placement::for_device(Device::cpu(), policy.compute_dtype));
    const auto g = generator_conv_layers(cfg), d = discriminator_conv_layers(cfg);
    check_layers(*G, g, 1);
    check_layers(*D, d, image_size);
    CHECK(g.back().out_size == image_size);
    CHECK(d.back().out_size == 1);
  }
}

TEST_CASE("step flops: a small configuration against a hand count") {
  // imageSize 16, nz 4, ngf 2, ndf 3, nc 1. Multiply-adds per image of one pass of each layer:
  //   G: ConvT(4->4, 1x1->4x4)  4*4*16*1  =  256   (Cin*Cout*R*S*Hin*Win)
  //      ConvT(4->2, 4x4->8x8)  4*2*16*16 = 2048
  //      ConvT(2->1, 8x8->16x16) 2*1*16*64 = 2048
  //   D: Conv(1->3, 16->8)      3*1*16*64 = 3072   (K*C*R*S*P*Q)
  //      Conv(3->6, 8->4)       6*3*16*16 = 4608
  //      Conv(6->1, 4->1)       1*6*16*1  =   96
  nn::NetConfig cfg;
  cfg.image_size = 16;
  cfg.nz = 4;
  cfg.ngf = 2;
  cfg.ndf = 3;
  cfg.nc = 1;
  const int64_t g1 = 256, g2 = 2048, g3 = 2048, d1 = 3072, d2 = 4608, d3 = 96;
  const int64_t d_real = (d1 + d2 + d3) + (d2 + d3) + (d1 + d2 + d3);  // fwd, data (not into x), filter
  const int64_t g_fwd = g1 + g2 + g3;
  const int64_t d_fake = d_real;                            // on fake.detach()
  const int64_t d_for_g = (d1 + d2 + d3) + (d1 + d2 + d3);  // fwd, data into fake, no filter
  const int64_t g_bwd = (g2 + g3) + (g1 + g2 + g3);         // data (not into noise), filter
  const int64_t macs = d_real + g_fwd + d_fake + d_for_g + g_bwd;
  CHECK(macs == 68864);
  CHECK(dcgan_step_flops(cfg, 1) == 2 * macs);
  CHECK(dcgan_step_flops(cfg, 5) == 5 * 2 * macs);
}

TEST_CASE("step flops: the 64x64 reference networks are about 2.3 GFLOP per image") {
  nn::NetConfig cfg;  // imageSize 64, nz 100, ngf 64, ndf 64, nc 3: main_amp.py's networks
  const int64_t per_image = dcgan_step_flops(cfg, 1);
  MESSAGE("64x64 reference networks: ", per_image, " FLOPs per image per training step");
  CHECK(per_image == 2274623488LL);  // 1,137,311,744 multiply-adds
  CHECK(per_image > 2.2e9);
  CHECK(per_image < 2.4e9);
  CHECK(dcgan_step_flops(cfg, 1024) == 1024 * per_image);  // no overflow at large batches
}

TEST_CASE("step flops: a transposed convolution costs what its adjoint convolution costs") {
  const ConvLayerShape down{64, 128, 4, 32, 16, false};  // Conv2d(64, 128, 4, 2, 1): 32 -> 16
  const ConvLayerShape up{128, 64, 4, 16, 32, true};     // ConvTranspose2d(128, 64, 4, 2, 1): 16 -> 32
  CHECK(conv_pass_flops(down, 3) == 2 * 3 * 128 * 64 * 16 * 16 * 16);
  CHECK(conv_pass_flops(up, 3) == conv_pass_flops(down, 3));
}
