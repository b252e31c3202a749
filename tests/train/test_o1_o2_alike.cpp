// O1 and O2 run the same arithmetic (src/amp/policy.cpp): half convolutions on half copies of f32
// weights, BatchNorm and the losses in f32, f32 Adam on f32 weights, one dynamic scaler per loss.
// They differ only in where the half copy lives: remade from the f32 weight at each forward (O1,
// as Apex's patched functions cast) or kept beside the f32 master and refreshed by Adam (O2). A
// weight rounds to the same half either way, so the two train bit for bit alike; the quality
// protocol's identical O1 and O2 scores (BENCHMARKS.md) are this, not chance.
#include "ganengine/state_dict.h"
#include "ganengine/trainer.h"
#include "support/test_util.h"
#include "support/trainer_compare.h"

using namespace ge;
using namespace ge::test;

namespace {

void expect_o1_o2_alike(Device device) {
  DeterministicConvolutions deterministic;
  DcganTrainer o1(small_trainer_config(OptLevel::O1, device, 16, 32));
  DcganTrainer o2(small_trainer_config(OptLevel::O2, device, 16, 32));
  int64_t overflows = 0;
  for (int64_t s = 0; s < 6; ++s) {
    Tensor real, noise;
    synthetic_step_inputs(s, 8, 32, 29, real, noise);
    o1.step(real, noise);
    o2.step(real, noise);
    expect_same_record(o1.record(), o2.record(), static_cast<size_t>(s));
    for (bool skipped : o1.record().overflow) overflows += skipped;
  }
  // The first steps at the initial scale of 2^16 overflow: the skips are compared too.
  CHECK(overflows > 0);
  expect_same_tensors(nn::state_dict(o2.generator()), nn::state_dict(o1.generator()));
  expect_same_tensors(nn::state_dict(o2.discriminator()), nn::state_dict(o1.discriminator()));
}

}  // namespace

TEST_CASE("trainer: O1 and O2 steps are bitwise alike on the CPU") { expect_o1_o2_alike(Device::cpu()); }

TEST_CASE("gpu trainer: O1 and O2 steps are bitwise alike") {
  GE_REQUIRE_GPU();
  expect_o1_o2_alike(Device::cuda(0));
}
