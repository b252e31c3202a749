// ops::copy_padded: the CPU reference against its definition, the GPU bitwise against the CPU.
#include <cstring>

#include "ganengine/nn.h"
#include "support/test_util.h"

using namespace ge;
using namespace ge::test;

namespace {

struct PadCase {
  Shape src, dst;
};
const PadCase kCases[] = {
    {{5, 3, 4, 4}, {5, 8, 4, 4}},     // an image batch padded to 8 channels
    {{5, 8, 4, 4}, {5, 3, 4, 4}},     // and trimmed back
    {{64, 3, 4, 4}, {64, 8, 4, 4}},   // a first-layer weight
    {{100, 64, 4, 4}, {104, 64, 4, 4}},  // a transposed weight padded along its first dimension
    {{1, 512, 4, 4}, {8, 512, 4, 4}},    // a one-output weight
    {{7, 100, 1, 1}, {7, 104, 1, 1}},    // noise
    {{6, 5, 3, 2}, {4, 9, 3, 2}},        // both ways at once
    {{70, 3, 64, 64}, {70, 8, 64, 64}},  // a DCGAN image batch: blocks walk several runs
    {{70, 8, 64, 64}, {70, 3, 64, 64}},  // G's padded output trimmed to the image: a thread per pixel
    {{9, 8, 5, 5}, {7, 1, 5, 5}},        // a 1-channel trim of fewer images
};

}  // namespace

TEST_CASE("copy_padded: copies the overlap and zeros the rest in both layouts") {
  for (const PadCase& pc : kCases)
    for (MemoryFormat f : {MemoryFormat::NCHW, MemoryFormat::NHWC}) {
      INFO(shape_str(pc.src), " -> ", shape_str(pc.dst), " ", format_name(f));
      const Tensor src = random_tensor(pc.src, DType::F32, Device::cpu(), f, -1, 1);
      Tensor dst = random_tensor(pc.dst, DType::F32, Device::cpu(), f, 5, 6);  // poisoned: every element must be written
      ops::copy_padded(src, dst);
      const std::vector<double> s = src.to_doubles(), d = dst.to_doubles();
      const int64_t C = pc.dst[1], HW = pc.dst[2] * pc.dst[3], sC = pc.src[1];
      bool ok = true;
      for (int64_t i = 0; i < static_cast<int64_t>(d.size()); ++i) {
        const int64_t n = i / (C * HW), c = i / HW % C, hw = i % HW;
        const double want = n < pc.src[0] && c < sC ? s[static_cast<size_t>((n * sC + c) * HW + hw)] : 0.0;
        ok = ok && d[static_cast<size_t>(i)] == want;
      }
      CHECK(ok);
    }
}

TEST_CASE("copy_padded: mismatched arguments are errors") {
  Tensor a = Tensor::zeros({2, 3, 4, 4}, DType::F32), b = Tensor::zeros({2, 8, 4, 5}, DType::F32);
  CHECK_THROWS_WITH_AS(ops::copy_padded(a, b), doctest::Contains("differ only in their first two sizes"), Error);
  Tensor h = Tensor::zeros({2, 8, 4, 4}, DType::F16);
  CHECK_THROWS_AS(ops::copy_padded(a, h), Error);
}

TEST_CASE("gpu copy_padded: bitwise the CPU result in every dtype and layout") {
  GE_REQUIRE_GPU();
  for (const PadCase& pc : kCases)
    for (DType dt : {DType::F32, DType::F16, DType::BF16})
      for (MemoryFormat f : {MemoryFormat::NCHW, MemoryFormat::NHWC}) {
        INFO(shape_str(pc.src), " -> ", shape_str(pc.dst), " ", dtype_name(dt), " ", format_name(f));
        const Tensor src = random_tensor(pc.src, dt, Device::cpu(), f, -1, 1);
        Tensor want = Tensor::empty(pc.dst, dt, Device::cpu(), f);
        ops::copy_padded(src, want);
        Tensor got = random_tensor(pc.dst, dt, Device::cpu(), f, 5, 6).to(Device::cuda(0));
        ops::copy_padded(src.to(Device::cuda(0)), got);
        const Tensor host = got.to(Device::cpu());
        CHECK(std::memcmp(host.data(), want.data(), want.nbytes()) == 0);
      }
}

// The DCGAN layers whose channel counts are not multiples of 8, on the GPU (where Conv2d pads
// them) against the same layer on the CPU (which does not), in f16.
TEST_CASE("gpu conv2d layer: zero-padded channels give the unpadded results") {
  GE_REQUIRE_GPU();
  struct LayerCase {
    int64_t in, out;
    int kernel, stride, pad;
    bool transposed;
    int64_t hw;  // input side
  };
  const PrecisionPolicy policy = resolve_policy(OptLevel::O3);
  // Then D's first and G's last layers' shapes, whose weights keep the image's channels
  // (the 8-channel kernels read them as their zero-padded copies).
  for (const LayerCase& lc : {LayerCase{3, 16, 4, 2, 1, false, 16}, LayerCase{16, 3, 4, 2, 1, true, 8},
                              LayerCase{100, 32, 4, 1, 0, true, 1}, LayerCase{32, 1, 4, 1, 0, false, 4},
                              LayerCase{3, 64, 4, 2, 1, false, 16}, LayerCase{64, 3, 4, 2, 1, true, 8}}) {
    INFO("in ", lc.in, " out ", lc.out, lc.transposed ? " transposed" : "");
    const nn::Placement gpu_place = nn::Placement::for_device(Device::cuda(0), DType::F16);
    const nn::Placement cpu_place = nn::Placement::for_device(Device::cpu(), DType::F16);
    nn::Conv2d gpu(lc.in, lc.out, lc.kernel, lc.stride, lc.pad, lc.transposed, policy, gpu_place);
    nn::Conv2d cpu(lc.in, lc.out, lc.kernel, lc.stride, lc.pad, lc.transposed, policy, cpu_place);
    const Tensor w = random_tensor(cpu.weight().value.shape(), DType::F32, Device::cpu(), MemoryFormat::NCHW, -0.2, 0.2);
    nn::assign_param(gpu.weight(), w);
    nn::assign_param(cpu.weight(), w);
    const Tensor x = random_tensor({4, lc.in, lc.hw, lc.hw}, DType::F16, Device::cpu());
    const Tensor yc = cpu.forward(x, true), yg = gpu.forward(x.to(Device::cuda(0)), true);
    REQUIRE(yg.shape() == yc.shape());
    CHECK(rel_error(yg.to_doubles(), yc.to_doubles()) < 2e-3);
    const Tensor dy = random_tensor(yc.shape(), DType::F16, Device::cpu());
    const Tensor dxc = cpu.backward(dy, true, true), dxg = gpu.backward(dy.to(Device::cuda(0)), true, true);
    REQUIRE(dxg.shape() == dxc.shape());
    CHECK(rel_error(dxg.to_doubles(), dxc.to_doubles()) < 2e-3);
    CHECK(rel_error(gpu.weight().model_grad.to_doubles(), cpu.weight().model_grad.to_doubles()) < 2e-3);
  }
}
