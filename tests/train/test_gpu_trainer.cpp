// The whole training step on the GPU: against the CPU trainer, and without cudaMalloc once warm.
#include <cmath>
#include <cstring>

#include "core/backend.h"
#include "core/tuning_policy.h"
#include "ganengine/allocator.h"
#include "ganengine/concurrent_region.h"
#include "ganengine/cuda_graph.h"
#include "ganengine/ops.h"
#include "ganengine/state_dict.h"
#include "ganengine/trainer.h"
#include "support/cli_runner.h"
#include "support/temp_dir.h"
#include "support/test_util.h"
#include "support/trainer_compare.h"
#if GE_WITH_CUDA
#include "runtime/cuda_check.h"
#include "runtime/cuda_context.h"
#endif

using namespace ge;
using namespace ge::test;

namespace {

TrainerConfig small_config(OptLevel level, Device d, DType half = DType::F16) {
  return small_trainer_config(level, d, 16, 32, half);
}

void batch(int64_t step, int64_t n, Tensor& real, Tensor& noise) {
  synthetic_step_inputs(step, n, 32, 11, real, noise);
}

}  // namespace

// The side lane's automatic range (tuning_policy.h): up to 2048 images of 64x64 with half
// convolutions (O1-O4), up to 256 with fp32 ones (O0).
TEST_CASE("trainer: the side lane's automatic range depends on the convolutions' precision") {
  const TuningPolicy t = default_tuning();
  for (OptLevel level : {OptLevel::O0, OptLevel::O1, OptLevel::O2, OptLevel::O3, OptLevel::O4}) {
    INFO(opt_level_name(level));
    const int64_t images = t.side_lane_max_pixels(resolve_policy(level).compute_dtype == DType::F32) / (64 * 64);
    CHECK(images == (level == OptLevel::O0 ? 256 : 2048));
  }
  AmpOverrides bf16;
  bf16.half = DType::BF16;
  CHECK(t.side_lane_max_pixels(resolve_policy(OptLevel::O2, bf16).compute_dtype == DType::F32) == 2048 * 64 * 64);
}

TEST_CASE("gpu trainer: O0 steps on the GPU follow the CPU trainer") {
  GE_REQUIRE_GPU();
  DcganTrainer cpu(small_config(OptLevel::O0, Device::cpu())), gpu(small_config(OptLevel::O0, Device::cuda(0)));
  for (int64_t s = 0; s < 6; ++s) {
    Tensor real, noise;
    batch(s, 8, real, noise);
    cpu.step(real, noise);
    gpu.step(real, noise);
    const StepRecord a = cpu.record(), b = gpu.record();
    const float ca[] = {a.errD_real, a.errD_fake, a.errG, a.D_x, a.D_G_z1, a.D_G_z2};
    const float cb[] = {b.errD_real, b.errD_fake, b.errG, b.D_x, b.D_G_z1, b.D_G_z2};
    for (int c = 0; c < 6; ++c) {
      INFO("step ", s, " column ", c, ": cpu ", ca[c], " gpu ", cb[c]);
      CHECK(std::fabs(ca[c] - cb[c]) <= 1e-4 * std::fabs(ca[c]) + 1e-6);
    }
  }
  auto wa = nn::state_dict(cpu.generator()), wb = nn::state_dict(gpu.generator());
  for (const auto& entry : wa) {
    const std::string& k = entry.first;
    const Tensor& t = entry.second;
    INFO(k);
    CHECK(rel_error(t.to_doubles(), wb.at(k).to_doubles()) < 1e-4);
  }
}

TEST_CASE("gpu trainer: every opt level and bf16 trains with finite losses and no cudaMalloc once warm") {
  GE_REQUIRE_GPU();
  struct Run {
    OptLevel level;
    DType half;
  };
  for (Run run : {Run{OptLevel::O0, DType::F16}, Run{OptLevel::O1, DType::F16}, Run{OptLevel::O2, DType::F16},
                  Run{OptLevel::O3, DType::F16}, Run{OptLevel::O4, DType::F16}, Run{OptLevel::O2, DType::BF16}}) {
    INFO(opt_level_name(run.level), " ", dtype_name(run.half));
    DcganTrainer t(small_config(run.level, Device::cuda(0), run.half));
    Tensor real, noise;
    for (int64_t s = 0; s < 8; ++s) {
      if (s == 3) {
        const AllocatorStats before = cuda_allocator_stats(0);
        for (int64_t k = 0; k < 4; ++k, ++s) {
          batch(s, 8, real, noise);
          t.step(real, noise);
        }
        CHECK(cuda_allocator_stats(0).cuda_malloc_calls == before.cuda_malloc_calls);
      }
      batch(s, 8, real, noise);
      t.step(real, noise);
      const StepRecord r = t.record();
      CHECK(std::isfinite(r.errD_real + r.errD_fake + r.errG));
      CHECK(r.D_x > 0);
      CHECK(r.D_x < 1);
    }
  }
}

