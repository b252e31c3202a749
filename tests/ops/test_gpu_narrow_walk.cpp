// The narrow backward-data kernel (conv_8ch_dgrad_narrow.cu) walking runs of consecutive bands,
// carrying a band's last dy row to the next, against each band computing its neighbours' rows
// again: the same bits, in the forms the layers use (G's last layer's forward with its Tanh, D's
// first layer's input gradient through its LeakyReLU with the Tanh's gradient after).
#if GE_WITH_CUDA
#include "cuda/conv/conv_8ch_dgrad_narrow.h"
#include "ganengine/ops.h"
#include "support/test_util.h"

namespace {

using ge::Device;
using ge::DType;
using ge::MemoryFormat;
using ge::Tensor;
using ge::gpu::NarrowWalk;

const Device kGpu = Device::cuda(0);

Tensor random_gpu(const ge::Shape& s) {
  return ge::test::random_tensor(s, DType::F16, Device::cpu(), MemoryFormat::NHWC).to(kGpu);
}

enum class Form { kPlain, kTanh, kLeakyReLUThenTanhGradient };

// Bands (R dy rows, 192 / Q - 2) and blocks (two an SM): 40 images of 32 x 32 make 320 bands of
// 4 rows, about one a block, so that most runs begin inside an image; 600 make runs of about 18
// crossing images; 16 x 16 rows of 10 (the last band 6 rows); 8 x 8, one band; rows of 64, bands
// of one row. w holds dx's channels (as the layers keep it) or 8.
struct Case {
  int64_t n, c, wc, p, q;
};
const Case kCases[] = {
    {40, 3, 3, 32, 32}, {600, 3, 3, 32, 32}, {5, 1, 8, 16, 16}, {3, 3, 8, 8, 8}, {7, 3, 3, 12, 64},
};

TEST_CASE("gpu ops: the narrow backward-data gives the same bits carrying rows between bands as recomputing them") {
  GE_REQUIRE_GPU();
  for (const Case& c : kCases)
    for (Form form : {Form::kPlain, Form::kTanh, Form::kLeakyReLUThenTanhGradient}) {
      CAPTURE(c.n);
      CAPTURE(c.q);
      CAPTURE(c.wc);
      CAPTURE(static_cast<int>(form));
      const ge::Shape dx_shape{c.n, c.c, 2 * c.p, 2 * c.q};
      const Tensor dy = random_gpu({c.n, 64, c.p, c.q}), w = random_gpu({64, c.wc, 4, 4});
      const Tensor y_act = random_gpu(dy.shape()), y_out = random_gpu(dx_shape);
      const ge::ops::FusedActivation leaky{ge::ops::Activation::LeakyReLU, 0.2f};
      ge::gpu::DxActivation tanh{{ge::ops::Activation::Tanh, 0.f}, nullptr};
      const bool through = form == Form::kLeakyReLUThenTanhGradient;
      if (through) tanh.y = &y_out;
      auto run = [&](NarrowWalk walk) {
        Tensor dx = ge::test::poisoned_like(y_out, kGpu);  // dx's shape, half NHWC
        REQUIRE(ge::gpu::conv2d_backward_data_narrow(dy, w, dx, through ? &leaky : nullptr, through ? &y_act : nullptr,
                                                     form == Form::kPlain ? nullptr : &tanh, walk));
        return dx.to(Device::cpu());
      };
      const Tensor halo = run(NarrowWalk::kHalo), carry = run(NarrowWalk::kCarry);
      CHECK(ge::test::same_bytes(carry, halo));
      CHECK(ge::test::rel_error(halo, halo) == 0.0);  // written everywhere: no NaN of the poison left
    }
}

}  // namespace
#endif
