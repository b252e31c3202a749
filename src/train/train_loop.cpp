#include "ganengine/train_loop.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "ganengine/atomic_file.h"
#include "ganengine/backend.h"
#include "ganengine/image_grid.h"
#include "ganengine/nccl_group.h"
#include "ganengine/process_group.h"
#include "ganengine/conv_algo_cache.h"
#include "ganengine/replica_set.h"
#include "ganengine/pending_logs.h"
#include "ganengine/process_clock.h"
#include "ganengine/profiling.h"
#include "ganengine/safetensors.h"
#include "ganengine/state_dict.h"
#include "ganengine/training_noise.h"
#include "ganengine/training_state.h"

namespace ge {

namespace {

volatile std::sig_atomic_t g_interrupted = 0;
void on_interrupt(int) { g_interrupted = 1; }

std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir == ".") return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string epoch_file(const std::string& outf, const char* fmt, int64_t epoch) {
  char buf[128];
  std::snprintf(buf, sizeof buf, fmt, static_cast<int>(epoch));
  return join_path(outf, buf);
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, s / 60 % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  return buf;
}

// metrics.jsonl: one JSON record per logged step, kept in memory and rewritten atomically at
// each sample interval, epoch end and exit, so the file on disk is always whole.
class MetricsLog {
 public:
  MetricsLog(std::string path, int64_t keep_until_step) : path_(std::move(path)) {
    // On resume, keep what the interrupted run logged up to where it saved its state.
    if (keep_until_step <= 0) return;
    std::ifstream in(path_);
    std::string line;
    while (std::getline(in, line)) {
      auto at = line.find("\"step\": ");
      if (at == std::string::npos) continue;
      if (std::stoll(line.substr(at + 8)) <= keep_until_step) text_ += line + "\n";
    }
  }
  void add(const std::string& json_line) { text_ += json_line + "\n"; }
  void flush() { write_file_atomically(path_, text_); }

 private:
  std::string path_;
  std::string text_;
};

std::string json_record(int64_t step, int64_t epoch, int64_t iter, const StepRecord& r, double images_per_s) {
  char buf[640];
  std::snprintf(buf, sizeof buf,
                "{\"step\": %lld, \"epoch\": %lld, \"iter\": %lld, \"loss_D\": %.9g, \"loss_G\": %.9g, "
                "\"errD_real\": %.9g, \"errD_fake\": %.9g, \"D_x\": %.9g, \"D_G_z1\": %.9g, \"D_G_z2\": %.9g, "
                "\"loss_scale\": [%.9g, %.9g, %.9g], \"overflow\": [%d, %d, %d], \"images_per_s\": %.1f}",
                static_cast<long long>(step), static_cast<long long>(epoch), static_cast<long long>(iter),
                r.errD_real + r.errD_fake, r.errG, r.errD_real, r.errD_fake, r.D_x, r.D_G_z1, r.D_G_z2, r.scale[0],
                r.scale[1], r.scale[2], r.overflow[0], r.overflow[1], r.overflow[2], images_per_s);
  return buf;
}

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

}  // namespace

void print_precision(const TrainOptions& opt, int nc) {
  TrainerConfig cfg = trainer_config(opt, nc);
  std::printf("precision policy (%s):\n", opt_level_name(opt.opt_level));
  for (auto& line : cfg.policy.describe()) std::printf("  %s\n", line.c_str());
  DcganTrainer trainer(cfg);
  print_network("Generator", trainer.generator());
  print_network("Discriminator", trainer.discriminator());
}

