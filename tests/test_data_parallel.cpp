// Data parallelism (replica_group.h): replicas on the CPU (host threads) and on two GPUs (NCCL).
// The exact check: replicas fed identical halves of a batch compute identical gradients, whose
// mean is that gradient again, so they must step bit for bit like one trainer on one half.
#include <cmath>
#include <fstream>
#include <stdexcept>

#include "cli_runner.h"
#include "ganengine/nccl_group.h"
#include "ganengine/replica_pool.h"
#include "temp_dir.h"
#include "test_util.h"
#include "trainer_compare.h"

using namespace ge;
using namespace ge::test;

namespace {

TrainerConfig replica_config(OptLevel level, Device d) {
  TrainerConfig cfg;
  cfg.net.ngf = cfg.net.ndf = 8;
  cfg.net.image_size = 16;
  cfg.policy = resolve_policy(level);
  cfg.device = d;
  return cfg;
}

// Step s's inputs: n images in [-1, 1] and their noise, on the CPU.
void inputs(int64_t s, int64_t n, Tensor& real, Tensor& noise) {
  real = Tensor::empty({n, 3, 16, 16}, DType::F32);
  ops::fill_uniform(real, 21, static_cast<uint64_t>(s) << 20);
  std::vector<double> v = real.to_doubles();
  for (double& x : v) x = 2 * x - 1;
  real = Tensor::from_doubles(v, real.shape(), DType::F32);
  noise = Tensor::empty({n, 100, 1, 1}, DType::F32);
  ops::fill_normal(noise, 22, static_cast<uint64_t>(s) << 20);
}

// The same n rows twice: a batch of 2n whose halves are identical.
Tensor twice(const Tensor& t) {
  Tensor out = Tensor::empty({2 * t.dim(0), t.dim(1), t.dim(2), t.dim(3)}, t.dtype());
  out.slice0(0, t.dim(0)).copy_from(t);
  out.slice0(t.dim(0), 2 * t.dim(0)).copy_from(t);
  return out;
}

struct Replicas {
  std::vector<std::unique_ptr<ReplicaGroup>> groups;
  std::vector<std::unique_ptr<DcganTrainer>> trainers;
  ReplicaPool pool{2};
  // Replica k steps on rows [k*n/2, (k+1)*n/2) of the batch, each from its own thread.
  void step(const Tensor& real, const Tensor& noise) {
    const int64_t half = real.dim(0) / 2;
    pool.run([&](int k) { trainers[k]->step(real.slice0(k * half, (k + 1) * half), noise.slice0(k * half, (k + 1) * half)); });
  }
};

std::unique_ptr<Replicas> cpu_replicas(const TrainerConfig& cfg) {
  auto r = std::make_unique<Replicas>();
  auto hub = std::make_shared<HostReplicaHub>(2);
  for (int k = 0; k < 2; ++k) {
    r->groups.push_back(std::make_unique<HostReplicaGroup>(hub, k));
    TrainerConfig ck = cfg;
    ck.replicas = r->groups.back().get();
    r->trainers.push_back(std::make_unique<DcganTrainer>(ck));
  }
  return r;
}

std::unique_ptr<Replicas> gpu_replicas(const TrainerConfig& cfg) {
  auto r = std::make_unique<Replicas>();
  r->groups = make_nccl_groups({Device::cuda(0), Device::cuda(1)});
  for (int k = 0; k < 2; ++k) {
    TrainerConfig ck = cfg;
    ck.device = Device::cuda(k);
    ck.replicas = r->groups[k].get();
    r->trainers.push_back(std::make_unique<DcganTrainer>(ck));
  }
  return r;
}

// Replicas on duplicated halves against one trainer on one half: every record and the whole
// state bitwise (BatchNorm buffers included: each replica saw exactly the single trainer's batch).
void expect_duplicated_halves_match_single(Replicas& r, DcganTrainer& single, int steps) {
  for (int64_t s = 0; s < steps; ++s) {
    Tensor real, noise;
    inputs(s, 4, real, noise);
    single.step(real, noise);
    r.step(twice(real), twice(noise));
    const StepRecord a = single.record();
    expect_same_record(a, r.trainers[0]->record(), static_cast<size_t>(s));
    expect_same_record(a, r.trainers[1]->record(), static_cast<size_t>(s));
  }
  expect_same_state(single, *r.trainers[0]);
  expect_same_state(single, *r.trainers[1]);
}

}  // namespace