// ---- CUDA graph mode (TrainerConfig::cuda_graph): the captured step must be the eager step,
// bit for bit. Both trainers of a comparison run in one process, so they share cuDNN's cached
// algorithm per shape; deterministic algorithms are requested because cuDNN's fastest ones may
// accumulate with atomics, which would make even two eager runs differ in the last bits.

namespace {

TrainerConfig graph_config(TrainerConfig cfg) {
  cfg.cuda_graph = true;
  return cfg;
}

// Runs one step per batch size (the same inputs for every trainer) and keeps every record.
std::vector<StepRecord> run_steps(DcganTrainer& t, const std::vector<int64_t>& sizes, int image_size = 32) {
  std::vector<StepRecord> out;
  for (size_t s = 0; s < sizes.size(); ++s) {
    Tensor real, noise;
    synthetic_step_inputs(static_cast<int64_t>(s), sizes[s], image_size, 11, real, noise);
    t.step(real, noise);
    out.push_back(t.record());
  }
  return out;
}

// Returns what the graph trainer's graph mode did.
DcganTrainer::GraphStats expect_graph_matches_eager(const TrainerConfig& cfg, const std::vector<int64_t>& sizes) {
  DcganTrainer eager(cfg), graph(graph_config(cfg));
  const std::vector<StepRecord> re = run_steps(eager, sizes, cfg.net.image_size),
                                rg = run_steps(graph, sizes, cfg.net.image_size);
  for (size_t s = 0; s < sizes.size(); ++s) expect_same_record(re[s], rg[s], s);
  expect_same_state(eager, graph);
  CHECK(eager.graph_stats().captures == 0);
  CHECK(eager.graph_stats().replays == 0);
  return graph.graph_stats();
}

}  // namespace

TEST_CASE("gpu trainer graph: 8 replayed steps are bitwise the eager steps at O0 O1 O2 O3 and O4") {
  GE_REQUIRE_GPU();
  DeterministicConvolutions deterministic;
  for (OptLevel level : {OptLevel::O0, OptLevel::O1, OptLevel::O2, OptLevel::O3, OptLevel::O4}) {
    INFO(opt_level_name(level));
    const TrainerConfig cfg = small_config(level, Device::cuda(0));
    const DcganTrainer::GraphStats stats = expect_graph_matches_eager(cfg, std::vector<int64_t>(8, 8));
    // The graph really ran: 3 eager warm-up steps, then one capture and 5 launches.
    CHECK(stats.eager_steps == 3);
    CHECK(stats.captures == 1);
    CHECK(stats.replays == 5);
    CHECK(stats.nodes > 0);
  }
}

// At 64x64 with 64 channels O4's D reads its second layer's output gradient as FP8 codes on a
// compute capability 9.0 GPU (the BatchNorm writes them beside the rounded gradient): captured
// with the rest of the step.
TEST_CASE("gpu trainer graph: at O4 and 64x64 replayed steps are bitwise the eager steps") {
  GE_REQUIRE_GPU();
  DeterministicConvolutions deterministic;
  const DcganTrainer::GraphStats stats =
      expect_graph_matches_eager(small_trainer_config(OptLevel::O4, Device::cuda(0), 64, 64), {8, 8, 8, 8, 8, 8});
  CHECK(stats.captures == 1);
  CHECK(stats.replays == 3);
}

