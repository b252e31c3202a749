// Reading small device tensors back without stalling the stream (async_readback.h), and the
// queue of logged steps `train` builds on it (pending_logs.h).
#include <vector>

#include "runtime/async_readback.h"
#include "support/test_util.h"
#include "support/trainer_compare.h"
#include "train/pending_logs.h"

using namespace ge;
using namespace ge::test;

namespace {
std::vector<float> floats(const void* p, size_t n) {
  const float* f = static_cast<const float*>(p);
  return std::vector<float>(f, f + n);
}
}  // namespace

TEST_CASE("async readback: copies a CPU tensor at once and refuses misuse") {
  AsyncReadback rb(4 * sizeof(float));
  CHECK_FALSE(rb.ready());
  Tensor t = Tensor::from_doubles({1, 2, 3, 4}, {4}, DType::F32);
  rb.start(t);
  CHECK_THROWS_WITH_AS(rb.start(t), doctest::Contains("has not been taken"), Error);
  t.fill_zero();  // the bytes were taken at start
  CHECK(rb.ready());
  CHECK(floats(rb.take(), 4) == std::vector<float>{1, 2, 3, 4});
  CHECK_THROWS_WITH_AS(rb.take(), doctest::Contains("nothing was started"), Error);
  CHECK_THROWS_WITH_AS(rb.start(Tensor::zeros({5}, DType::F32)), doctest::Contains("larger than 16 bytes"), Error);
}

TEST_CASE("gpu async readback: the copy sees the work queued before it and none queued after") {
  GE_REQUIRE_GPU();
  const int64_t n = 1 << 20;  // large enough that the later fill is still running when start returns
  Tensor first = Tensor::empty({n}, DType::F32), t = Tensor::empty({n}, DType::F32, Device::cuda(0));
  ops::fill_normal(first, 7, 0);
  AsyncReadback rb(n * sizeof(float));
  ops::fill_normal(t, 7, 0);
  rb.start(t);
  ops::fill_normal(t, 8, 0);  // queued behind the copy
  const std::vector<float> got = floats(rb.take(), n), want = first.to_floats();
  CHECK(got == want);
  CHECK_FALSE(rb.pending());
}

TEST_CASE("pending logs: records reach the handler in step order with the values the steps wrote") {
  DcganTrainer trainer(small_trainer_config(OptLevel::O2, Device::cpu(), 8, 16));
  std::vector<PendingLog> seen;
  std::vector<StepRecord> got, expected;
  PendingLogs logs(trainer, [&](const PendingLog& at, const StepRecord& r) {
    seen.push_back(at);
    got.push_back(r);
  });
  for (int64_t s = 0; s < 7; ++s) {
    Tensor real, noise;
    synthetic_step_inputs(s, 4, 16, 5, real, noise);
    trainer.step(real, noise);
    expected.push_back(trainer.record());
    logs.push(s, 0, s, 4 * (s + 1));
    CHECK(seen.size() + 4 >= static_cast<size_t>(s + 1));  // never more than four behind
  }
  logs.drain();
  REQUIRE(seen.size() == 7);
  for (size_t s = 0; s < 7; ++s) {
    CHECK(seen[s].step == static_cast<int64_t>(s));
    CHECK(seen[s].images == 4 * static_cast<int64_t>(s + 1));
    expect_same_record(expected[s], got[s], s);
  }
}
