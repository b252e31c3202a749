// Data parallelism (replica_group.h): replicas on the CPU (host threads) and on two GPUs (NCCL).
// The exact check: replicas fed identical halves of a batch compute identical gradients, whose
// mean is that gradient again, so they must step bit for bit like one trainer on one half.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "core/process_group.h"
#include "core/replica_pool.h"
#include "ganengine/training_state.h"
#include "runtime/nccl_group.h"
#include "support/cli_runner.h"
#include "support/scoped_env.h"
#include "support/temp_dir.h"
#include "support/test_util.h"
#include "support/trainer_compare.h"
#include "train/replica_set.h"

using namespace ge;
using namespace ge::test;

namespace {

TrainerConfig replica_config(OptLevel level, Device d) { return small_trainer_config(level, d, 8, 16); }

// The one-trainer reference for replicas: replicas average the f32 gradients before each update,
// so they never leave a loss to the optimizer to unscale; the reference does not either, so that
// its Param::grad holds every loss's part, as theirs do, and can be compared.
TrainerConfig single_config(TrainerConfig cfg) {
  cfg.optimizer_unscales_last_loss = false;
  return cfg;
}

// Step s's inputs: n images in [-1, 1] and their noise, on the CPU.
void inputs(int64_t s, int64_t n, Tensor& real, Tensor& noise) { synthetic_step_inputs(s, n, 16, 21, real, noise); }

// The same n rows twice: a batch of 2n whose halves are identical.
Tensor twice(const Tensor& t) {
  Tensor out = Tensor::empty({2 * t.dim(0), t.dim(1), t.dim(2), t.dim(3)}, t.dtype());
  out.slice0(0, t.dim(0)).copy_from(t);
  out.slice0(t.dim(0), 2 * t.dim(0)).copy_from(t);
  return out;
}

// Replica k steps on rows [k*n/2, (k+1)*n/2) of the batch, each from its own thread.
void step_halves(ReplicaSet& r, const Tensor& real, const Tensor& noise) {
  const int64_t half = real.dim(0) / 2;
  r.run(
      [&](int k) { r.trainer(k).step(real.slice0(k * half, (k + 1) * half), noise.slice0(k * half, (k + 1) * half)); });
}

// Losses and probabilities of two records within a relative tolerance.
void expect_close_record(const StepRecord& a, const StepRecord& b, double tol, int64_t step) {
  const float fa[] = {a.errD_real, a.errD_fake, a.errG, a.D_x, a.D_G_z1, a.D_G_z2};
  const float fb[] = {b.errD_real, b.errD_fake, b.errG, b.D_x, b.D_G_z1, b.D_G_z2};
  for (int c = 0; c < 6; ++c) {
    INFO("step ", step, " field ", c, " (errD_real errD_fake errG D_x D_G_z1 D_G_z2): ", fa[c], " vs ", fb[c]);
    CHECK(std::fabs(fa[c] - fb[c]) <= tol * std::fabs(fb[c]) + 1e-7);
  }
}

// With --sync-bn, replicas on the halves of a batch are one trainer on the whole batch: the
// same BatchNorm statistics, and the mean of the replicas' gradients is the full gradient.
// compare_weights: also the final weights and buffers within tol. Not for half precision: Adam's
// first steps are nearly sign(gradient), so a parameter whose gradient is within rounding of zero
// (some BatchNorm biases) moves by +-lr on either side (at O2: 28-48% of those biases' norm
// after 6 steps while every loss agrees within 2e-2).
void expect_synced_halves_match_whole(ReplicaSet& r, DcganTrainer& whole, int steps, double tol, bool compare_weights) {
  for (int64_t s = 0; s < steps; ++s) {
    Tensor real, noise;
    inputs(s, 8, real, noise);
    whole.step(real, noise);
    step_halves(r, real, noise);
    expect_close_record(r.trainer(0).record(), whole.record(), tol, s);
  }
  for (int net = 0; net < 2 && compare_weights; ++net) {
    auto a = net ? whole.discriminator().named_params() : whole.generator().named_params();
    auto b = net ? r.trainer(1).discriminator().named_params() : r.trainer(1).generator().named_params();
    for (size_t i = 0; i < a.size(); ++i) {
      INFO((net ? "D " : "G "), a[i].first);
      CHECK(rel_error(b[i].second->value.to_doubles(), a[i].second->value.to_doubles()) < tol);
    }
    auto ba = net ? whole.discriminator().named_buffers() : whole.generator().named_buffers();
    auto bb = net ? r.trainer(1).discriminator().named_buffers() : r.trainer(1).generator().named_buffers();
    for (size_t i = 0; i < ba.size(); ++i)
      if (ba[i].second.tensor) {
        INFO((net ? "D " : "G "), ba[i].first);
        CHECK(rel_error(bb[i].second.tensor->to_doubles(), ba[i].second.tensor->to_doubles()) < tol);
      }
  }
  // Synced replicas share their running statistics too.
  expect_same_state(r.trainer(0), r.trainer(1), /*with_buffers=*/true);
}

std::unique_ptr<ReplicaSet> cpu_replicas(const TrainerConfig& cfg) {
  auto hub = std::make_shared<HostReplicaHub>(2);
  std::vector<std::unique_ptr<ReplicaGroup>> groups;
  for (int k = 0; k < 2; ++k) groups.push_back(std::make_unique<HostReplicaGroup>(hub, k));
  auto r = std::make_unique<ReplicaSet>(std::vector<Device>{Device::cpu(), Device::cpu()}, std::move(groups));
  r->make_trainers(cfg);
  return r;
}

std::unique_ptr<ReplicaSet> gpu_replicas(const TrainerConfig& cfg) {
  auto r = ReplicaSet::on_gpus({Device::cuda(0), Device::cuda(1)});
  r->make_trainers(cfg);
  return r;
}

// Replicas on duplicated halves against one trainer on one half: every record and the whole
// state bitwise (BatchNorm buffers included: each replica saw exactly the single trainer's batch).
// The single trainer runs all its steps first: two CUDA-graph trainers warming up in lockstep on
// one GPU would take each other's cached blocks into their graphs' pools.
void expect_duplicated_halves_match_single(ReplicaSet& r, DcganTrainer& single, int steps) {
  std::vector<StepRecord> expected;
  for (int64_t s = 0; s < steps; ++s) {
    Tensor real, noise;
    inputs(s, 4, real, noise);
    single.step(real, noise);
    expected.push_back(single.record());
  }
  for (int64_t s = 0; s < steps; ++s) {
    Tensor real, noise;
    inputs(s, 4, real, noise);
    step_halves(r, twice(real), twice(noise));
    expect_same_record(expected[static_cast<size_t>(s)], r.trainer(0).record(), static_cast<size_t>(s));
    expect_same_record(expected[static_cast<size_t>(s)], r.trainer(1).record(), static_cast<size_t>(s));
  }
  expect_same_state(single, r.trainer(0));
  expect_same_state(single, r.trainer(1));
}

}  // namespace

