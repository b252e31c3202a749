// run_training in stages: the topology of replicas and processes, the data pipelines, the
// trainers, the resume, a header, then TrainingLoop's epochs with their logs, samples and
// checkpoints.
#include "ganengine/train_loop.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/checked_size.h"
#include "core/conv_algo_cache.h"
#include "core/cpu_backend.h"
#include "core/process_clock.h"
#include "core/process_group.h"
#include "core/stop_signal.h"
#include "core/tuning_policy.h"
#include "ganengine/image_grid.h"
#include "ganengine/safetensors.h"
#include "ganengine/state_dict.h"
#include "ganengine/training_state.h"
#include "io/atomic_file.h"
#include "io/tensorboard_events.h"
#include "nn/fusion_plan.h"
#include "runtime/nccl_group.h"
#include "runtime/profiling.h"
#include "train/checkpoint_set.h"
#include "train/generator_ema.h"
#include "train/logged_step.h"
#include "train/metrics_file.h"
#include "train/output_folder.h"
#include "train/pending_logs.h"
#include "train/progress_line.h"
#include "train/replica_set.h"
#include "train/run_flags.h"
#include "train/run_record.h"
#include "train/skipped_images.h"
#include "train/training_noise.h"

namespace ge {

namespace {

std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir == ".") return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string epoch_file(const std::string& outf, const char* fmt, int64_t epoch) {
  char buf[128];
  std::snprintf(buf, sizeof buf, fmt, static_cast<int>(epoch));
  return join_path(outf, buf);
}

// metrics.jsonl: one JSON record per logged step, kept in memory and rewritten atomically at
// each sample interval, epoch end and exit, so the file on disk is always whole; a resumed run
// starts from the records its state holds (train/metrics_file.h).
class MetricsLog {
 public:
  MetricsLog(std::string path, int64_t keep_until_step)
      : path_(std::move(path)), text_(read_metrics_for_resume(path_, keep_until_step)) {}
  void add(const std::string& json_line) { text_ += json_line + "\n"; }
  void flush() { write_file_atomically(path_, text_); }

 private:
  std::string path_;
  std::string text_;
};

// Overflows are summarised, at most one line per interval, never one per step.
class OverflowSummary {
 public:
  void add(const StepRecord& r, int64_t step) {
    for (int i = 0; i < 3; ++i)
      if (r.overflow[i]) {
        ++count_[i];
        last_step_ = step;
      }
  }
  void maybe_print(double now_s, const StepRecord& r, bool force) {
    if (count_[0] + count_[1] + count_[2] == 0) return;
    if (!force && now_s - last_print_s_ < 30.0) return;
    std::fprintf(stderr,
                 "[amp] gradient overflow (step skipped, that loss's scale halved) since last report: "
                 "errD_real %lld, errD_fake %lld, errG %lld; last at step %lld; scales now %g %g %g\n",
                 static_cast<long long>(count_[0]), static_cast<long long>(count_[1]),
                 static_cast<long long>(count_[2]), static_cast<long long>(last_step_), r.scale[0], r.scale[1],
                 r.scale[2]);
    count_[0] = count_[1] = count_[2] = 0;
    last_print_s_ = now_s;
  }