TEST_CASE("data parallel: two CPU replicas on duplicated halves step bitwise like one trainer at O0 and O2") {
  for (OptLevel level : {OptLevel::O0, OptLevel::O2}) {
    INFO(opt_level_name(level));
    const TrainerConfig cfg = replica_config(level, Device::cpu());
    auto r = cpu_replicas(cfg);
    DcganTrainer single(cfg);
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
  r->step(real, noise);
  // D's losses and probabilities (G's come after D's step, which the group takes with the mean
  // gradient, so they differ from either half alone).
  const StepRecord a = alone0.record(), b = alone1.record(), g = r->trainers[0]->record();
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
    r->step(real, noise);
  }
  // Weights, masters, gradients, Adam state and scalers agree; running statistics are per replica.
  expect_same_state(*r->trainers[0], *r->trainers[1], /*with_buffers=*/false);
}

TEST_CASE("data parallel: an overflow on one CPU replica skips the step on every replica") {
  TrainerConfig cfg = replica_config(OptLevel::O2, Device::cpu());
  cfg.policy.initial_loss_scale = 1024;  // far from natural overflows: only the forced one happens
  auto r = cpu_replicas(cfg);
  Tensor real, noise;
  for (int64_t s = 0; s < 3; ++s) {
    if (s == 1) r->trainers[0]->force_overflow_next_step(kLossDFake);
    inputs(s, 8, real, noise);
    r->step(real, noise);
    const StepRecord a = r->trainers[0]->record(), b = r->trainers[1]->record();
    INFO("step ", s);
    CHECK(a.overflow[1] == (s == 1));
    CHECK(b.overflow[1] == (s == 1));
    CHECK(a.scale[1] == b.scale[1]);
  }
  CHECK(r->trainers[1]->record().scale[1] == 512.f);  // 1024 halved once, on both
  expect_same_state(*r->trainers[0], *r->trainers[1], /*with_buffers=*/false);
}

TEST_CASE("replica pool: runs every replica on its own thread and rethrows the lowest rank's error") {
  ReplicaPool pool(3);
  std::vector<int> seen(3, 0);
  pool.run([&](int k) { seen[k] = k + 1; });
  CHECK(seen == std::vector<int>{1, 2, 3});
  CHECK_THROWS_WITH(pool.run([](int k) {
    if (k >= 1) throw std::runtime_error("replica " + std::to_string(k));
  }),
                    "replica 1");
  pool.run([&](int k) { seen[k] = 10 * k; });  // still usable after an error
  CHECK(seen == std::vector<int>{0, 10, 20});
}

TEST_CASE("gpu data parallel: NCCL replicas on two GPUs on duplicated halves step bitwise like one GPU") {
  GE_REQUIRE_GPUS(2);
  DeterministicConvolutions deterministic;
  for (bool graph : {false, true}) {
    INFO(std::string(graph ? "CUDA graph" : "eager"));
    TrainerConfig cfg = replica_config(OptLevel::O2, Device::cuda(0));
    cfg.cuda_graph = graph;
    auto r = gpu_replicas(cfg);
    DcganTrainer single(cfg);
    expect_duplicated_halves_match_single(*r, single, 8);
    if (graph) CHECK(r->trainers[1]->graph_stats().replays >= 4);
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
    cpu->step(real, noise);
    gpu->step(real, noise);
    const StepRecord a = cpu->trainers[0]->record(), b = gpu->trainers[0]->record();
    INFO("step ", s, ": cpu errD_real ", a.errD_real, " gpu ", b.errD_real, "; errG ", a.errG, " ", b.errG);
    CHECK(std::fabs(a.errD_real - b.errD_real) <= 1e-4f * std::fabs(a.errD_real) + 1e-6f);
    CHECK(std::fabs(a.errG - b.errG) <= 1e-4f * std::fabs(a.errG) + 1e-6f);
  }
  auto pc = cpu->trainers[0]->generator().params(), pg = gpu->trainers[1]->generator().params();
  for (size_t i = 0; i < pc.size(); ++i) CHECK(rel_error(pc[i]->value.to_doubles(), pg[i]->value.to_doubles()) < 1e-4);
  expect_same_state(*gpu->trainers[0], *gpu->trainers[1], /*with_buffers=*/false);
}

TEST_CASE("gpu train cli: --ngpu 2 trains with replicas checked identical in graph mode and with a forced overflow") {
  GE_REQUIRE_GPUS(2);
  TempDir tmp;
  const std::string base = "train --dataset fake --imageSize 16 --ngf 8 --ndf 8 --batchSize 16 --ngpu 2 "
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
}