TEST_CASE("data parallel: two CPU replicas on duplicated halves step bitwise like one trainer at O0 O2 and O4") {
  for (OptLevel level : {OptLevel::O0, OptLevel::O2, OptLevel::O4}) {
    INFO(std::string(opt_level_name(level)));
    const TrainerConfig cfg = replica_config(level, Device::cpu());
    auto r = cpu_replicas(cfg);
    DcganTrainer single(single_config(cfg));
    expect_duplicated_halves_match_single(*r, single, 3);
  }
}

TEST_CASE("data parallel: CPU replicas on different halves stay identical and average their losses") {
  const TrainerConfig cfg = replica_config(OptLevel::O0, Device::cpu());
  auto r = cpu_replicas(cfg);
  // The first step from the same start, each half alone: the group's record must be their mean.
  DcganTrainer alone0(cfg), alone1(cfg);
  Tensor real, noise;
  inputs(0, 8, real, noise);
  alone0.step(real.slice0(0, 4), noise.slice0(0, 4));
  alone1.step(real.slice0(4, 8), noise.slice0(4, 8));
  step_halves(*r, real, noise);
  // D's losses and probabilities (G's come after D's step, which the group takes with the mean
  // gradient, so they differ from either half alone).
  const StepRecord a = alone0.record(), b = alone1.record(), g = r->trainer(0).record();
  const float fa[] = {a.errD_real, a.errD_fake, a.D_x, a.D_G_z1};
  const float fb[] = {b.errD_real, b.errD_fake, b.D_x, b.D_G_z1};
  const float fg[] = {g.errD_real, g.errD_fake, g.D_x, g.D_G_z1};
  for (int c = 0; c < 4; ++c) {
    INFO("field ", c, " (errD_real errD_fake D_x D_G_z1): halves ", fa[c], " ", fb[c], " group ", fg[c]);
    CHECK(std::fabs(fg[c] - 0.5f * (fa[c] + fb[c])) <= 1e-6f * std::fabs(fg[c]) + 1e-7f);
  }
  CHECK_FALSE(same_tensor(alone0.generator().params()[0]->value, alone1.generator().params()[0]->value));
  for (int64_t s = 1; s < 4; ++s) {
    inputs(s, 8, real, noise);
    step_halves(*r, real, noise);
  }
  // Weights, masters, gradients, Adam state and scalers agree; running statistics are per replica.
  expect_same_state(r->trainer(0), r->trainer(1), /*with_buffers=*/false);
}