 private:
  int64_t count_[3] = {0, 0, 0};
  int64_t last_step_ = 0;
  double last_print_s_ = -1e9;
};

TrainerConfig trainer_config(const TrainOptions& opt, int nc) {
  TrainerConfig cfg;
  cfg.net.image_size = opt.image_size;
  cfg.net.nz = opt.nz;
  cfg.net.ngf = opt.ngf;
  cfg.net.ndf = opt.ndf;
  cfg.net.nc = nc;
  cfg.policy = resolve_policy(opt.opt_level, opt.amp);
  cfg.device = opt.device;
  cfg.seed = opt.manual_seed;
  cfg.lr = opt.lr;
  cfg.beta1 = opt.beta1;
  cfg.cuda_graph = opt.cuda_graph;
  cfg.sync_batchnorm = opt.sync_bn;
  cfg.ema_decay = opt.ema_decay;
  return cfg;
}

// --check-replicas: every replica must hold bitwise the weights (and fp32 masters) of replica 0.
void check_replicas_identical(const std::vector<std::unique_ptr<DcganTrainer>>& trainers, int64_t step) {
  for (size_t k = 1; k < trainers.size(); ++k)
    for (int net = 0; net < 2; ++net) {
      auto mine = net ? trainers[k]->discriminator().named_params() : trainers[k]->generator().named_params();
      auto lead = net ? trainers[0]->discriminator().named_params() : trainers[0]->generator().named_params();
      for (size_t j = 0; j < mine.size(); ++j)
        for (int master = 0; master < 2; ++master) {
          const Tensor& a = master ? lead[j].second->master : lead[j].second->value;
          const Tensor& b = master ? mine[j].second->master : mine[j].second->value;
          if (!a.defined()) continue;
          const Tensor ha = a.to(Device::cpu()), hb = b.to(Device::cpu());
          if (std::memcmp(ha.data(), hb.data(), ha.nbytes()) != 0)
            fail("--check-replicas: after step ", step, " replica ", k, "'s ", net ? "netD " : "netG ", lead[j].first,
                 master ? " (fp32 master)" : "", " differs from replica 0's: the replicas have diverged");
        }
    }
}

// --check-replicas across processes: a value is the same everywhere when the maximum and the
// minimum over the ranks are both this rank's value.
void check_ranks_identical(DcganTrainer& trainer, ReplicaGroup& group, int64_t step) {
  for (int net = 0; net < 2; ++net)
    for (auto& [name, p] : net ? trainer.discriminator().named_params() : trainer.generator().named_params())
      for (int master = 0; master < 2; ++master) {
        const Tensor& mine = master ? p->master : p->value;
        if (!mine.defined()) continue;
        Tensor hi = mine.clone(), lo = mine.clone();
        ops::scale_inplace(lo, -1.f);
        group.all_reduce_max(hi);
        group.all_reduce_max(lo);
        ops::scale_inplace(lo, -1.f);
        const Tensor a = mine.to(Device::cpu()), b = hi.to(Device::cpu()), c = lo.to(Device::cpu());
        if (std::memcmp(a.data(), b.data(), a.nbytes()) != 0 || std::memcmp(a.data(), c.data(), a.nbytes()) != 0)
          fail("--check-replicas: after step ", step, " the ranks' ", net ? "netD " : "netG ", name,
               master ? " (fp32 master)" : "", " differ: the replicas have diverged");
      }
}

void print_network(const char* title, nn::Sequential& net) {
  std::printf("%s:\n", title);
  auto& layers = net.layers();
  for (size_t i = 0; i < layers.size(); ++i)
    std::printf("  main.%-3zu %-48s %s\n", i, layers[i]->describe().c_str(), layers[i]->precision().c_str());
}

// ---- run_training's stages, in the order it runs them ----

// Where the run's replicas are, and who speaks for them.
struct Topology {
  int replicas = 1;     // in this process, one per GPU
  ProcessGroupInfo pg;  // several processes (mpirun): one replica each, process_group.h
  bool multi_process = false;
  int world = 1;       // shares of every batch
  bool writer = true;  // rank 0 prints and writes the files for all
};

Topology resolve_topology(const TrainOptions& opt) {
  Topology t;
  const int R = t.replicas = opt.ngpu;
  if (R < 1 || R > 64) fail("--ngpu ", R, " (expected 1..64)");
  t.pg = detect_process_group();
  t.multi_process = t.pg.size > 1;
  if (t.multi_process && R > 1)
    fail("--ngpu ", R, " in each of ", t.pg.size, " processes: with mpirun every process drives one GPU; drop --ngpu");
  if (R > 1 && !opt.device.is_cuda()) fail("--ngpu ", R, " trains on GPUs: drop --device cpu or use --ngpu 1");
  if (t.multi_process && !opt.device.is_cuda())
    fail("training over ", t.pg.size, " processes needs GPUs (--device cuda)");
  t.world = t.multi_process ? t.pg.size : R;
  t.writer = t.pg.rank == 0;
  if (opt.sync_bn && t.world == 1)
    fail("--sync-bn synchronises BatchNorm across GPUs: it needs --ngpu 2 or more, or several processes (mpirun)");
  if (t.world > 1 && opt.batch_size % t.world != 0)
    fail("--batchSize ", opt.batch_size, " must split evenly over the ", t.world, " GPUs (",
         opt.batch_size / t.world * t.world, " or ", (opt.batch_size / t.world + 1) * t.world, " would)");
  return t;
}

// Other ranks say nothing on stdout; their errors still reach stderr.
void silence_other_ranks(const Topology& t) {
  if (!t.writer && !std::freopen("/dev/null", "w", stdout)) fail("rank ", t.pg.rank, ": cannot silence stdout");
}

void check_loop_options(const TrainOptions& opt) {
  if (opt.batch_size < 1) fail("--batchSize ", opt.batch_size, " (expected a positive number)");
  if (opt.niter < 1) fail("--niter ", opt.niter, " (expected at least 1)");
  if (opt.sample_interval < 1 || opt.log_interval < 1) fail("--sample-interval and --log-interval must be >= 1");
  const int64_t noise_values = checked_mul(opt.batch_size, opt.nz, "--batchSize x --nz (noise values per step)");
  if (noise_values > kMaxNoiseValuesPerStep)
    fail("--batchSize x --nz is too large (", noise_values, " noise values per step, at most ", kMaxNoiseValuesPerStep,
         ")");
}

// Replica k runs on the k-th GPU from --device on; under mpirun, on the process's local GPU.
std::vector<Device> replica_devices(const TrainOptions& opt, const Topology& t) {
  std::vector<Device> devices;
  for (int k = 0; k < t.replicas; ++k)
    devices.push_back(t.multi_process ? Device::cuda(t.pg.local_rank)
                                      : (t.replicas == 1 ? opt.device : Device::cuda(opt.device.index + k)));
  return devices;
}

// NCCL comes first, so that a missing GPU or NCCL fails before any data is read.
std::unique_ptr<ReplicaSet> join_replicas(const std::vector<Device>& devices, const Topology& t) {
  if (!t.multi_process) return ReplicaSet::on_gpus(devices);
  std::vector<std::unique_ptr<ReplicaGroup>> group;
  group.push_back(make_nccl_group(share_unique_id(t.pg, nccl_unique_id), t.pg.rank, t.pg.size, devices[0]));
  return std::make_unique<ReplicaSet>(devices, std::move(group));
}

DataPipelineOptions pipeline_options(const TrainOptions& opt) {
  DataPipelineOptions data;
  data.dataset = opt.dataset;
  data.dataroot = opt.dataroot;
  data.classes = opt.classes;
  data.image_size = opt.image_size;
  data.seed = opt.manual_seed;
  data.workers = opt.workers;
  data.batch_size = opt.batch_size;
  data.skip_bad_images = opt.skip_bad_images;
  data.download = opt.download;
  data.mirror = opt.download_mirror;
  data.cache_dir = opt.cache_dir;
  data.placement = opt.data_on;
  data.device = opt.device;
  data.gpu_dtype = resolve_policy(opt.opt_level, opt.amp).compute_dtype;
  data.gpu_format = nn::Placement::for_device(opt.device, data.gpu_dtype).format;
  return data;
}

// Every replica draws the same global batch from its own source on its own GPU and takes its
// share: no copies between GPUs, and the same batches whatever the number of replicas.
std::vector<DataPipeline> open_pipelines(DataPipelineOptions data, const std::vector<Device>& devices) {
  std::vector<DataPipeline> pipelines;
  for (const Device& d : devices) {
    data.device = d;
    pipelines.push_back(open_data_pipeline(data));
  }
  return pipelines;
}

// What the training loop runs on, filled in by the stages before it.
struct RunSetup {
  Topology topo;
  std::vector<Device> devices;
  std::unique_ptr<ReplicaSet> replicas;
  std::vector<DataPipeline> pipelines;  // one per replica; replica 0's stands for the run
  double data_prep_s = 0;               // the time it took to open them
  TrainerConfig cfg;
  RunIdentity identity;
  Tensor fixed_noise;  // the noise of the fake sample grids
  RunPosition start;   // where this run begins: at the start, or where a resumed one stopped

