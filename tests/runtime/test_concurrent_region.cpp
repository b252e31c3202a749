// Two lanes of work on one GPU (concurrent_region.h): what the allocator lets each lane reuse,
// what on_side keeps alive, and whole training steps with and without the side lane.
#include <cstdlib>
#include <string>
#include <vector>

#include "ganengine/allocator.h"
#include "ganengine/concurrent_region.h"
#include "ganengine/ops.h"
#include "ganengine/trainer.h"
#include "runtime/profiling.h"
#include "support/test_util.h"
#include "support/trainer_compare.h"
#if GE_WITH_CUDA
#include "runtime/cuda_check.h"
#include "runtime/cuda_context.h"
#endif

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

// By default a second on_side that keeps tensors first joins (the caller waits for the side
// lane's earlier work) and so releases what the first kept; held, both stay until the join.
TEST_CASE("gpu concurrent region: held - a second on_side keeps the first call's tensors until the join") {
  GE_REQUIRE_GPU();
  const Device d = Device::cuda(0);
  for (const bool hold : {false, true}) {
    CAPTURE(hold);
    ConcurrentRegion region(d);
    region.hold_kept_until_join(hold);
    Tensor first = Tensor::empty(kShape, DType::F32, d), second = Tensor::empty(kShape, DType::F32, d);
    const void* p1 = first.data();
    region.on_side({first}, [&] { first.fill_zero(); });
    first = Tensor();
    region.on_side({second}, [&] { second.fill_zero(); });
    second = Tensor();
    CHECK(side_lane_hands_out(region, p1) == !hold);  // released by the join only without hold
    region.join();
    CHECK(side_lane_hands_out(region, p1));
  }
}

TEST_CASE("gpu concurrent region: the branch lane's blocks and the main lane's stay apart until join_branch") {
  GE_REQUIRE_GPU();
  const Device d = Device::cuda(0);
  ConcurrentRegion region(d);
  Tensor a = Tensor::empty(kShape, DType::F32, d);
  const void* pa = a.data();
  region.fork_branch();
  region.on_branch([&] { a = Tensor(); });  // freed by the branch lane
  Tensor b = Tensor::empty(kShape, DType::F32, d);
  CHECK(b.data() != pa);  // the branch's work may still use it
  // The main lane's side lane frees a block and joins the main lane while the branch runs on.
  const void* pb = b.data();
  region.on_side({}, [&] { b = Tensor(); });
  region.join();
  Tensor branch_block;
  region.on_branch([&] { branch_block = Tensor::empty(kShape, DType::F32, d); });
  CHECK(branch_block.data() == pa);  // the branch lane reuses its own block, not the joined side's
  Tensor main_block = Tensor::empty(kShape, DType::F32, d);
  CHECK(main_block.data() == pb);  // the main lane takes what its side lane freed once joined
  region.on_branch([&] {
    branch_block = Tensor();
    main_block = Tensor();  // the main lane's block, freed on the branch: held for the branch
  });
  CHECK_FALSE(side_lane_hands_out(region, pa));
  region.join();
  CHECK_FALSE(side_lane_hands_out(region, pb));
  region.join_branch();
  // Every lane joined: both blocks are free for any lane.
  CHECK(side_lane_hands_out(region, pa));
  region.join();
  CHECK(side_lane_hands_out(region, pb));
}