TEST_CASE("data parallel: O4 replicas on different halves keep one set of FP8 scales from the larger amaxes") {
  const TrainerConfig cfg = replica_config(OptLevel::O4, Device::cpu());
  auto r = cpu_replicas(cfg);
  REQUIRE_FALSE(r->trainer(0).generator().named_fp8_scalings().empty());
  DcganTrainer half0(cfg), half1(cfg);  // each on one half alone
  Tensor real, noise;
  inputs(0, 8, real, noise);
  step_halves(*r, real, noise);
  half0.step(real.slice0(0, 4), noise.slice0(0, 4));
  half1.step(real.slice0(4, 8), noise.slice0(4, 8));
  // G's first input is the noise, whose halves differ: the group's amax of it is the larger of
  // the halves' own (the step just taken is the history's last entry after the update).
  auto last_input_amax = [](DcganTrainer& t) {
    return t.generator().named_fp8_scalings().front().second->input.amax_history.to_doubles().back();
  };
  const double a0 = last_input_amax(half0), a1 = last_input_amax(half1);
  CHECK(a0 > 0);
  CHECK(a0 != a1);
  CHECK(last_input_amax(r->trainer(0)) == std::max(a0, a1));
  for (int64_t s = 1; s < 3; ++s) {
    inputs(s, 8, real, noise);
    step_halves(*r, real, noise);
  }
  // Weights, Adam state, scalers and every FP8 scaling state agree across the replicas.
  expect_same_state(r->trainer(0), r->trainer(1), /*with_buffers=*/false);
}

TEST_CASE("data parallel: two CPU replicas with synchronised BatchNorm step like one trainer on the whole batch") {
  TrainerConfig cfg = replica_config(OptLevel::O0, Device::cpu());
  DcganTrainer whole(cfg);
  cfg.sync_batchnorm = true;
  auto r = cpu_replicas(cfg);
  expect_synced_halves_match_whole(*r, whole, 3, 1e-5, /*compare_weights=*/true);
}

TEST_CASE("training state: a trainer given another's state steps bitwise as that trainer does") {
  const TrainerConfig cfg = replica_config(OptLevel::O2, Device::cpu());
  DcganTrainer a(cfg), b(cfg);
  Tensor real, noise;
  for (int64_t s = 0; s < 3; ++s) {
    inputs(s, 4, real, noise);
    a.step(real, noise);
  }
  copy_training_state(a, b);  // gradients are not state: compare after the next step
  inputs(3, 4, real, noise);
  a.step(real, noise);
  b.step(real, noise);
  expect_same_record(a.record(), b.record(), 3);
  expect_same_state(a, b);
  DcganTrainer wider(small_trainer_config(OptLevel::O2, Device::cpu(), 16, 16));
  CHECK_THROWS_WITH_AS(copy_training_state(a, wider), doctest::Contains("built with other settings"), Error);
}

TEST_CASE("data parallel: a look at samples on one synced replica takes no collective") {
  TrainerConfig cfg = replica_config(OptLevel::O0, Device::cpu());
  cfg.sync_batchnorm = true;
  auto r = cpu_replicas(cfg);
  Tensor real, noise;
  inputs(0, 8, real, noise);
  step_halves(*r, real, noise);
  // What train does for its sample grid, on replica 0 alone. A BatchNorm that still synced would
  // wait for replica 1 forever: the wait is bounded here, and the group aborted if it happens.
  nn::Sequential& G = r->trainer(0).generator();
  auto look = std::async(std::launch::async, [&] {
    G.set_update_running_stats(false);
    Tensor fake = G.forward(noise.slice0(0, 4), true);
    G.set_update_running_stats(true);
    return fake;
  });
  const bool finished = look.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  if (!finished)
    for (int k = 0; k < 2; ++k) r->group(k).abort();
  CHECK(finished);
  CHECK_NOTHROW(look.get());
  if (finished) step_halves(*r, real, noise);  // and the replicas still step together afterwards
}