  const Dataset& dataset() const { return *pipelines[0].dataset; }
  BatchSource& batches() const { return *pipelines[0].source; }
};

// One trainer per replica, each from --netG and --netD's weights when given.
void build_trainers(const TrainOptions& opt, RunSetup& run) {
  run.cfg = trainer_config(opt, run.dataset().channels());
  run.replicas->make_trainers(run.cfg);
  for (auto& t : run.replicas->trainers()) {
    if (!opt.netG.empty()) nn::load_state_dict(t->generator(), nn::load_state_dict_file(opt.netG), opt.netG);
    if (!opt.netD.empty()) nn::load_state_dict(t->discriminator(), nn::load_state_dict_file(opt.netD), opt.netD);
    if (!opt.netG.empty()) t->restart_ema();  // the average starts from the loaded weights
  }
}

// The run's identity and fixed noise, and its starting position: --resume's state, loaded into
// every replica (the saved fixed noise replaces the drawn one), else the very beginning.
void start_or_resume(const TrainOptions& opt, RunSetup& run) {
  run.identity = RunIdentity{opt.dataset,
                             opt_level_name(opt.opt_level),
                             dtype_name(run.cfg.policy.half),
                             opt.batch_size,
                             opt.image_size,
                             opt.nz,
                             opt.ngf,
                             opt.ndf,
                             run.dataset().channels(),
                             opt.manual_seed};
  run.fixed_noise = Tensor::empty({opt.batch_size, opt.nz, 1, 1}, DType::F32, opt.device);
  ops::fill_normal(run.fixed_noise, opt.manual_seed, kFixedNoiseRegion);
  if (opt.resume.empty()) return;
  run.start = load_training_state(opt.resume, run.replicas->trainer(0), run.fixed_noise, run.identity);
  for (int k = 1; k < run.topo.replicas; ++k) {
    Tensor scratch = run.fixed_noise.clone();
    load_training_state(opt.resume, run.replicas->trainer(k), scratch, run.identity);
  }
  // A position no save writes (a damaged or hand-edited file): an iteration past the epoch's
  // last batch would otherwise silently start the next epoch.
  const int64_t per_epoch = run.batches().batches_per_epoch();
  if (run.start.iteration >= per_epoch)
    fail(opt.resume, ": iteration ", run.start.iteration, " is beyond epoch ", run.start.epoch, "'s last batch (",
         per_epoch - 1, " with --batchSize ", opt.batch_size, " on ", run.dataset().size(),
         " images): the file is damaged or belongs to another dataset");
  std::printf("resumed from %s at epoch %lld, iteration %lld (step %lld)\n", opt.resume.c_str(),
              static_cast<long long>(run.start.epoch), static_cast<long long>(run.start.iteration),
              static_cast<long long>(run.start.global_step));
}

// The global step the run stops before: the end of --niter epochs, or --max-steps when sooner.
int64_t stop_step(const TrainOptions& opt, int64_t per_epoch) {
  const int64_t total_steps = checked_mul(per_epoch, opt.niter, "--niter x batches per epoch (steps in all)");
  return opt.max_steps >= 0 ? std::min<int64_t>(opt.max_steps, total_steps) : total_steps;
}

void print_data_parallel(const TrainOptions& opt, const RunSetup& run) {
  const Topology& t = run.topo;
  char where[96];
  if (t.multi_process)
    std::snprintf(where, sizeof where, "%d processes (%s), one GPU each", t.pg.size,
                  t.pg.launcher == "mpi" ? "mpirun" : "GANENGINE_RANK");
  else
    std::snprintf(where, sizeof where, "%d replicas on cuda:%d..%d", t.replicas, run.devices.front().index,
                  run.devices.back().index);
  std::printf("data parallel: %s (NCCL %s), %lld images each per step; %s\n", where, nccl_version().c_str(),
              static_cast<long long>(opt.batch_size / t.world),
              opt.sync_bn ? "BatchNorm statistics over all replicas (--sync-bn)"
                          : "BatchNorm statistics per replica, replica 0's running statistics are saved");
}

void print_run_header(const TrainOptions& opt, const RunSetup& run) {
  const Dataset& dataset = run.dataset();
  const int64_t per_epoch = run.batches().batches_per_epoch();
  const int64_t to_go = std::max<int64_t>(0, stop_step(opt, per_epoch) - run.start.global_step);
  std::printf(
      "ganengine train: %s (%lld images, %lld batches of %lld per epoch), %s on %s, %lld steps to go\n"
      "data: %s\n",
      dataset.name().c_str(), static_cast<long long>(dataset.size()), static_cast<long long>(per_epoch),
      static_cast<long long>(opt.batch_size), opt_level_name(opt.opt_level), opt.device.str().c_str(),
      static_cast<long long>(to_go), run.batches().describe().c_str());
  if (opt.batch_size > dataset.size())
    std::printf("note: --batchSize %lld is larger than the dataset: each epoch is one partial batch of %lld images\n",
                static_cast<long long>(opt.batch_size), static_cast<long long>(dataset.size()));
  const std::string skipped = skipped_images_summary(dataset, /*at_end=*/false);
  if (!skipped.empty()) std::fprintf(stderr, "%s\n", skipped.c_str());
  if (run.topo.world > 1) print_data_parallel(opt, run);
  if (opt.device.is_cpu())
    std::printf("cpu: %s; %s\n", describe_cpu_backend().c_str(),
                describe_cpu_precision(resolve_policy(opt.opt_level, opt.amp).compute_dtype).c_str());
  std::fflush(stdout);
}

// What run.json records beside the flags (run_record.h).
RunFacts run_facts(const TrainOptions& opt, const RunSetup& run) {
  RunFacts f;
  f.policy = run.cfg.policy;
  f.dataset = run.dataset().name();
  f.dataset_images = run.dataset().size();
  f.batches_per_epoch = run.batches().batches_per_epoch();
  f.start_step = run.start.global_step;
  f.stop_step = stop_step(opt, f.batches_per_epoch);
  f.world = run.topo.world;
  f.resumed = !opt.resume.empty();
  return f;
}

// The epoch loop and everything along it: every replica's steps, the console lines and
// metrics.jsonl, sample grids, each epoch's checkpoint set, the training state between them
// (--checkpoint-every), and SIGINT or SIGTERM, which stop the run after saving where it was.
class TrainingLoop {
 public:
  TrainingLoop(const TrainOptions& opt, RunSetup& run);
  int run();  // the exit code