// With a static loss scale each optimizer unscales its last loss's gradients as its update reads
// them (TrainerConfig::optimizer_unscales_last_loss): the same steps, records (the overflow flags
// too, also when an overflow is forced) and state (but the f32 gradients, which then lack the last
// loss's part) as a separate unscale pass, eager and replayed, with D's fake loss accumulated on
// the fake branch or after the real one.
TEST_CASE("gpu trainer: Adam unscaling the last loss's gradients gives bitwise the separate unscale's steps") {
  GE_REQUIRE_GPU();
  DeterministicConvolutions deterministic;
  using Choice = TrainerConfig::LaneChoice;
  for (OptLevel level : {OptLevel::O0, OptLevel::O3})
    for (bool graph : {false, true})
      for (Choice branch : {Choice::Off, Choice::On}) {
        const std::string config = std::string(opt_level_name(level)) + (graph ? " graph" : " eager") +
                                   (branch == Choice::On ? ", fake branch" : "");
        INFO(config);
        TrainerConfig fused = small_trainer_config(level, Device::cuda(0), 16, 32);
        fused.cuda_graph = graph;
        fused.side_lane = branch;
        fused.fake_branch = branch;
        TrainerConfig apart = fused;
        apart.optimizer_unscales_last_loss = false;
        std::vector<StepRecord> records[2];
        DcganTrainer a(fused), b(apart);
        for (DcganTrainer* t : {&a, &b})
          for (int64_t s = 0; s < 6; ++s) {
            if (!graph && s == 2) t->force_overflow_next_step(kLossDFake);
            if (!graph && s == 3) t->force_overflow_next_step(kLossG);
            Tensor real, noise;
            synthetic_step_inputs(s, 8, 32, 23, real, noise);
            t->step(real, noise);
            records[t == &b].push_back(t->record());
          }
        for (size_t s = 0; s < 6; ++s) expect_same_record(records[0][s], records[1][s], s);
        if (!graph) {
          CHECK(records[0][2].overflow[kLossDFake]);
          CHECK(records[0][3].overflow[kLossG]);
        }
        // The fused trainer's Param::grad lacks the last loss's part (TrainerConfig).
        expect_same_state(a, b, /*with_buffers=*/true, /*with_grads=*/false);
      }
}

#if GE_WITH_CUDA  // switches the GPU backend's launches
// Our kernels launch with programmatic dependent launch: a kernel's blocks may be placed while the
// kernel before it finishes, and wait for it before touching memory. A kernel that touched memory
// before waiting would read stale values or overwrite ones still being read: the steps would
// differ from those of kernels launched strictly one after another.
TEST_CASE("gpu trainer graph: steps whose kernels launch early are bitwise steps launched one after another") {
  GE_REQUIRE_GPU();
  DeterministicConvolutions deterministic;
  for (OptLevel level : {OptLevel::O2, OptLevel::O3}) {
    INFO(opt_level_name(level));
    const TrainerConfig cfg = graph_config(small_config(level, Device::cuda(0)));
    const std::vector<int64_t> sizes(8, 8);
    gpu::set_early_launch(gpu::EarlyLaunch::Off);
    DcganTrainer in_turn(cfg);
    const std::vector<StepRecord> a = run_steps(in_turn, sizes);
    gpu::set_early_launch(gpu::EarlyLaunch::On);
    DcganTrainer early(cfg);
    const std::vector<StepRecord> b = run_steps(early, sizes);
    gpu::set_early_launch(gpu::EarlyLaunch::On);
    for (size_t s = 0; s < sizes.size(); ++s) expect_same_record(a[s], b[s], s);
    expect_same_state(in_turn, early);
    CHECK(early.graph_stats().replays == 5);
  }
}
#endif

TEST_CASE("gpu trainer graph: dynamic-scale overflows and skipped steps inside the graph match eager") {
  GE_REQUIRE_GPU();
  DeterministicConvolutions deterministic;
  TrainerConfig cfg = small_config(OptLevel::O2, Device::cuda(0));
  // 2^24: the scaled fp16 gradients overflow for real, and the scale halves step after step until
  // they fit; replayed steps decide overflow, skip and the new scale on the device.
  cfg.policy.initial_loss_scale = 16777216.f;
  const std::vector<int64_t> sizes(14, 8);
  DcganTrainer eager(cfg), graph(graph_config(cfg));
  const std::vector<StepRecord> re = run_steps(eager, sizes, cfg.net.image_size),
                                rg = run_steps(graph, sizes, cfg.net.image_size);
  bool replay_overflowed = false, replay_clean = false;
  for (size_t s = 0; s < sizes.size(); ++s) {
    expect_same_record(re[s], rg[s], s);
    if (s >= 3) {  // steps 0..2 are the eager warm-up
      replay_overflowed = replay_overflowed || rg[s].overflow[0] || rg[s].overflow[1] || rg[s].overflow[2];
      replay_clean = replay_clean || !(rg[s].overflow[0] || rg[s].overflow[1] || rg[s].overflow[2]);
    }
  }
  expect_same_state(eager, graph);
  CHECK(graph.graph_stats().replays == 11);
  CHECK(replay_overflowed);
  // The scale comes down far enough for replayed steps to update again: the scenario must reach
  // them, or skipped steps alone would be compared. Deterministic (fixed inputs and weights): the
  // same steps on the CPU overflow until step 9 and run clean at steps 10 to 13.
  CHECK(replay_clean);
  CHECK(re[0].overflow[0]);  // at 2^24 the very first step overflows
  CHECK(re[0].scale[0] == 8388608.f);
}