TEST_CASE("data parallel: synchronised BatchNorm without replicas is an error that says so") {
  TrainerConfig cfg = replica_config(OptLevel::O0, Device::cpu());
  cfg.sync_batchnorm = true;
  CHECK_THROWS_WITH_AS(DcganTrainer{cfg}, doctest::Contains("--sync-bn"), Error);
  TempDir tmp;
  const CommandResult r =
      run_ganengine("train --dataset fake --device cpu --sync-bn --max-steps 1 --outf " + tmp.dir.string());
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("--sync-bn synchronises BatchNorm across GPUs") != std::string::npos);
}

TEST_CASE("data parallel: an overflow on one CPU replica skips the step on every replica") {
  TrainerConfig cfg = replica_config(OptLevel::O2, Device::cpu());
  cfg.policy.initial_loss_scale = 1024;  // far from natural overflows: only the forced one happens
  auto r = cpu_replicas(cfg);
  Tensor real, noise;
  for (int64_t s = 0; s < 3; ++s) {
    if (s == 1) r->trainer(0).force_overflow_next_step(kLossDFake);
    inputs(s, 8, real, noise);
    step_halves(*r, real, noise);
    const StepRecord a = r->trainer(0).record(), b = r->trainer(1).record();
    INFO("step ", s);
    CHECK(a.overflow[1] == (s == 1));
    CHECK(b.overflow[1] == (s == 1));
    CHECK(a.scale[1] == b.scale[1]);
  }
  CHECK(r->trainer(1).record().scale[1] == 512.f);  // 1024 halved once, on both
  expect_same_state(r->trainer(0), r->trainer(1), /*with_buffers=*/false);
}

TEST_CASE("replica pool: runs every replica on its own thread and rethrows a replica's error") {
  ReplicaPool pool(3);
  std::vector<int> seen(3, 0);
  pool.run([&](int k) { seen[k] = k + 1; });
  CHECK(seen == std::vector<int>{1, 2, 3});
  CHECK_THROWS_WITH(pool.run([](int k) {
    if (k == 1) throw std::runtime_error("replica " + std::to_string(k));
  }),
                    "replica 1");
  pool.run([&](int k) { seen[k] = 10 * k; });  // still usable after an error
  CHECK(seen == std::vector<int>{0, 10, 20});
}

TEST_CASE("data parallel: a replica that fails aborts the group instead of leaving the others waiting") {
  const TrainerConfig cfg = replica_config(OptLevel::O0, Device::cpu());
  auto r = cpu_replicas(cfg);
  Tensor real, noise;
  inputs(0, 8, real, noise);
  // Replica 1 gets a batch of the wrong image size: it throws before its first collective while
  // replica 0 waits in one; the abort releases replica 0, and the pool reports replica 1's error.
  const Tensor bad = Tensor::zeros({4, 3, 8, 8}, DType::F32);
  CHECK_THROWS_WITH_AS(r->run([&](int k) {
    if (k == 0)
      r->trainer(0).step(real.slice0(0, 4), noise.slice0(0, 4));
    else
      r->trainer(1).step(bad, noise.slice0(4, 8));
  }),
                       doctest::Contains("does not match"), Error);
}

TEST_CASE("gpu data parallel: NCCL replicas on two GPUs on duplicated halves step bitwise like one GPU") {
  GE_REQUIRE_GPUS(2);
  DeterministicConvolutions deterministic;
  struct Run {
    OptLevel level;
    bool graph;
  };
  for (Run run : {Run{OptLevel::O2, false}, Run{OptLevel::O2, true}, Run{OptLevel::O1, true}, Run{OptLevel::O3, true},
                  Run{OptLevel::O4, false}, Run{OptLevel::O4, true}}) {
    const bool graph = run.graph;
    INFO(std::string(opt_level_name(run.level)), " ", std::string(graph ? "CUDA graph" : "eager"));
    TrainerConfig cfg = replica_config(run.level, Device::cuda(0));
    cfg.cuda_graph = graph;
    auto r = gpu_replicas(cfg);
    DcganTrainer single(single_config(cfg));
    expect_duplicated_halves_match_single(*r, single, 8);
    if (graph) CHECK(r->trainer(1).graph_stats().replays >= 4);
  }
}