 private:
  using clock = std::chrono::steady_clock;

  bool run_epoch(int64_t epoch, int64_t first);
  bool train_step(int64_t epoch, int64_t i, const Tensor& real);
  bool skip_small_batch(const Tensor& real);
  void replica_step(int k, int64_t epoch, int64_t i, const Tensor& real);
  void check_replicas();
  void report_first_step();
  void log_step(int64_t epoch, int64_t i);
  void on_record(const PendingLog& at, const StepRecord& r);
  void check_scale_floor(const PendingLog& at, const StepRecord& r);
  void save_samples(const Tensor& real, int64_t epoch);
  void save_epoch_outputs(int64_t epoch, const RunPosition& next);
  CheckpointFile state_file(const RunPosition& next);
  bool checkpoint_due() const;
  void save_mid_epoch_state(const RunPosition& next);
  void agree_on_interrupt();
  bool interrupted() const;
  double seconds_since_start() const { return std::chrono::duration<double>(clock::now() - t_start_).count(); }
  int finish();

  const TrainOptions& opt_;
  RunSetup& run_;
  const Topology& topo_;
  ReplicaSet& replicas_;
  DcganTrainer& trainer_;  // replica 0 logs, samples and saves for all
  const int64_t per_epoch_;
  const int64_t stop_at_;
  const std::string state_path_;
  MetricsLog metrics_;
  OverflowSummary overflows_;
  const bool tty_;
  ProgressLine progress_{tty_};
  std::unique_ptr<TensorBoardWriter> tensorboard_;  // rank 0, unless --no-tensorboard
  std::unique_ptr<EmaSampler> ema_sampler_;         // with --ema-decay: draws the sample grids
  PendingLogs logs_;
  clock::time_point t_start_;
  clock::time_point last_checkpoint_;  // of the training state, for the time-based --checkpoint-every
  int64_t step_;
  int64_t steps_this_run_ = 0, images_this_run_ = 0;
  int exit_code_ = 0;
  Tensor interrupt_flag_;
  bool agreed_interrupt_ = false;
};

TrainingLoop::TrainingLoop(const TrainOptions& opt, RunSetup& run)
    : opt_(opt),
      run_(run),
      topo_(run.topo),
      replicas_(*run.replicas),
      trainer_(run.replicas->trainer(0)),
      per_epoch_(run.batches().batches_per_epoch()),
      stop_at_(stop_step(opt, per_epoch_)),
      state_path_(join_path(opt.outf, "training_state.safetensors")),
      metrics_(join_path(opt.outf, "metrics.jsonl"), run.start.global_step),
      tty_(opt.progress && isatty(fileno(stderr))),
      logs_(trainer_, [this](const PendingLog& at, const StepRecord& r) { on_record(at, r); }),
      step_(run.start.global_step) {}

int TrainingLoop::run() {
  // From the first step on, SIGINT and SIGTERM stop the run at the next step boundary with its
  // state saved; before, nothing is lost by the default action (every file is written atomically).
  const StopSignalScope stop_on_signal;
  t_start_ = last_checkpoint_ = clock::now();
  const RunPosition& start = run_.start;
  if (topo_.writer && opt_.tensorboard)
    tensorboard_ =
        std::make_unique<TensorBoardWriter>(join_path(opt_.outf, "tb"), opt_.resume.empty() ? -1 : start.global_step);
  if (topo_.writer && !trainer_.generator_ema().empty()) ema_sampler_ = std::make_unique<EmaSampler>(trainer_);
  for (int64_t epoch = start.epoch; epoch < opt_.niter && step_ < stop_at_ && !interrupted(); ++epoch)
    if (!run_epoch(epoch, epoch == start.epoch ? start.iteration : 0)) break;
  return finish();
}

// Epoch `epoch` from batch `first` on, then its samples and weights. False when the run ends
// at once, without them (a loss scale reached its floor).
bool TrainingLoop::run_epoch(int64_t epoch, int64_t first) {
  Tensor last_real;
  bool last_sampled = false;
  int64_t i = first;
  for (; i < per_epoch_ && step_ < stop_at_ && !interrupted(); ++i) {
    const Tensor real = run_.batches().batch(epoch, i);
    if (!train_step(epoch, i, real)) continue;
    last_real = real;
    log_step(epoch, i);
    if (exit_code_) return false;
    last_sampled = i % opt_.sample_interval == 0;
    if (last_sampled) {
      save_samples(real, epoch);
      logs_.drain();
      if (topo_.writer) metrics_.flush();
    }
    if (i + 1 < per_epoch_ && step_ < stop_at_ && !interrupted() && checkpoint_due())
      save_mid_epoch_state(RunPosition{epoch, i + 1, step_});
  }
  // The epoch is over, or the run stops inside it: its samples and weights are written.
  if (last_real.defined() && !last_sampled) save_samples(last_real, epoch);
  save_epoch_outputs(epoch, RunPosition{i == per_epoch_ ? epoch + 1 : epoch, i == per_epoch_ ? 0 : i, step_});
  return true;
}

// Global step step_ on batch i of the epoch, every replica taking its share. False when the
// batch is skipped, too small to share.
bool TrainingLoop::train_step(int64_t epoch, int64_t i, const Tensor& real) {
  // The test hook forces the overflow on replica 0 only: the flags combined across the
  // replicas must make every replica skip.
  for (auto& [at, loss] : opt_.force_overflow)
    if (at == step_) trainer_.force_overflow_next_step(static_cast<LossId>(loss));
  if (step_ == opt_.profile_steps.first) profiler_start();
  if (skip_small_batch(real)) return false;
  replicas_.run([&](int k) { replica_step(k, epoch, i, real); });
  check_replicas();
  if (step_ == opt_.profile_steps.second) {
    synchronize(opt_.device);  // the window holds the steps' device work, not only its launches
    profiler_stop();
  }
  ++step_;
  if (++steps_this_run_ == 1) report_first_step();
  images_this_run_ += real.dim(0);
  progress_.update({epoch, opt_.niter, i + 1, per_epoch_, step_, stop_at_, steps_this_run_, images_this_run_});
  return true;
}

// A last batch too small to give each GPU an image is skipped.
bool TrainingLoop::skip_small_batch(const Tensor& real) {
  const int world = topo_.world;
  if (!(world > 1 && (real.dim(0) + world - 1) / world * (world - 1) >= real.dim(0))) return false;
  const auto hold = progress_.hold();
  if (topo_.writer)
    std::fprintf(stderr,
                 "ganengine train: skipping a last batch of %lld images: too few to give each of the %d "
                 "GPUs one\n",
                 static_cast<long long>(real.dim(0)), world);
  return true;
}

// Replica k's part of the step, on its own thread when there are several.
void TrainingLoop::replica_step(int k, int64_t epoch, int64_t i, const Tensor& real) {
  const size_t at = static_cast<size_t>(k);
  const Tensor global = k == 0 ? real : run_.pipelines[at].source->batch(epoch, i);
  Tensor noise = Tensor::empty({global.dim(0), opt_.nz, 1, 1}, DType::F32, run_.devices[at]);
  fill_step_noise(noise, opt_.manual_seed, step_);
  const int world = topo_.world;
  if (world == 1) {
    trainer_.step(global, noise);
    return;
  }
  // torch.chunk's split: full batches split evenly; a last, partial batch weights each
  // replica's gradients and losses by its share, so the step averages over images.
  const int64_t n = global.dim(0), chunk = (n + world - 1) / world, share = topo_.pg.rank + k;
  const int64_t begin = std::min<int64_t>(n, share * chunk), end = std::min<int64_t>(n, begin + chunk);
  replicas_.trainer(k).set_replica_weight(static_cast<double>(end - begin) * world / n);
  replicas_.trainer(k).step(global.slice0(begin, end), noise.slice0(begin, end));
}

void TrainingLoop::check_replicas() {
  if (!opt_.check_replicas) return;
  if (topo_.replicas > 1) check_replicas_identical(replicas_.trainers(), step_);
  if (topo_.multi_process) check_ranks_identical(trainer_, replicas_.group(0), step_);
}

// Start-up cost as a user sees it, from process start to the first step done: one wait for
// the device, once per run.
void TrainingLoop::report_first_step() {
  synchronize(opt_.device);
  const auto hold = progress_.hold();
  std::printf("first step done %.2f s after process start (%.2f s of it opening the dataset)",
              seconds_since_process_start(), run_.data_prep_s);
  const ConvAlgoCache& algos = process_conv_algo_cache();
  if (opt_.device.is_cuda())
    std::printf("; cuDNN algorithms: %d searched, %d from %s", algos.searches(), algos.hits(),
                algos.path().empty() ? "(no cache file)" : algos.path().c_str());
  std::printf("\n");
}

// Queues the record of the step just taken (step_ - 1, batch i) when it is one to log.
void TrainingLoop::log_step(int64_t epoch, int64_t i) {
  const bool log_now = (i % opt_.log_interval == 0) || i + 1 == per_epoch_ || step_ == stop_at_;
  if (!log_now) return;
  logs_.push(step_ - 1, epoch, i, images_this_run_);
  // Processes stop together: an interrupt any of them saw is agreed on at every log point
  // (a collective and a host synchronisation, so only with several processes).
  if (topo_.multi_process) agree_on_interrupt();
}

// A logged step's record, once it has reached the host: the console line, metrics.jsonl and
// TensorBoard's scalars (both from the same LoggedStep), the overflow summary and the
// loss-scale floor check, with the progress line erased meanwhile.
void TrainingLoop::on_record(const PendingLog& at, const StepRecord& r) {
  const auto hold = progress_.hold();
  overflows_.add(r, at.step);
  const double elapsed = seconds_since_start();
  LoggedStep logged{at.step, at.epoch, at.iteration, r};
  logged.images_per_s = std::round(at.images / std::max(elapsed, 1e-9) * 10) / 10;
  logged.wall_time = wall_time_now();
  logged.elapsed_s = elapsed;
  logged.lr_G = logged.lr_D = opt_.lr;
  std::printf("[%lld/%d][%lld/%lld] Loss_D: %.4f Loss_G: %.4f D(x): %.4f D(G(z)): %.4f / %.4f  scale: %g %g %g\n",
              static_cast<long long>(at.epoch), opt_.niter, static_cast<long long>(at.iteration),
              static_cast<long long>(per_epoch_), r.errD_real + r.errD_fake, r.errG, r.D_x, r.D_G_z1, r.D_G_z2,
              r.scale[0], r.scale[1], r.scale[2]);
  metrics_.add(metrics_record(logged));
  if (tensorboard_) {
    tensorboard_->add_scalars(at.step, tensorboard_scalars(logged), logged.wall_time);
    tensorboard_->flush();
  }
  if (topo_.writer) overflows_.maybe_print(elapsed, r, false);
  check_scale_floor(at, r);
  std::fflush(stdout);
}

// A dynamic loss scale at its floor means the run has diverged: it ends with exit code 3.
void TrainingLoop::check_scale_floor(const PendingLog& at, const StepRecord& r) {
  const PrecisionPolicy& policy = run_.cfg.policy;
  const bool at_floor =
      r.scale[0] <= policy.min_loss_scale || r.scale[1] <= policy.min_loss_scale || r.scale[2] <= policy.min_loss_scale;
  if (exit_code_ != 0 || !policy.dynamic_loss_scale || !at_floor) return;
  std::fprintf(stderr,
               "ganengine train: a loss scale reached its floor %g at step %lld: the gradients overflow even "
               "at the smallest scale, so training has diverged (losses or weights are no longer finite). "
               "Try a lower --lr, --opt-level O1/O2 instead of O3, or --half bf16; the last good weights are "
               "the latest netG/netD_epoch files.\n",
               policy.min_loss_scale, static_cast<long long>(at.step));
  exit_code_ = 3;
}

void TrainingLoop::save_samples(const Tensor& real, int64_t epoch) {
  if (!topo_.writer) return;
  save_image_grid(real, join_path(opt_.outf, "real_samples.png"));
  // As in the example, G runs on the fixed noise in training mode (batch statistics); unlike
  // the example, this leaves G's running statistics alone, so writing samples (which a stop
  // or resume adds) never changes the run: a resumed run stays bitwise the uninterrupted one.
  // With --ema-decay the grid shows the averaged weights, drawn the same way by a generator of
  // their own.
  Tensor fake;
  if (ema_sampler_) {
    fake = ema_sampler_->sample(trainer_, run_.fixed_noise);
  } else {
    trainer_.generator().set_update_running_stats(false);
    fake = trainer_.generator().forward(run_.fixed_noise, true);
    trainer_.generator().set_update_running_stats(true);
  }
  const std::string grid = epoch_file(opt_.outf, "fake_samples_epoch_%03d.png", epoch);
  save_image_grid(fake, grid);
  if (tensorboard_) {
    tensorboard_->add_png_file(step_ - 1, "fake_samples", grid, wall_time_now());
    tensorboard_->flush();
  }
}

void TrainingLoop::save_epoch_outputs(int64_t epoch, const RunPosition& next) {
  logs_.drain();
  if (!topo_.writer) return;
  // One checkpoint set (train/checkpoint_set.h): all written before any is renamed, the state last.
  std::vector<CheckpointFile> set;
  set.push_back({epoch_file(opt_.outf, "netG_epoch_%d.safetensors", epoch), nn::state_dict(trainer_.generator()), {}});
  set.push_back(
      {epoch_file(opt_.outf, "netD_epoch_%d.safetensors", epoch), nn::state_dict(trainer_.discriminator()), {}});
  if (!trainer_.generator_ema().empty())
    set.push_back({epoch_file(opt_.outf, "netG_ema_epoch_%d.safetensors", epoch), ema_state_dict(trainer_), {}});
  set.push_back(state_file(next));
  write_checkpoint_set(std::move(set), new_checkpoint_id(step_));
  last_checkpoint_ = clock::now();
  metrics_.flush();
}

// The training state with the run's flags, so that --resume FILE alone restores them.
CheckpointFile TrainingLoop::state_file(const RunPosition& next) {
  SafeTensorsFile contents = training_state_contents(trainer_, run_.fixed_noise, next, run_.identity);
  contents.metadata[kRunFlagsKey] = encode_run_flags(opt_.flag_values);
  return {state_path_, std::move(contents.tensors), std::move(contents.metadata)};
}

// --checkpoint-every: N steps, or the interval of training time since the last save.
bool TrainingLoop::checkpoint_due() const {
  if (opt_.checkpoint_every_steps > 0) return step_ % opt_.checkpoint_every_steps == 0;
  return opt_.checkpoint_every_seconds > 0 &&
         std::chrono::duration<double>(clock::now() - last_checkpoint_).count() >= opt_.checkpoint_every_seconds;
}

// The training state alone: the epoch's weights are written at its end, as the example does.
void TrainingLoop::save_mid_epoch_state(const RunPosition& next) {
  logs_.drain();
  last_checkpoint_ = clock::now();
  if (!topo_.writer) return;
  write_checkpoint_set({state_file(next)}, new_checkpoint_id(step_));
  metrics_.flush();
  const auto hold = progress_.hold();
  std::printf("checkpoint: training state at step %lld (epoch %lld, iteration %lld) saved to %s\n",
              static_cast<long long>(next.global_step), static_cast<long long>(next.epoch),
              static_cast<long long>(next.iteration), state_path_.c_str());
  std::fflush(stdout);
}

void TrainingLoop::agree_on_interrupt() {
  if (!interrupt_flag_.defined()) interrupt_flag_ = Tensor::zeros({1}, DType::F32, run_.devices[0]);
  interrupt_flag_.copy_from(Tensor::from_doubles({stop_signal() != 0 ? 1.0 : 0.0}, {1}, DType::F32));
  replicas_.group(0).all_reduce_max(interrupt_flag_);
  agreed_interrupt_ = interrupt_flag_.to_doubles()[0] != 0;
}

// With several processes, only the interrupt they agreed on counts, so that they stop together.
bool TrainingLoop::interrupted() const { return topo_.multi_process ? agreed_interrupt_ : stop_signal() != 0; }

int TrainingLoop::finish() {
  progress_.finish();
  logs_.drain();
  const std::string skipped = skipped_images_summary(run_.dataset(), /*at_end=*/true);
  if (!skipped.empty() && topo_.writer) std::fprintf(stderr, "%s\n", skipped.c_str());
  if (steps_this_run_ > 0) {
    if (topo_.writer) overflows_.maybe_print(1e18, trainer_.record(), true);
    const double elapsed = seconds_since_start();
    std::printf("done: %lld steps in %.1f s (%.1f images/s); outputs in %s\n", static_cast<long long>(steps_this_run_),
                elapsed, images_this_run_ / std::max(elapsed, 1e-9), opt_.outf.c_str());
  }
  if (interrupted()) {
    // A rank that only agreed to stop reports what its peers received; SIGINT when unknown.
    const int signo = stop_signal() != 0 ? stop_signal() : SIGINT;
    std::printf("stopped by %s\n", stop_signal_name(signo));
    if (steps_this_run_ > 0 || run_.start.global_step > 0)
      std::printf("interrupted: state saved to %s; continue with --resume %s\n", state_path_.c_str(),
                  state_path_.c_str());
    else
      std::printf("interrupted before the first step: nothing to save\n");
    return 128 + signo;
  }
  return exit_code_;
}

}  // namespace