TEST_CASE("gpu trainer graph: no cudaMalloc across 10 replays and the graph mode rejects host-side hooks") {
  GE_REQUIRE_GPU();
  DcganTrainer t(graph_config(small_config(OptLevel::O2, Device::cuda(0))));
  CHECK_THROWS_WITH_AS(t.force_overflow_next_step(kLossG), doctest::Contains("--cuda-graph"), Error);
  Tensor real, noise;
  for (int64_t s = 0; s < 4; ++s) {  // 3 warm-up steps, then the capture and its first launch
    batch(s, 8, real, noise);
    t.step(real, noise);
  }
  REQUIRE(t.graph_stats().captures == 1);
  synchronize(Device::cuda(0));
  const AllocatorStats before = cuda_allocator_stats(0);
  std::vector<float> losses;
  for (int64_t s = 4; s < 14; ++s) {
    batch(s, 8, real, noise);
    t.step(real, noise);
    const StepRecord r = t.record();
    CHECK(std::isfinite(r.errD_real + r.errD_fake + r.errG));
    losses.push_back(r.errD_real);
  }
  const AllocatorStats after = cuda_allocator_stats(0);
  CHECK(after.cuda_malloc_calls == before.cuda_malloc_calls);
  CHECK(after.bytes_reserved == before.bytes_reserved);
  CHECK(t.graph_stats().replays == 11);
  CHECK(t.graph_stats().eager_steps == 3);
  // Each replay read its own batch (a graph stuck on the captured inputs would repeat itself).
  CHECK(losses[0] != losses[1]);
}

TEST_CASE("gpu trainer graph: batches of another size run eagerly before and after the capture and still match") {
  GE_REQUIRE_GPU();
  DeterministicConvolutions deterministic;
  // A 5 inside the warm-up restarts it; after the capture, 5 and 3 run eagerly between replays.
  const std::vector<int64_t> sizes{8, 8, 5, 8, 8, 8, 8, 8, 5, 8, 3, 8};
  const TrainerConfig cfg = small_config(OptLevel::O2, Device::cuda(0));
  const DcganTrainer::GraphStats stats = expect_graph_matches_eager(cfg, sizes);
  CHECK(stats.eager_steps == 8);  // 8 8 5 8 8 8, then 5 and 3
  CHECK(stats.captures == 1);
  CHECK(stats.replays == 4);
}

TEST_CASE("gpu trainer graph: switching BatchNorm running-statistics updates off falls back to eager") {
  GE_REQUIRE_GPU();
  DeterministicConvolutions deterministic;
  const TrainerConfig cfg = small_config(OptLevel::O1, Device::cuda(0));
  DcganTrainer eager(cfg), graph(graph_config(cfg));
  for (DcganTrainer* t : {&eager, &graph}) {
    run_steps(*t, std::vector<int64_t>(5, 8));
    t->generator().set_update_running_stats(false);
    Tensor real, noise;
    batch(5, 8, real, noise);
    t->step(real, noise);
    t->generator().set_update_running_stats(true);
    batch(6, 8, real, noise);
    t->step(real, noise);
  }
  expect_same_record(eager.record(), graph.record(), 6);
  expect_same_state(eager, graph);
  CHECK(graph.graph_stats().eager_steps == 4);
  CHECK(graph.graph_stats().replays == 3);
}