TEST_CASE("gpu data parallel: NCCL replicas on different halves follow the CPU replicas") {
  GE_REQUIRE_GPUS(2);
  const TrainerConfig cpu_cfg = replica_config(OptLevel::O0, Device::cpu());
  auto cpu = cpu_replicas(cpu_cfg);
  auto gpu = gpu_replicas(replica_config(OptLevel::O0, Device::cuda(0)));
  for (int64_t s = 0; s < 4; ++s) {
    Tensor real, noise;
    inputs(s, 8, real, noise);
    step_halves(*cpu, real, noise);
    step_halves(*gpu, real, noise);
    const StepRecord a = cpu->trainer(0).record(), b = gpu->trainer(0).record();
    INFO("step ", s, ": cpu errD_real ", a.errD_real, " gpu ", b.errD_real, "; errG ", a.errG, " ", b.errG);
    CHECK(std::fabs(a.errD_real - b.errD_real) <= 1e-4f * std::fabs(a.errD_real) + 1e-6f);
    CHECK(std::fabs(a.errG - b.errG) <= 1e-4f * std::fabs(a.errG) + 1e-6f);
  }
  auto pc = cpu->trainer(0).generator().params(), pg = gpu->trainer(1).generator().params();
  for (size_t i = 0; i < pc.size(); ++i) CHECK(rel_error(pc[i]->value.to_doubles(), pg[i]->value.to_doubles()) < 1e-4);
  expect_same_state(gpu->trainer(0), gpu->trainer(1), /*with_buffers=*/false);
}

TEST_CASE("gpu data parallel: NCCL replicas with synchronised BatchNorm step like one GPU on the whole batch") {
  GE_REQUIRE_GPUS(2);
  for (OptLevel level : {OptLevel::O0, OptLevel::O2}) {
    INFO(std::string(opt_level_name(level)));
    TrainerConfig cfg = replica_config(level, Device::cuda(0));
    DcganTrainer whole(cfg);
    cfg.sync_batchnorm = true;
    cfg.cuda_graph = level == OptLevel::O2;  // the all-reduces inside BatchNorm are captured too
    auto r = gpu_replicas(cfg);
    const bool fp32 = level == OptLevel::O0;
    expect_synced_halves_match_whole(*r, whole, fp32 ? 3 : 6, fp32 ? 1e-4 : 2e-2, /*compare_weights=*/fp32);
  }
}

TEST_CASE("gpu data parallel: two GPUs with synchronised BatchNorm at O0 take one GPU's steps for 50 steps") {
  // At the default 64x64 networks and a global batch of 64, the replicas in CUDA-graph mode as
  // train runs them: the losses within 1e-4 relative at every step. Teacher-forced: before each
  // step the replicas receive the single GPU's whole state. Free-running trajectories cannot be
  // compared this way: fp32 summation order alone (two processes that differ only in cuDNN's
  // algorithm choice) moves the losses by 1e-4 after one step and by O(1) within 30 (Adam's
  // first steps are nearly sign(gradient), and the GAN amplifies every difference).
  GE_REQUIRE_GPUS(2);
  TrainerConfig cfg = small_trainer_config(OptLevel::O0, Device::cuda(0), 64, 64);
  DcganTrainer whole(cfg);  // eager (bitwise its graph mode): two graph trainers must not warm up on one GPU together
  cfg.sync_batchnorm = true;
  cfg.cuda_graph = true;
  auto r = gpu_replicas(cfg);
  double worst = 0;
  for (int64_t s = 0; s < 50; ++s) {
    Tensor real, noise;
    synthetic_step_inputs(s, 64, 64, 33, real, noise);
    for (auto& t : r->trainers()) copy_training_state(whole, *t);
    whole.step(real, noise);
    step_halves(*r, real, noise);
    const StepRecord a = r->trainer(0).record(), b = whole.record();
    const float la[] = {a.errD_real, a.errD_fake, a.errG}, lb[] = {b.errD_real, b.errD_fake, b.errG};
    for (int c = 0; c < 3; ++c) {
      INFO("step ", s, " loss ", c, " (errD_real errD_fake errG): 2 GPUs ", la[c], ", 1 GPU ", lb[c]);
      CHECK(std::fabs(la[c] - lb[c]) <= 1e-4 * std::fabs(lb[c]));
      worst = std::max(worst, std::fabs(static_cast<double>(la[c]) - lb[c]) / std::fabs(lb[c]));
    }
  }
  CHECK(r->trainer(1).graph_stats().replays >= 40);
  MESSAGE("2 GPUs --sync-bn vs 1 GPU, O0, 50 teacher-forced steps: largest relative loss difference ", worst);
  // After the last step both replicas hold the same weights, and they are the single GPU's up to
  // what one Adam step makes of gradients summed in another order: up to about 1.4e-4, mostly
  // under 1e-4; a wrong synchronisation is off by far more.
  expect_same_state(r->trainer(0), r->trainer(1), /*with_buffers=*/true);
  auto pw = whole.generator().params(), pr = r->trainer(0).generator().params();
  for (size_t i = 0; i < pw.size(); ++i) CHECK(rel_error(pr[i]->value.to_doubles(), pw[i]->value.to_doubles()) < 3e-4);
}