int run_training(const TrainOptions& opt) {
  const int R = opt.ngpu;  // replicas in this process, one per GPU
  if (R < 1 || R > 64) fail("--ngpu ", R, " (expected 1..64)");
  // Several processes (mpirun): one replica each, process_group.h.
  const ProcessGroupInfo pg = detect_process_group();
  const bool multi_process = pg.size > 1;
  if (multi_process && R > 1)
    fail("--ngpu ", R, " in each of ", pg.size, " processes: with mpirun every process drives one GPU; drop --ngpu");
  if (R > 1 && !opt.device.is_cuda()) fail("--ngpu ", R, " trains on GPUs: drop --device cpu or use --ngpu 1");
  if (multi_process && !opt.device.is_cuda()) fail("training over ", pg.size, " processes needs GPUs (--device cuda)");
  const int world = multi_process ? pg.size : R;  // shares of every batch
  const bool writer = pg.rank == 0;               // prints and writes the files for all
  if (opt.sync_bn && world == 1)
    fail("--sync-bn synchronises BatchNorm across GPUs: it needs --ngpu 2 or more, or several processes (mpirun)");
  if (world > 1 && opt.batch_size % world != 0)
    fail("--batchSize ", opt.batch_size, " must split evenly over the ", world, " GPUs (", opt.batch_size / world * world,
         " or ", (opt.batch_size / world + 1) * world, " would)");
  // Other ranks say nothing on stdout; their errors still reach stderr.
  if (!writer && !std::freopen("/dev/null", "w", stdout)) fail("rank ", pg.rank, ": cannot silence stdout");
  if (opt.batch_size < 1) fail("--batchSize ", opt.batch_size, " (expected a positive number)");
  if (opt.niter < 1) fail("--niter ", opt.niter, " (expected at least 1)");
  if (opt.sample_interval < 1 || opt.log_interval < 1) fail("--sample-interval and --log-interval must be >= 1");
  if (opt.batch_size * opt.nz > kMaxNoiseValuesPerStep)
    fail("--batchSize x --nz is too large (", opt.batch_size * opt.nz, " noise values per step, at most ",
         kMaxNoiseValuesPerStep, ")");
  ensure_directory(opt.outf);
  // Replica k runs on the k-th GPU from --device on; NCCL first, so a missing GPU or NCCL fails
  // before any data is read.
  std::vector<Device> devices;
  for (int k = 0; k < R; ++k)
    devices.push_back(multi_process ? Device::cuda(pg.local_rank)
                                    : (R == 1 ? opt.device : Device::cuda(opt.device.index + k)));
  std::unique_ptr<ReplicaSet> replicas;
  if (multi_process) {
    std::vector<std::unique_ptr<ReplicaGroup>> group;
    group.push_back(make_nccl_group(share_unique_id(pg, nccl_unique_id), pg.rank, pg.size, devices[0]));
    replicas = std::make_unique<ReplicaSet>(devices, std::move(group));
  } else {
    replicas = ReplicaSet::on_gpus(devices);
  }
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
  // Every replica draws the same global batch from its own source on its own GPU and takes its
  // share: no copies between GPUs, and the same batches whatever the number of replicas.
  const auto t_data = std::chrono::steady_clock::now();
  std::vector<DataPipeline> pipelines;
  for (const Device& d : devices) {
    data.device = d;
    pipelines.push_back(open_data_pipeline(data));
  }
  const double data_prep_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_data).count();
  DataPipeline& pipeline = pipelines[0];
  const Dataset* dataset = pipeline.dataset.get();
  BatchSource& batches = *pipeline.source;
  const TrainerConfig cfg = trainer_config(opt, dataset->channels());
  replicas->make_trainers(cfg);
  const std::vector<std::unique_ptr<DcganTrainer>>& trainers = replicas->trainers();
  DcganTrainer& trainer = replicas->trainer(0);  // replica 0 logs, samples and saves for all
  for (auto& t : trainers) {
    if (!opt.netG.empty()) nn::load_state_dict(t->generator(), load_safetensors(opt.netG).tensors, opt.netG);
    if (!opt.netD.empty()) nn::load_state_dict(t->discriminator(), load_safetensors(opt.netD).tensors, opt.netD);
  }

  const RunIdentity identity{opt.dataset,  opt_level_name(opt.opt_level), dtype_name(cfg.policy.half), opt.batch_size,
                             opt.image_size, opt.nz, opt.ngf, opt.ndf, dataset->channels(), opt.manual_seed};
  Tensor fixed_noise = Tensor::empty({opt.batch_size, opt.nz, 1, 1}, DType::F32, opt.device);
  ops::fill_normal(fixed_noise, opt.manual_seed, kFixedNoiseRegion);
  RunPosition pos;
  if (!opt.resume.empty()) {
    pos = load_training_state(opt.resume, trainer, fixed_noise, identity);
    for (int k = 1; k < R; ++k) {
      Tensor scratch = fixed_noise.clone();
      load_training_state(opt.resume, replicas->trainer(k), scratch, identity);
    }
    std::printf("resumed from %s at epoch %lld, iteration %lld (step %lld)\n", opt.resume.c_str(),
                static_cast<long long>(pos.epoch), static_cast<long long>(pos.iteration),
                static_cast<long long>(pos.global_step));
  }

  const int64_t per_epoch = batches.batches_per_epoch();
  const int64_t total_steps = per_epoch * opt.niter;
  const int64_t stop_at = opt.max_steps >= 0 ? std::min<int64_t>(opt.max_steps, total_steps) : total_steps;
  std::printf("ganengine train: %s (%lld images, %lld batches of %lld per epoch), %s on %s, %lld steps to go\n"
              "data: %s\n",
              dataset->name().c_str(), static_cast<long long>(dataset->size()), static_cast<long long>(per_epoch),
              static_cast<long long>(opt.batch_size), opt_level_name(opt.opt_level), opt.device.str().c_str(),
              static_cast<long long>(std::max<int64_t>(0, stop_at - pos.global_step)), batches.describe().c_str());
  if (world > 1) {
    char where[96];
    if (multi_process)
      std::snprintf(where, sizeof where, "%d processes (%s), one GPU each", pg.size,
                    pg.launcher == "mpi" ? "mpirun" : "GANENGINE_RANK");
    else
      std::snprintf(where, sizeof where, "%d replicas on cuda:%d..%d", R, devices.front().index, devices.back().index);
    std::printf("data parallel: %s (NCCL %s), %lld images each per step; %s\n", where, nccl_version().c_str(),
                static_cast<long long>(opt.batch_size / world),
                opt.sync_bn ? "BatchNorm statistics over all replicas (--sync-bn)"
                            : "BatchNorm statistics per replica, replica 0's running statistics are saved");
  }
  std::fflush(stdout);

  const std::string state_path = join_path(opt.outf, "training_state.safetensors");
  MetricsLog metrics(join_path(opt.outf, "metrics.jsonl"), pos.global_step);
  OverflowSummary overflows;
  const bool tty = opt.progress && isatty(fileno(stderr));
  g_interrupted = 0;
  auto prev_handler = std::signal(SIGINT, on_interrupt);

  using clock = std::chrono::steady_clock;
  const auto t_start = clock::now();
  auto seconds_since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
  int64_t steps_this_run = 0, images_this_run = 0;
  int64_t step = pos.global_step;
  int exit_code = 0;

  // A logged step's record, once it has reached the host: the console line, metrics.jsonl, the
  // overflow summary, the loss-scale floor check and the progress line.
  auto log_record = [&](const PendingLog& at, const StepRecord& r) {
    overflows.add(r, at.step);
    const double elapsed = seconds_since(t_start);
    const double ips = at.images / std::max(elapsed, 1e-9);
    std::printf("[%lld/%d][%lld/%lld] Loss_D: %.4f Loss_G: %.4f D(x): %.4f D(G(z)): %.4f / %.4f  scale: %g %g %g\n",
                static_cast<long long>(at.epoch), opt.niter, static_cast<long long>(at.iteration),
                static_cast<long long>(per_epoch), r.errD_real + r.errD_fake, r.errG, r.D_x, r.D_G_z1, r.D_G_z2,
                r.scale[0], r.scale[1], r.scale[2]);
    metrics.add(json_record(at.step, at.epoch, at.iteration, r, ips));
    if (writer) overflows.maybe_print(elapsed, r, false);
    if (exit_code == 0 && cfg.policy.dynamic_loss_scale &&
        (r.scale[0] <= cfg.policy.min_loss_scale || r.scale[1] <= cfg.policy.min_loss_scale ||
         r.scale[2] <= cfg.policy.min_loss_scale)) {
      std::fprintf(stderr,
                   "ganengine train: a loss scale reached its floor %g at step %lld: the gradients overflow even "
                   "at the smallest scale, so training has diverged (losses or weights are no longer finite). "
                   "Try a lower --lr, --opt-level O1/O2 instead of O3, or --half bf16; the last good weights are "
                   "the latest netG/netD_epoch files.\n",
                   cfg.policy.min_loss_scale, static_cast<long long>(at.step));
      exit_code = 3;
    }
    if (tty) {
      const double rate = (at.step + 1 - pos.global_step) / std::max(elapsed, 1e-9);
      std::fprintf(stderr, "\r\033[K%lld/%lld steps  %.0f img/s  ETA %s", static_cast<long long>(at.step + 1),
                   static_cast<long long>(stop_at), ips, format_duration((stop_at - at.step - 1) / rate).c_str());
      std::fflush(stderr);
    }
    std::fflush(stdout);
  };
  PendingLogs logs(trainer, log_record);
  auto save_epoch_outputs = [&](int64_t epoch, const RunPosition& next) {
    logs.drain();
    if (!writer) return;
    save_safetensors(epoch_file(opt.outf, "netG_epoch_%d.safetensors", epoch), nn::state_dict(trainer.generator()));
    save_safetensors(epoch_file(opt.outf, "netD_epoch_%d.safetensors", epoch), nn::state_dict(trainer.discriminator()));
    save_training_state(state_path, trainer, fixed_noise, next, identity);
    metrics.flush();
  };
  Tensor interrupt_flag;
  bool agreed_interrupt = false;
  auto agree_on_interrupt = [&] {
    if (!interrupt_flag.defined()) interrupt_flag = Tensor::zeros({1}, DType::F32, devices[0]);
    interrupt_flag.copy_from(Tensor::from_doubles({g_interrupted ? 1.0 : 0.0}, {1}, DType::F32));
    replicas->group(0).all_reduce_max(interrupt_flag);
    agreed_interrupt = interrupt_flag.to_doubles()[0] != 0;
  };
  auto interrupted = [&] { return multi_process ? agreed_interrupt : g_interrupted != 0; };
  auto save_samples = [&](const Tensor& real, int64_t epoch) {
    if (!writer) return;
    save_image_grid(real, join_path(opt.outf, "real_samples.png"));
    // As in the example, G runs on the fixed noise in training mode (batch statistics); unlike
    // the example, this leaves G's running statistics alone, so writing samples (which a stop
    // or resume adds) never changes the run: a resumed run stays bitwise the uninterrupted one.
    trainer.generator().set_update_running_stats(false);
    Tensor fake = trainer.generator().forward(fixed_noise, true);
    trainer.generator().set_update_running_stats(true);
    save_image_grid(fake, epoch_file(opt.outf, "fake_samples_epoch_%03d.png", epoch));
  };

  for (int64_t epoch = pos.epoch; epoch < opt.niter && step < stop_at && !interrupted(); ++epoch) {
    const int64_t first = epoch == pos.epoch ? pos.iteration : 0;
    Tensor last_real;
    bool last_sampled = false;
    int64_t i = first;
    for (; i < per_epoch && step < stop_at && !interrupted(); ++i) {
      Tensor real = batches.batch(epoch, i);
      // The test hook forces the overflow on replica 0 only: the flags combined across the
      // replicas must make every replica skip.
      for (auto& [at, loss] : opt.force_overflow)
        if (at == step) trainer.force_overflow_next_step(static_cast<LossId>(loss));
      if (step == opt.profile_steps.first) profiler_start();
      auto replica_step = [&](int k) {
        const Device d = devices[static_cast<size_t>(k)];
        const Tensor global = k == 0 ? real : pipelines[static_cast<size_t>(k)].source->batch(epoch, i);
        Tensor noise = Tensor::empty({global.dim(0), opt.nz, 1, 1}, DType::F32, d);
        fill_step_noise(noise, opt.manual_seed, step);
        if (world == 1) {
          trainer.step(global, noise);
          return;
        }
        // torch.chunk's split: full batches split evenly; a last, partial batch weights each
        // replica's gradients and losses by its share, so the step averages over images.
        const int64_t n = global.dim(0), chunk = (n + world - 1) / world, share = pg.rank + k;
        const int64_t begin = std::min<int64_t>(n, share * chunk), end = std::min<int64_t>(n, begin + chunk);
        replicas->trainer(k).set_replica_weight(static_cast<double>(end - begin) * world / n);
        replicas->trainer(k).step(global.slice0(begin, end), noise.slice0(begin, end));
      };
      if (world > 1 && (real.dim(0) + world - 1) / world * (world - 1) >= real.dim(0)) {
        if (writer)
          std::fprintf(stderr, "ganengine train: skipping a last batch of %lld images: too few to give each of the %d "
                       "GPUs one\n", static_cast<long long>(real.dim(0)), world);
        continue;
      }
      replicas->run(replica_step);
      if (opt.check_replicas && R > 1) check_replicas_identical(trainers, step);
      if (opt.check_replicas && multi_process) check_ranks_identical(trainer, replicas->group(0), step);
      if (step == opt.profile_steps.second) {
        synchronize(opt.device);  // the window holds the steps' device work, not only its launches
        profiler_stop();
      }
      ++step;
      if (++steps_this_run == 1) {
        // Start-up cost as a user sees it (the "process start to first step"): one wait
        // for the device, once per run.
        synchronize(opt.device);
        std::printf("first step done %.2f s after process start (%.2f s of it opening the dataset)",
                    seconds_since_process_start(), data_prep_s);
        const ConvAlgoCache& algos = process_conv_algo_cache();
        if (opt.device.is_cuda())
          std::printf("; cuDNN algorithms: %d searched, %d from %s", algos.searches(), algos.hits(),
                      algos.path().empty() ? "(no cache file)" : algos.path().c_str());
        std::printf("\n");
      }
      images_this_run += real.dim(0);
      last_real = real;
      const bool log_now = (i % opt.log_interval == 0) || i + 1 == per_epoch || step == stop_at;
      if (log_now) {
        logs.push(step - 1, epoch, i, images_this_run);
        // Processes stop together: an interrupt any of them saw is agreed on at every log point
        // (a collective and a host synchronisation, so only with several processes).
        if (multi_process) agree_on_interrupt();
      }
      if (exit_code) break;
      last_sampled = i % opt.sample_interval == 0;
      if (last_sampled) {
        save_samples(real, epoch);
        logs.drain();
        if (writer) metrics.flush();
      }
    }
    if (exit_code) break;
    // The epoch is over, or the run stops inside it: its samples and weights are written.
    if (last_real.defined() && !last_sampled) save_samples(last_real, epoch);
    RunPosition next{i == per_epoch ? epoch + 1 : epoch, i == per_epoch ? 0 : i, step};
    save_epoch_outputs(epoch, next);
  }
  std::signal(SIGINT, prev_handler);
  if (tty) std::fprintf(stderr, "\n");
  logs.drain();
  if (steps_this_run > 0) {
    if (writer) overflows.maybe_print(1e18, trainer.record(), true);
    const double elapsed = seconds_since(t_start);
    std::printf("done: %lld steps in %.1f s (%.1f images/s); outputs in %s\n", static_cast<long long>(steps_this_run),
                elapsed, images_this_run / std::max(elapsed, 1e-9), opt.outf.c_str());
  }
  if (interrupted()) {
    std::printf("interrupted: state saved to %s; continue with --resume %s\n", state_path.c_str(), state_path.c_str());
    return 130;
  }
  return exit_code;
}

}  // namespace ge