TEST_CASE("gpu trainer graph: inputs bound with bind_graph_inputs are read in place and match eager") {
  GE_REQUIRE_GPU();
  DeterministicConvolutions deterministic;
  const TrainerConfig cfg = small_config(OptLevel::O2, Device::cuda(0));
  DcganTrainer eager(cfg), graph(graph_config(cfg));
  CHECK_THROWS_WITH_AS(eager.bind_graph_inputs(Tensor(), Tensor()), doctest::Contains("CUDA graph mode"), Error);
  const Device d = Device::cuda(0);
  Tensor real0, noise0;
  batch(0, 8, real0, noise0);
  CHECK_THROWS_WITH_AS(graph.bind_graph_inputs(real0, noise0), doctest::Contains("must be on the trainer"), Error);
  Tensor bound_real = real0.to(d), bound_noise = noise0.to(d);
  graph.bind_graph_inputs(bound_real, bound_noise);
  for (int64_t s = 0; s < 8; ++s) {
    Tensor real, noise;
    batch(s, 8, real, noise);
    eager.step(real, noise);
    bound_real.copy_from(real);  // the caller refills the bound tensors
    bound_noise.copy_from(noise);
    graph.step(bound_real, bound_noise);
    expect_same_record(eager.record(), graph.record(), static_cast<size_t>(s));
  }
  expect_same_state(eager, graph);
  CHECK(graph.graph_stats().replays == 5);
  // Another tensor of the bound shapes is refused (the graph would not read it).
  Tensor other = bound_real.clone();
  CHECK_THROWS_WITH_AS(graph.step(other, bound_noise), doctest::Contains("bind_graph_inputs"), Error);
  CHECK_THROWS_WITH_AS(graph.bind_graph_inputs(bound_real, bound_noise), doctest::Contains("before the first step"),
                       Error);
  // A batch of another shape still runs eagerly.
  Tensor real5, noise5;
  batch(8, 5, real5, noise5);
  eager.step(real5, noise5);
  graph.step(real5, noise5);
  expect_same_record(eager.record(), graph.record(), 8);
}

TEST_CASE("gpu cuda graph: capture records without running and a failed capture leaves the stream usable") {
  GE_REQUIRE_GPU();
  const Device d = Device::cuda(0);
  Tensor x = Tensor::from_floats({1, 2, 3, 4}, {4}, DType::F32, d);
  CudaGraph g;
  g.capture(d, [&] { ops::scale_inplace(x, 2.f); });
  REQUIRE(g.captured());
  CHECK(x.to_floats() == std::vector<float>{1, 2, 3, 4});
  g.replay();
  g.replay();
  CHECK(x.to_floats() == std::vector<float>{4, 8, 12, 16});
  // A host round trip cannot be captured: the error surfaces, nothing stays captured, and
  // the stream takes ordinary work again.
  CudaGraph bad;
  CHECK_THROWS_AS(bad.capture(d,
                              [&] {
                                ops::scale_inplace(x, 2.f);
                                (void)x.to_doubles();
                              }),
                  Error);
  CHECK_FALSE(bad.captured());
  ops::scale_inplace(x, 0.5f);
  CHECK(x.to_floats() == std::vector<float>{2, 4, 6, 8});
  g.replay();
  CHECK(x.to_floats() == std::vector<float>{4, 8, 12, 16});
}

#if GE_WITH_CUDA  // cudaMemsetAsync inside the capture
// cuDNN clears counters with cudaMemsetAsync; the captured graph runs small memsets as kernels
// (src/runtime/graph_memsets.h). They must write the same bytes, in the same order with the
// work around them.
TEST_CASE("gpu cuda graph: small memsets replay as kernels that write the same bytes in order") {
  GE_REQUIRE_GPU();
  const Device d = Device::cuda(0);
  std::vector<float> start(64);
  for (int i = 0; i < 64; ++i) start[static_cast<size_t>(i)] = static_cast<float>(i + 1);
  Tensor x = Tensor::from_floats(start, {64}, DType::F32, d);
  char* bytes = static_cast<char*>(x.data());
  CudaGraph g;
  g.capture(d, [&] {
    cudaStream_t stream = gpu::context(0).stream();
    ops::scale_inplace(x, 2.f);
    CUDA_CHECK(cudaMemsetAsync(bytes + 16, 0, 12, stream));              // floats 4..6
    CUDA_CHECK(cudaMemset2DAsync(bytes + 64, 48, 0x3f, 20, 3, stream));  // 3 rows of 20 bytes, pitch 48
    ops::scale_inplace(x, 0.5f);
  });
  REQUIRE(g.captured());
  CHECK(g.memsets_replaced() == 2);
  CHECK(x.to_floats() == start);  // recorded, not run

  std::vector<float> expected = start;
  for (float& v : expected) v *= 2.f;
  std::vector<char> image(64 * sizeof(float));
  std::memcpy(image.data(), expected.data(), image.size());
  std::memset(image.data() + 16, 0, 12);
  for (int row = 0; row < 3; ++row) std::memset(image.data() + 64 + row * 48, 0x3f, 20);
  std::memcpy(expected.data(), image.data(), image.size());
  for (float& v : expected) v *= 0.5f;
  g.replay();
  CHECK(x.to_floats() == expected);
}
#endif