TEST_CASE("gpu train cli: --ngpu 2 trains with replicas checked identical in graph mode and with a forced overflow") {
  GE_REQUIRE_GPUS(2);
  TempDir tmp;
  const std::string base =
      "train --dataset fake --imageSize 16 --ngf 8 --ndf 8 --batchSize 16 --ngpu 2 "
      "--check-replicas --max-steps 8 --opt-level O2 --no-progress ";
  const CommandResult graph = run_ganengine(base + "--outf " + tmp.dir.string() + "/graph");
  INFO(graph.output);
  CHECK(graph.exit_code == 0);
  CHECK(graph.output.find("data parallel: 2 replicas") != std::string::npos);
  const CommandResult forced =
      run_ganengine(base + "--debug-force-overflow 3:1 --outf " + tmp.dir.string() + "/forced");
  INFO(forced.output);
  CHECK(forced.exit_code == 0);
  // Step 3's record: loss 1 overflowed (forced on replica 0 only; --check-replicas saw both skip).
  std::ifstream metrics(tmp.dir / "forced" / "metrics.jsonl");
  std::string line, step3;
  while (std::getline(metrics, line))
    if (line.find("\"step\": 3,") != std::string::npos) step3 = line;
  INFO(step3);
  const size_t at = step3.find("\"overflow\": [");
  REQUIRE(at != std::string::npos);
  CHECK(step3.compare(at + 14, 4, ", 1,") == 0);
  const CommandResult synced = run_ganengine(base + "--sync-bn --outf " + tmp.dir.string() + "/synced");
  INFO(synced.output);
  CHECK(synced.exit_code == 0);
  CHECK(synced.output.find("BatchNorm statistics over all replicas (--sync-bn)") != std::string::npos);
}

// At 64x64 and the default widths O4's convolutions run on the FP8 kernels from codes, with the
// amaxes all-reduced before the scales update: replicas whose scales parted would round their
// operands differently and part in their weights.
TEST_CASE("gpu train cli: --ngpu 2 at O4 on 64x64 images keeps the replicas identical in graph mode") {
  GE_REQUIRE_GPUS(2);
  TempDir tmp;
  const CommandResult r = run_ganengine(
      "train --dataset fake --batchSize 32 --ngpu 2 --check-replicas --max-steps 6 --opt-level O4 --no-progress "
      "--outf " +
      tmp.dir.string());
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("data parallel: 2 replicas") != std::string::npos);
}

// ---- several processes (process_group.h)

namespace {

// The loss columns of metrics.jsonl's first `steps` records.
std::vector<double> logged_losses(const std::filesystem::path& metrics, int steps) {
  std::ifstream in(metrics);
  std::string line;
  std::vector<double> out;
  for (int s = 0; s < steps && std::getline(in, line); ++s)
    for (const char* key : {"\"errD_real\": ", "\"errD_fake\": ", "\"loss_G\": "}) {
      const size_t at = line.find(key);
      out.push_back(at == std::string::npos ? NAN : std::stod(line.substr(at + std::strlen(key))));
    }
  return out;
}

// The loss columns of two runs' first `steps` records within a relative tolerance; the largest
// relative difference is printed, to show how close the runs are.
void expect_logged_losses_close(const std::filesystem::path& run, const std::filesystem::path& reference, int steps,
                                double tol, const char* what) {
  const std::vector<double> a = logged_losses(run / "metrics.jsonl", steps),
                            b = logged_losses(reference / "metrics.jsonl", steps);
  REQUIRE(a.size() == static_cast<size_t>(3 * steps));
  REQUIRE(b.size() == a.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(std::string(what), ": step ", i / 3, " loss ", i % 3, " (errD_real errD_fake loss_G): ", a[i], " vs ", b[i]);
    CHECK(std::fabs(a[i] - b[i]) <= tol * std::fabs(b[i]) + 1e-7);
    worst = std::max(worst, std::fabs(a[i] - b[i]) / std::max(std::fabs(b[i]), 1e-7));
  }
  MESSAGE(std::string(what), ": largest relative loss difference over ", steps, " steps: ", worst);
}

}  // namespace