void print_precision(const TrainOptions& opt, int nc) {
  TrainerConfig cfg = trainer_config(opt, nc);
  std::printf("precision policy (%s):\n", opt_level_name(opt.opt_level));
  for (auto& line : cfg.policy.describe()) std::printf("  %s\n", line.c_str());
  DcganTrainer trainer(cfg);
  print_network("Generator", trainer.generator());
  print_network("Discriminator", trainer.discriminator());
  std::printf("fusion across layers (src/nn/fusion_plan.h):\n");
  for (const nn::Fusion& f : trainer.generator().fusion()) std::printf("  Generator: %s\n", f.describe().c_str());
  for (const nn::Fusion& f : trainer.discriminator().fusion())
    std::printf("  Discriminator: %s\n", f.describe().c_str());
  for (const nn::Fusion& f : nn::plan_step_fusion(trainer.generator(), trainer.discriminator()))
    std::printf("  Generator -> Discriminator: %s\n", f.describe().c_str());
  std::printf("tuning policy (GANENGINE_TUNING overrides):\n");
  for (const auto& line : tuning().describe()) std::printf("  %s\n", line.c_str());
}

int run_training(const TrainOptions& opt) {
  RunSetup run;
  run.topo = resolve_topology(opt);
  silence_other_ranks(run.topo);
  check_loop_options(opt);
  ensure_directory(opt.outf);
  if (run.topo.writer) prepare_output_folder(opt);
  run.devices = replica_devices(opt, run.topo);
  run.replicas = join_replicas(run.devices, run.topo);
  const DataPipelineOptions data = pipeline_options(opt);
  const auto t_data = std::chrono::steady_clock::now();
  run.pipelines = open_pipelines(data, run.devices);
  run.data_prep_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_data).count();
  build_trainers(opt, run);
  start_or_resume(opt, run);
  print_run_header(opt, run);
  if (run.topo.writer) write_run_json(join_path(opt.outf, "run.json"), opt, run_facts(opt, run));
  return TrainingLoop(opt, run).run();
}

}  // namespace ge