#if GE_WITH_CUDA  // cudaMemsetAsync inside the capture
// cuDNN's counter memsets wait for the workspace's previous user instead of the BatchNorm
// kernels captured between (src/runtime/graph_memset_hoist.h); the work after a moved memset
// still waits for those kernels, and memsets outside a workspace stay where they were.
TEST_CASE("gpu cuda graph: a workspace memset waits for the workspace's last user and not the kernels between") {
  GE_REQUIRE_GPU();
  const Device d = Device::cuda(0);
  gpu::CudaContext& ctx = gpu::context(0);
  char* ws = static_cast<char*>(gpu::workspace(ctx, 1 << 20));
  Tensor y = Tensor::from_floats({-1, 2, -3, 4, 5, -6, 7, -8}, {8}, DType::F32, d);
  Tensor z = Tensor::empty({8}, DType::F32, d);
  Tensor outside = Tensor::from_floats({1, 1, 1, 1}, {4}, DType::F32, d);
  CudaGraph g;
  g.capture(d, [&] {
    cudaStream_t stream = ctx.stream();
    CUDA_CHECK(cudaMemsetAsync(ws, 0x11, 8, stream));  // the workspace's previous user
    ops::activation_forward(ops::Activation::ReLU, y, z);
    CUDA_CHECK(cudaMemsetAsync(ws, 0x22, 4, stream));  // moved up: waits for the first memset
    ops::scale_inplace(z, 3.f);                        // reads the activation's output
    ops::activation_forward(ops::Activation::ReLU, z, z);
    CUDA_CHECK(cudaMemsetAsync(outside.data(), 0, 8, stream));  // not a workspace: stays
  });
  REQUIRE(g.captured());
  CHECK(g.memsets_hoisted() == 1);
  CHECK(g.memsets_replaced() == 3);
  g.replay();
  CHECK(z.to_floats() == std::vector<float>{0, 6, 0, 12, 15, 0, 21, 0});
  CHECK(outside.to_floats() == std::vector<float>{0, 0, 1, 1});
  unsigned char bytes[8];
  CUDA_CHECK(cudaMemcpy(bytes, ws, sizeof bytes, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 8; ++i) {
    CAPTURE(i);
    CHECK(bytes[i] == (i < 4 ? 0x22 : 0x11));
  }
}
#endif

#if GE_WITH_CUDA
// Work captured on two lanes gives the graph a root on each; one of them stays the graph's entry
// point and the other waits for it (src/runtime/graph_roots.h): the replay computes the same.
TEST_CASE("gpu cuda graph: roots on two lanes become one entry point and the replay computes the same") {
  GE_REQUIRE_GPU();
  const Device d = Device::cuda(0);
  Tensor a = Tensor::from_floats({1, 2, 3, 4}, {4}, DType::F32, d);
  Tensor b = Tensor::from_floats({5, 6, 7, 8}, {4}, DType::F32, d);
  CudaGraph two;
  two.capture(d, [&] {
    ConcurrentRegion region(d);
    region.fork_branch();
    region.on_branch([&] { ops::scale_inplace(b, 3.f); });
    ops::scale_inplace(a, 2.f);
    region.join_branch();
    ops::scale_inplace(a, 10.f);  // after both
  });
  REQUIRE(two.captured());
  CHECK(two.roots_joined() == 1);
  two.replay();
  two.replay();
  CHECK(a.to_floats() == std::vector<float>{400, 800, 1200, 1600});
  CHECK(b.to_floats() == std::vector<float>{45, 54, 63, 72});
  CudaGraph one;
  one.capture(d, [&] {
    ops::scale_inplace(a, 0.5f);
    ops::scale_inplace(b, 2.f);
  });
  CHECK(one.roots_joined() == 0);  // one lane, one chain: one root already
}
#endif

TEST_CASE("gpu allocator: a graph pool never calls cudaMalloc and keeps its blocks until released") {
  GE_REQUIRE_GPU();
  const Device d = Device::cuda(0);
  // Size classes nothing else uses: 493828 bytes -> 494080, 800012 bytes -> 800256.
  const Shape shape{123457}, other{200003};
  Tensor a = Tensor::empty(shape, DType::F32, d);
  a = Tensor();  // one cached block of the class
  Tensor outside = Tensor::empty(other, DType::F32, d);
  const size_t mallocs = cuda_allocator_stats(0).cuda_malloc_calls;
  const GraphPoolId pool = cuda_allocator_begin_graph_pool(0);
  Tensor b = Tensor::empty(shape, DType::F32, d);  // the cached block joins the pool
  CHECK_THROWS_WITH_AS(Tensor::empty(shape, DType::F32, d), doctest::Contains("during CUDA graph capture"), Error);
  CHECK(cuda_allocator_stats(0).cuda_malloc_calls == mallocs);
  b = Tensor();                                    // back to the pool's own list
  Tensor c = Tensor::empty(shape, DType::F32, d);  // reused inside the pool
  CHECK(cuda_allocator_stats(0).cuda_malloc_calls == mallocs);
  outside = Tensor();  // allocated before, freed during the capture: the pool adopts it
  cuda_allocator_end_graph_pool(0);
  CHECK(cuda_allocator_graph_pool_bytes(0, pool) == 494080 + 800256);
  c = Tensor();  // still the pool's: allocations outside it must not get these blocks
  Tensor e = Tensor::empty(shape, DType::F32, d);
  Tensor o = Tensor::empty(other, DType::F32, d);
  CHECK(cuda_allocator_stats(0).cuda_malloc_calls == mallocs + 2);
  cuda_allocator_release_graph_pool(0, pool);
  CHECK(cuda_allocator_graph_pool_bytes(0, pool) == 0);
  Tensor f = Tensor::empty(shape, DType::F32, d);  // the released blocks, from the general cache
  Tensor o2 = Tensor::empty(other, DType::F32, d);
  CHECK(cuda_allocator_stats(0).cuda_malloc_calls == mallocs + 2);
}

TEST_CASE("trainer: cuda_graph needs a CUDA device and the train command says so") {
  TrainerConfig cfg = small_config(OptLevel::O0, Device::cpu());
  cfg.cuda_graph = true;
  CHECK_THROWS_WITH_AS(DcganTrainer{cfg}, doctest::Contains("needs a CUDA device"), Error);
  const std::string tiny =
      "train --dataset fake --device cpu --imageSize 16 --ngf 4 --ndf 4 --nz 8 --no-progress "
      "--batchSize 8 --max-steps 1 ";
  const CommandResult r = run_ganengine(tiny + "--cuda-graph --outf /nonexistent");
  INFO(r.output);
  CHECK(r.exit_code != 0);
  CHECK(r.output.find("--cuda-graph needs a CUDA device") != std::string::npos);
  const CommandResult both = run_ganengine(tiny + "--cuda-graph --no-cuda-graph");
  INFO(both.output);
  CHECK(both.exit_code != 0);
  CHECK(both.output.find("contradict") != std::string::npos);
  TempDir tmp("ge_graph_cli");
  const CommandResult plain = run_ganengine(tiny + "--no-cuda-graph --outf " + tmp.dir.string());
  INFO(plain.output);
  CHECK(plain.exit_code == 0);
}

TEST_CASE("gpu train cli: --cuda-graph trains with finite losses") {
  GE_REQUIRE_GPU();
  TempDir tmp("ge_graph_train");
  const CommandResult r = run_ganengine(
      "train --dataset fake --device cuda --imageSize 16 --ngf 4 --ndf 4 --nz 8 --no-progress --batchSize 8 "
      "--max-steps 8 --opt-level O2 --cuda-graph --outf " +
      tmp.dir.string());
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("[0/25][7/125] Loss_D: ") != std::string::npos);
  CHECK(r.output.find(": nan") == std::string::npos);
  CHECK(r.output.find(": -nan") == std::string::npos);
  CHECK(std::filesystem::exists(tmp.file("training_state.safetensors")));
}
