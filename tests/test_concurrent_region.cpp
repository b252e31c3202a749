// Two lanes of work on one GPU (concurrent_region.h): what the allocator lets each lane reuse,
// what on_side keeps alive, and whole training steps with and without the side lane.
#include <vector>

#include "ganengine/allocator.h"
#include "ganengine/concurrent_region.h"
#include "ganengine/ops.h"
#include "ganengine/profiling.h"
#include "ganengine/trainer.h"
#include "test_util.h"
#include "trainer_compare.h"

using namespace ge;
using namespace ge::test;

namespace {
// A size class no other test uses: 150001 floats = 600004 bytes -> 600064.
const Shape kShape{150001};

// Tensors of kShape allocated on the side lane until the allocator has to call cudaMalloc for
// one (every cached block the side lane may take is then taken): was this block among them?
bool side_lane_hands_out(ConcurrentRegion& region, const void* block) {
  std::vector<Tensor> taken;
  region.on_side({}, [&] {
    const size_t mallocs = cuda_allocator_stats(0).cuda_malloc_calls;
    while (cuda_allocator_stats(0).cuda_malloc_calls == mallocs && taken.size() < 1000)
      taken.push_back(Tensor::empty(kShape, DType::F32, Device::cuda(0)));
  });
  for (const Tensor& t : taken)
    if (t.data() == block) return true;
  return false;
}
}  // namespace

TEST_CASE("profile phases: nested ranges name their path and closing one returns to its parent") {
  CHECK(current_profile_phase().empty());
  {
    ProfileRange outer("train_step");
    CHECK(current_profile_phase() == "train_step");
    {
      ProfileRange inner(std::string("main.0 Conv2d forward"));
      CHECK(current_profile_phase() == "train_step/main.0 Conv2d forward");
    }
    CHECK(current_profile_phase() == "train_step");
  }
  CHECK(current_profile_phase().empty());
}

TEST_CASE("gpu concurrent region: a block freed on one lane is reused only by that lane until they join") {
  GE_REQUIRE_GPU();
  const Device d = Device::cuda(0);
  ConcurrentRegion region(d);
  CHECK(ConcurrentRegion::active(d) == &region);
  Tensor a = Tensor::empty(kShape, DType::F32, d);
  const void* pa = a.data();
  region.on_side({}, [&] { a = Tensor(); });  // freed by the side lane
  Tensor b = Tensor::empty(kShape, DType::F32, d);
  CHECK(b.data() != pa);  // the main lane may not take it: side work may still use it
  const void* pb = b.data();
  b = Tensor();
  Tensor c;
  region.on_side({}, [&] { c = Tensor::empty(kShape, DType::F32, d); });
  CHECK(c.data() == pa);  // the side lane reuses its own block
  Tensor b2 = Tensor::empty(kShape, DType::F32, d);
  CHECK(b2.data() == pb);  // and the main lane its own
  c = Tensor();
  b2 = Tensor();
  region.join();
  // Joined: both blocks are free for either lane.
  CHECK(side_lane_hands_out(region, pa));
  region.join();
  CHECK(side_lane_hands_out(region, pb));
  ConcurrentRegion other(Device::cpu());  // a CPU region runs its work in place and is never active
  CHECK(ConcurrentRegion::active(Device::cpu()) == nullptr);
}

TEST_CASE("gpu concurrent region: on_side keeps its tensors until the join and its results are there after it") {
  GE_REQUIRE_GPU();
  const Device d = Device::cuda(0);
  Tensor x = Tensor::from_floats({1, 2, 3, 4}, {4}, DType::F32, d);
  {
    ConcurrentRegion region(d);
    Tensor t = Tensor::empty(kShape, DType::F32, d);
    const void* pt = t.data();
    ops::scale_inplace(x, 3.f);  // main lane first: the side lane's work comes after it
    region.on_side({t}, [&] {
      t.fill_zero();
      ops::scale_inplace(x, 2.f);
    });
    t = Tensor();  // the caller lets go; the side lane's work may still be writing it
    Tensor u = Tensor::empty(kShape, DType::F32, d);
    CHECK(u.data() != pt);  // kept: not handed out, not even to the side lane
    CHECK_FALSE(side_lane_hands_out(region, pt));
    u = Tensor();
    region.join();
    CHECK(side_lane_hands_out(region, pt));  // released by the join
  }
  CHECK(ConcurrentRegion::active(d) == nullptr);
  CHECK(x.to_floats() == std::vector<float>{6, 12, 18, 24});
}

TEST_CASE("gpu trainer lanes: steps with the side lane are bitwise the steps without it") {
  GE_REQUIRE_GPU();
  DeterministicConvolutions deterministic;
  for (OptLevel level : {OptLevel::O0, OptLevel::O2, OptLevel::O3}) {
    for (bool graph : {false, true}) {
      INFO(opt_level_name(level), graph ? " graph" : " eager");
      TrainerConfig cfg = small_trainer_config(level, Device::cuda(0), 16, 32);
      cfg.cuda_graph = graph;
      cfg.side_lane = TrainerConfig::SideLane::On;
      TrainerConfig serial = cfg;
      serial.side_lane = TrainerConfig::SideLane::Off;
      // One trainer after the other: two graph pools on one device would take each other's
      // cached blocks between warm-up and capture.
      std::vector<StepRecord> records[2];
      DcganTrainer a(cfg), b(serial);
      for (DcganTrainer* t : {&a, &b})
        for (int64_t s = 0; s < 7; ++s) {
          Tensor real, noise;
          synthetic_step_inputs(s, 8, 32, 19, real, noise);
          t->step(real, noise);
          records[t == &b].push_back(t->record());
        }
      for (size_t s = 0; s < 7; ++s) expect_same_record(records[0][s], records[1][s], s);
      expect_same_state(a, b);
      if (graph) CHECK(a.graph_stats().replays == 4);
    }
  }
}

TEST_CASE("gpu allocator: the peak breakdown names the phase that allocated what was in use") {
  GE_REQUIRE_GPU();
  const Device d = Device::cuda(0);
  cuda_allocator_reset_peak(0);
  cuda_allocator_trace_peak(0, true);
  {
    ProfileRange phase("breakdown_test_phase");
    Tensor big = Tensor::empty({1 << 20}, DType::F32, d);  // 4 MiB, a new peak
  }
  const std::string report = cuda_allocator_peak_breakdown(0);
  INFO(report);
  CHECK(report.find("reached in breakdown_test_phase") != std::string::npos);
  CHECK(report.find("4.00 MiB  breakdown_test_phase") != std::string::npos);
  CHECK(report.find("while each phase allocated:  breakdown_test_phase ") != std::string::npos);
  cuda_allocator_trace_peak(0, false);
  CHECK(cuda_allocator_peak_breakdown(0).empty());
}