TEST_CASE("process group: the environment names the rank and malformed values are errors") {
  {
    ScopedEnv env{{"OMPI_COMM_WORLD_SIZE", nullptr}, {"GANENGINE_WORLD_SIZE", nullptr}};
    const ProcessGroupInfo pg = detect_process_group();
    CHECK(pg.size == 1);
    CHECK(pg.launcher.empty());
  }
  {
    ScopedEnv env{{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}};
    const ProcessGroupInfo pg = detect_process_group();
    CHECK(pg.launcher == "mpi");
    CHECK(pg.size == 4);
    CHECK(pg.rank == 3);
    CHECK(pg.local_rank == 1);
  }
  {
    ScopedEnv env{{"OMPI_COMM_WORLD_SIZE", nullptr},
                  {"GANENGINE_WORLD_SIZE", "2"},
                  {"GANENGINE_RANK", "1"},
                  {"GANENGINE_LOCAL_RANK", nullptr}};
    const ProcessGroupInfo pg = detect_process_group();
    CHECK(pg.launcher == "env");
    CHECK(pg.local_rank == 1);  // defaults to the rank
  }
  {
    ScopedEnv env{{"OMPI_COMM_WORLD_SIZE", nullptr}, {"GANENGINE_WORLD_SIZE", "2"}, {"GANENGINE_RANK", "two"}};
    CHECK_THROWS_WITH_AS(detect_process_group(), doctest::Contains("GANENGINE_RANK='two'"), Error);
  }
  {
    ScopedEnv env{{"OMPI_COMM_WORLD_SIZE", nullptr}, {"GANENGINE_WORLD_SIZE", "2"}, {"GANENGINE_RANK", "2"}};
    CHECK_THROWS_WITH_AS(detect_process_group(), doctest::Contains("rank 2 of a world of 2"), Error);
  }
}

TEST_CASE("process group: rank 0 writes the NCCL id to the rendezvous file and the other ranks read it") {
  TempDir tmp;
  const std::string path = (tmp.dir / "rendezvous").string();
  ScopedEnv env{{"GANENGINE_RENDEZVOUS_FILE", path.c_str()}, {"GANENGINE_RENDEZVOUS_TIMEOUT", "20"}};
  NcclUniqueId made{};
  for (size_t i = 0; i < made.size(); ++i) made[i] = static_cast<char>(i * 7 + 1);
  auto make = [&] { return made; };
  auto never = []() -> NcclUniqueId { throw std::logic_error("only rank 0 makes the id"); };
  ProcessGroupInfo r0{0, 3, 0, "env"}, r1{1, 3, 1, "env"}, r2{2, 3, 0, "env"};
  // The others start first and wait.
  NcclUniqueId got1{}, got2{};
  std::thread t1([&] { got1 = share_unique_id(r1, never); });
  std::thread t2([&] { got2 = share_unique_id(r2, never); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK(share_unique_id(r0, make) == made);
  t1.join();
  t2.join();
  CHECK(got1 == made);
  CHECK(got2 == made);
  // A second run must not reuse the file.
  CHECK_THROWS_WITH_AS(share_unique_id(r0, make), doctest::Contains("already exists"), Error);
  {
    ScopedEnv missing{{"GANENGINE_RENDEZVOUS_FILE", (tmp.dir / "never-written").string().c_str()},
                      {"GANENGINE_RENDEZVOUS_TIMEOUT", "1"}};
    CHECK_THROWS_WITH_AS(share_unique_id(r1, never), doctest::Contains("waited 1 s for rank 0"), Error);
  }
  {
    ScopedEnv unset{{"GANENGINE_RENDEZVOUS_FILE", nullptr}};
    CHECK_THROWS_WITH_AS(share_unique_id(r1, never), doctest::Contains("GANENGINE_RENDEZVOUS_FILE is not set"), Error);
  }
}

TEST_CASE("train cli: training over several processes needs GPUs and says so") {
  TempDir tmp;
  const CommandResult r = run_ganengine_ranks(
      {"GANENGINE_WORLD_SIZE=2 GANENGINE_RANK=0 GANENGINE_RENDEZVOUS_FILE=" + (tmp.dir / "id").string()},
      "train --dataset fake --device cpu --max-steps 1 --outf " + tmp.dir.string());
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("training over 2 processes needs GPUs") != std::string::npos);
  const CommandResult both =
      run_ganengine_ranks({"GANENGINE_WORLD_SIZE=2 GANENGINE_RANK=0"},
                          "train --dataset fake --ngpu 2 --max-steps 1 --outf " + tmp.dir.string());
  CHECK(both.exit_code == 1);
  CHECK(both.output.find("drop --ngpu") != std::string::npos);
}

TEST_CASE("gpu train cli: two processes with GANENGINE_RANK train as --ngpu 2 does") {
  GE_REQUIRE_GPUS(2);
  TempDir tmp;
  const std::string args =
      "train --dataset fake --imageSize 16 --ngf 8 --ndf 8 --batchSize 16 --max-steps 6 "
      "--opt-level O0 --check-replicas --no-progress ";
  const std::string rendezvous = "GANENGINE_WORLD_SIZE=2 GANENGINE_RENDEZVOUS_FILE=" + (tmp.dir / "id").string();
  const CommandResult ranks = run_ganengine_ranks({rendezvous + " GANENGINE_RANK=0", rendezvous + " GANENGINE_RANK=1"},
                                                  args + "--outf " + (tmp.dir / "ranks").string());
  INFO(ranks.output);
  REQUIRE(ranks.exit_code == 0);
  CHECK(ranks.output.find("[rank 0] data parallel: 2 processes") != std::string::npos);
  CHECK(ranks.output.find("[rank 1] [0/") == std::string::npos);  // only rank 0 logs
  CHECK(std::filesystem::exists(tmp.dir / "ranks" / "netG_epoch_0.safetensors"));
  const CommandResult threads = run_ganengine(args + "--ngpu 2 --outf " + (tmp.dir / "threads").string());
  INFO(threads.output);
  REQUIRE(threads.exit_code == 0);
  // Same batches, same split, same reductions, in fp32: only cuDNN's choice of algorithms, made
  // per process, may differ, which moves an fp32 loss by float rounding (about 1e-7 relative)
  // per step; 1e-5 leaves room for six steps of it and catches any real difference in the
  // arithmetic.
  expect_logged_losses_close(tmp.dir / "ranks", tmp.dir / "threads", 6, 1e-5, "processes vs threads");
}

TEST_CASE("mpirun: every rank of ganengine info receives rank 0's id through MPI") {
  // Open MPI from Debian (tools/install_deps.sh installs openmpi-bin).
  REQUIRE_MESSAGE(std::system("command -v mpirun >/dev/null 2>&1") == 0,
                  "mpirun not found: install Open MPI (apt-get install openmpi-bin, as tools/install_deps.sh does)");
  const CommandResult r = run_ganengine_mpirun(3, "info", 120);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  std::set<std::string> fingerprints, ranks;
  std::istringstream lines(r.output);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t at = line.find("process group: rank ");
    if (at == std::string::npos) continue;
    ranks.insert(line.substr(at + 20, line.find(' ', at + 20) - at - 20));
    fingerprints.insert(line.substr(line.rfind(' ') + 1));
  }
  CHECK(ranks == std::set<std::string>{"0", "1", "2"});
  CHECK(fingerprints.size() == 1);
}