TEST_CASE("gpu concurrent region: branch work runs after its fork and its results are there after join_branch") {
  GE_REQUIRE_GPU();
  const Device d = Device::cuda(0);
  Tensor x = Tensor::from_floats({1, 2, 3, 4}, {4}, DType::F32, d);
  Tensor y = Tensor::empty({4}, DType::F32, d);
  Tensor busy = Tensor::zeros({1 << 26}, DType::F32, d);  // 256 MiB of main-lane work before the mark
  ConcurrentRegion::Mark scaled;
  {
    ConcurrentRegion region(d);
    for (int i = 0; i < 8; ++i) ops::scale_inplace(busy, 0.5f);
    ops::scale_inplace(x, 3.f);
    scaled = region.mark();
    region.fork_branch();
    // The main lane frees a block while the branch is open, and joins its side lane: the block
    // stays held for the main lane, whose work may still use it, and is not handed to the branch.
    Tensor before = Tensor::empty(kShape, DType::F32, d);
    const void* pbefore = before.data();
    before.fill_zero();
    before = Tensor();
    region.on_side({}, [] {});
    region.join();
    region.on_branch([&] {
      y.copy_from(x);
      ops::scale_inplace(y, 2.f);
      const Tensor taken = Tensor::empty(kShape, DType::F32, d);
      CHECK(taken.data() != pbefore);
    });
    region.join_branch();
    CHECK(y.to_floats() == std::vector<float>{6, 12, 18, 24});
    region.wait(scaled);  // a mark of this region, already waited for: nothing changes
  }
  CHECK(x.to_floats() == std::vector<float>{3, 6, 9, 12});
  // A mark of an earlier region is already satisfied, as is an empty one; a region that is off
  // makes empty marks.
  ConcurrentRegion next(d);
  next.wait(scaled);
  next.wait(ConcurrentRegion::Mark{});
  ConcurrentRegion off(Device::cpu());
  CHECK(off.mark().region == 0);
}

#if GE_WITH_CUDA
// The branch lane's side lane one priority below the branch lane (TrainerConfig::branch_side_below):
// its stream is re-created with the new priority, work on it still runs, and an open region
// refuses the change (its events and kept tensors are on the old stream).
TEST_CASE("gpu lanes: the branch side lane goes one priority below the branch lane and back") {
  GE_REQUIRE_GPU();
  const Device d = Device::cuda(0);
  gpu::CudaContext& ctx = gpu::context(0);
  auto priority = [&](gpu::Lane l) {
    int p = 0;
    CUDA_CHECK(cudaStreamGetPriority(ctx.lane(l).stream, &p));
    return p;
  };
  int least = 0, greatest = 0;
  CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  const bool ranked = greatest < least;
  ConcurrentRegion::rank_branch_side_below_branch(d, false);
  CHECK(priority(gpu::Lane::BranchSide) == priority(gpu::Lane::Branch));
  ConcurrentRegion::rank_branch_side_below_branch(d, true);
  CHECK(priority(gpu::Lane::BranchSide) == priority(gpu::Lane::Branch) + (ranked ? 1 : 0));
  if (ranked) CHECK(priority(gpu::Lane::Branch) == greatest);
  Tensor x = Tensor::from_floats({1, 2}, {2}, DType::F32, d);
  {
    ConcurrentRegion region(d);
    CHECK_THROWS_AS(ConcurrentRegion::rank_branch_side_below_branch(d, false), Error);
    region.fork_branch();
    region.on_branch([&] { region.on_side({}, [&] { ops::scale_inplace(x, 3.f); }); });
  }
  CHECK(x.to_floats() == std::vector<float>{3, 6});
  ConcurrentRegion::rank_branch_side_below_branch(d, false);
  CHECK(priority(gpu::Lane::BranchSide) == priority(gpu::Lane::Branch));
}
#endif

TEST_CASE("gpu trainer lanes: steps with the side lane and the fake branch are bitwise the steps without them") {
  GE_REQUIRE_GPU();
  DeterministicConvolutions deterministic;
  using Choice = TrainerConfig::LaneChoice;
  for (OptLevel level : {OptLevel::O0, OptLevel::O1, OptLevel::O2, OptLevel::O3, OptLevel::O4}) {
    for (Choice branch : {Choice::Off, Choice::On}) {
      for (bool graph : {false, true}) {
        // Filter gradients' inputs held to the pass's end, or released as the next one is handed
        // over, alternately.
        const Choice hold = (branch == Choice::On) == graph ? Choice::On : Choice::Off;
        // One string: doctest prints a const char* as its address.
        const std::string config = std::string(opt_level_name(level)) + (graph ? " graph" : " eager") +
                                   (branch == Choice::On ? ", fake branch" : "") +
                                   (hold == Choice::On ? ", held" : ", released");
        INFO(config);
        TrainerConfig cfg = small_trainer_config(level, Device::cuda(0), 16, 32);
        cfg.cuda_graph = graph;
        cfg.side_lane = Choice::On;
        cfg.fake_branch = branch;
        cfg.side_hold = hold;
        TrainerConfig serial = cfg;
        serial.side_lane = Choice::Off;
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