TEST_CASE("mpirun gpu: two ranks train with synchronised BatchNorm and match --ngpu 2") {
  GE_REQUIRE_GPUS(2);
  REQUIRE_MESSAGE(std::system("command -v mpirun >/dev/null 2>&1") == 0,
                  "mpirun not found (apt-get install openmpi-bin)");
  TempDir tmp;
  const std::string small =
      "train --dataset fake --imageSize 16 --ngf 8 --ndf 8 --batchSize 16 --max-steps 8 "
      "--sync-bn --check-replicas --no-progress ";
  // O2 in graph mode: samples are written at step 0 by rank 0 alone; with --sync-bn that look
  // must take no collective, or rank 0 would wait for rank 1 forever.
  const CommandResult o2 = run_ganengine_mpirun(2, small + "--opt-level O2 --outf " + (tmp.dir / "o2").string(), 300);
  INFO(o2.output);
  CHECK(o2.exit_code == 0);
  CHECK(o2.output.find("data parallel: 2 processes (mpirun)") != std::string::npos);
  CHECK(std::filesystem::exists(tmp.dir / "o2" / "netG_epoch_0.safetensors"));
  // O0: the two processes against the two replicas of one process, loss by loss.
  const CommandResult ranks =
      run_ganengine_mpirun(2, small + "--opt-level O0 --outf " + (tmp.dir / "ranks").string(), 300);
  INFO(ranks.output);
  REQUIRE(ranks.exit_code == 0);
  const CommandResult threads =
      run_ganengine(small + "--opt-level O0 --ngpu 2 --outf " + (tmp.dir / "threads").string());
  INFO(threads.output);
  REQUIRE(threads.exit_code == 0);
  expect_logged_losses_close(tmp.dir / "ranks", tmp.dir / "threads", 8, 1e-5, "mpirun vs --ngpu 2");
}
