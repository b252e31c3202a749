#include "ganengine/step_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/backend.h"
#include "ganengine/allocator.h"
#include "runtime/gpu_measure.h"
#include "runtime/profiling.h"
#include "train/replica_set.h"
#include "train/step_flops.h"
#include "train/training_noise.h"

namespace ge {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The real batch as the GPU-resident data source hands it to training (train_loop.cpp): in the
// compute dtype and the networks' layout, on the device, so the bench times exactly the step `train` runs. Values
// are drawn once as f32 uniform in [0, 1) and mapped to [-1, 1), the range of Normalize(0.5, 0.5).
Tensor synthetic_real_batch(const StepBenchConfig& cfg, const PrecisionPolicy& policy) {
  const int64_t s = cfg.net.image_size;
  Tensor host = Tensor::empty({cfg.batch, cfg.net.nc, s, s}, DType::F32);
  ops::fill_uniform(host, cfg.seed, /*offset=*/0);
  float* p = host.data_as<float>();
  for (int64_t i = 0, n = host.numel(); i < n; ++i) p[i] = 2.f * p[i] - 1.f;
  return ops::converted(host, policy.compute_dtype, nn::Placement::for_device(cfg.device, policy.compute_dtype).format,
                        cfg.device);
}

// StepBenchConfig::data's options for this configuration.
DataPipelineOptions bench_data_options(const StepBenchConfig& cfg, const PrecisionPolicy& policy) {
  DataPipelineOptions d = *cfg.data;
  d.image_size = cfg.net.image_size;
  d.batch_size = cfg.batch;
  d.seed = cfg.seed;
  d.gpu_dtype = policy.compute_dtype;
  return d;
}

// A source over `ds` on each GPU: every replica draws the global batch from its own and takes
// its share, as train_loop.cpp does.
std::vector<std::unique_ptr<BatchSource>> open_bench_sources(const Dataset& ds, DataPipelineOptions d,
                                                             const std::vector<Device>& devices, int nc) {
  GE_CHECK(ds.channels() == nc, "run_step_bench: --dataset ", d.dataset, " has ", ds.channels(),
           " channels, the networks ", nc);
  if (ds.size() < d.batch_size)
    fail("--dataset ", d.dataset, " holds ", ds.size(), " images, fewer than one batch of ", d.batch_size,
         " (the bench steps through full batches only): a smaller --batch-sizes, or a larger dataset");
  std::vector<std::unique_ptr<BatchSource>> out;
  for (const Device& device : devices) {
    d.device = device;
    d.gpu_format = nn::Placement::for_device(device, d.gpu_dtype).format;
    out.push_back(open_batch_source(ds, d));
    out.back()->set_drop_last(true);
  }
  return out;
}

// The CPU's step (the fast backend or the reference, whichever is chosen): one synthetic batch
// and its noise in host memory, every step eager, each window timed on the host clock (the CPU
// ops finish before they return).
StepBenchResult run_cpu_step_bench(const StepBenchConfig& cfg) {
  GE_CHECK(!cfg.data, "run_step_bench: the input pipeline (--dataset) is timed on the GPU only");
  GE_CHECK(cfg.replicas == 1 && !cfg.cuda_graph, "run_step_bench: the CPU runs one eager replica");
  TrainerConfig tc;
  tc.net = cfg.net;
  tc.policy = resolve_policy(cfg.level, cfg.amp);
  tc.seed = cfg.seed;
  tc.device = cfg.device;
  tc.cuda_graph = false;
  DcganTrainer trainer(tc);
  const Tensor real = synthetic_real_batch(cfg, tc.policy);
  Tensor noise = Tensor::empty({cfg.batch, cfg.net.nz, 1, 1}, DType::F32, cfg.device);
  ops::fill_normal(noise, cfg.seed, /*offset=*/ops::philox_counters_for(real.numel()));
  for (int s = 0; s < cfg.warmup; ++s) trainer.step(real, noise);
  StepBenchResult r;
  r.data = "one synthetic batch in host memory (no input pipeline)";
  for (int w = 0; w < cfg.windows; ++w) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int s = 0; s < cfg.steps; ++s) trainer.step(real, noise);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    r.window_ms_per_step.push_back(ms / cfg.steps);
  }
  r.ms_per_step = median(r.window_ms_per_step);
  r.images_per_s = static_cast<double>(cfg.batch) / (r.ms_per_step * 1e-3);
  r.step_flops = dcgan_step_flops(cfg.net, cfg.batch);
  r.tflops = static_cast<double>(r.step_flops) / (r.ms_per_step * 1e-3) / 1e12;
  r.last = trainer.record();
  for (float v : {r.last.errD_real, r.last.errD_fake, r.last.errG}) r.finite = r.finite && std::isfinite(v);
  return r;
}

}  // namespace

StepBenchResult run_step_bench(const StepBenchConfig& cfg) {
  if (cfg.device.is_cpu()) return run_cpu_step_bench(cfg);
  GE_CHECK(cfg.device.is_cuda(), "run_step_bench on ", cfg.device.str());
  GE_CHECK(cfg.batch >= 1 && cfg.warmup >= 1 && cfg.steps >= 1 && cfg.windows >= 1, "run_step_bench: batch ", cfg.batch,
           " warmup ", cfg.warmup, " steps ", cfg.steps, " windows ", cfg.windows);
  const int R = cfg.replicas;
  GE_CHECK(R >= 1 && cfg.batch % R == 0, "run_step_bench: batch ", cfg.batch, " does not split over ", R, " GPUs");
  std::vector<Device> devices;
  for (int k = 0; k < R; ++k) devices.push_back(Device::cuda(cfg.device.index + k));
  // Whatever earlier configurations left cached (allocator blocks, the cuDNN workspace grown for
  // their algorithms) goes back to the driver, so this one's peak and device total start from
  // the same baseline. (Kept, O0's workspace made O2 at batch 1024 report 1361 MiB, not 1123.)
  for (const Device& d : devices) {
    synchronize(d);
    cuda_allocator_release_cached(d.index);
    cuda_release_workspace(d.index);
    cuda_allocator_reset_peak(d.index);
  }
  cuda_allocator_trace_peak(cfg.device.index, cfg.memory_breakdown);

  TrainerConfig tc;
  tc.net = cfg.net;
  tc.policy = resolve_policy(cfg.level, cfg.amp);
  tc.seed = cfg.seed;
  tc.cuda_graph = cfg.cuda_graph;
  // The trainer's eager steps, then the capture (itself a step), then at least one replay: all
  // inside the warm-up, so every timed step is a replay.
  if (cfg.cuda_graph && cfg.warmup < tc.cuda_graph_warmup + 2)
    fail("--warmup ", cfg.warmup, " is too short for CUDA graph mode (at least ", tc.cuda_graph_warmup + 2,
         ": eager warm-up steps, the capture, one replay)");
  const std::unique_ptr<ReplicaSet> replicas = ReplicaSet::on_gpus(devices);
  replicas->make_trainers(tc);
  StepBenchResult r;
  const int64_t share = cfg.batch / R;
  std::vector<Tensor> reals, noises;  // per GPU: the resident batches, or with a dataset each step's global noise
  std::unique_ptr<Dataset> own_dataset;
  std::vector<std::unique_ptr<BatchSource>> sources;
  int64_t full_batches = 0;  // with a dataset: an epoch's full batches, the ones stepped through
  if (cfg.data) {
    const auto t0 = std::chrono::steady_clock::now();
    const DataPipelineOptions d = bench_data_options(cfg, tc.policy);
    if (!cfg.dataset) own_dataset = open_pipeline_dataset(d);
    const Dataset& ds = cfg.dataset ? *cfg.dataset : *own_dataset;
    sources = open_bench_sources(ds, d, devices, cfg.net.nc);
    r.data_prepare_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    full_batches = sources.front()->batches_per_epoch();
    r.data = ds.name() + " (" + std::to_string(ds.size()) + " images, " + std::to_string(full_batches) +
             " full batches an epoch), " + sources.front()->describe();
    for (const Device& dev : devices) noises.push_back(Tensor::empty({cfg.batch, cfg.net.nz, 1, 1}, DType::F32, dev));
  } else {
    StepBenchConfig per = cfg;
    per.batch = share;
    for (const Device& d : devices) {
      per.device = d;
      reals.push_back(synthetic_real_batch(per, tc.policy));
      noises.push_back(Tensor::empty({per.batch, cfg.net.nz, 1, 1}, DType::F32, d));
      ops::fill_normal(noises.back(), cfg.seed, /*offset=*/ops::philox_counters_for(reals.back().numel()));
    }
    r.data = "one synthetic batch resident on the GPU (no input pipeline)";
    // As PyTorch's captured twin (tools/bench_pytorch.py), the graph reads the resident batches
    // in place.
    if (cfg.cuda_graph)
      for (int k = 0; k < R; ++k) replicas->trainer(k).bind_graph_inputs(reals[size_t(k)], noises[size_t(k)]);
  }
  int64_t next_batch = 0;  // with a dataset: the next step's, counted over full batches
  auto steps = [&](int n) {
    replicas->run([&](int k) {
      const size_t i = static_cast<size_t>(k);
      DcganTrainer& trainer = replicas->trainer(k);
      for (int s = 0; s < n; ++s) {
        if (sources.empty()) {
          trainer.step(reals[i], noises[i]);
          continue;
        }
        // What train_loop.cpp does for a step: the batch from the source, its noise drawn, and
        // with several GPUs each replica's share of both.
        const int64_t b = next_batch + s;
        const Tensor global = sources[i]->batch(b / full_batches, b % full_batches);
        fill_step_noise(noises[i], cfg.seed, b);
        if (R == 1)
          trainer.step(global, noises[i]);
        else
          trainer.step(global.slice0(k * share, (k + 1) * share), noises[i].slice0(k * share, (k + 1) * share));
      }
    });
    next_batch += n;
  };
  auto sync_all = [&] {
    for (const Device& d : devices) synchronize(d);
  };

  steps(cfg.warmup);
  sync_all();  // warm-up errors surface here, and the timed windows start idle

  if (cfg.profile) profiler_start();
  std::vector<double> window_ms;
  if (R == 1) {
    // step() only enqueues work, so the events, not the host clock, say how long it ran.
    window_ms = time_on_stream_ms(cfg.device, cfg.windows, [&](int) { steps(cfg.steps); });
  } else {
    for (int w = 0; w < cfg.windows; ++w) {
      const auto t0 = std::chrono::steady_clock::now();
      steps(cfg.steps);
      sync_all();
      window_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  if (cfg.profile) profiler_stop();  // both timings have waited for the last window
  for (double ms : window_ms) r.window_ms_per_step.push_back(ms / cfg.steps);
  r.ms_per_step = median(r.window_ms_per_step);
  GE_CHECK(r.ms_per_step > 0, "timed ", r.ms_per_step, " ms per step");
  r.images_per_s = static_cast<double>(cfg.batch) / (r.ms_per_step * 1e-3);
  r.step_flops = dcgan_step_flops(cfg.net, cfg.batch);
  r.tflops = static_cast<double>(r.step_flops) / (r.ms_per_step * 1e-3) / 1e12;
  r.peak_alloc_bytes = cuda_allocator_stats(cfg.device.index).peak_bytes_in_use;
  r.workspace_bytes = cuda_workspace_bytes(cfg.device.index);
  r.device_used_bytes = device_memory(cfg.device).used_bytes();
  if (cfg.memory_breakdown) {
    r.memory_breakdown = cuda_allocator_peak_breakdown(cfg.device.index);
    cuda_allocator_trace_peak(cfg.device.index, false);
  }
  r.graph = replicas->trainer(0).graph_stats();
  if (cfg.cuda_graph) {
    const int64_t timed = static_cast<int64_t>(cfg.steps) * cfg.windows;
    // Anything else would mean eager steps were timed under the graph label.
    GE_CHECK(r.graph.captures == 1 && r.graph.replays >= timed && r.graph.eager_steps < cfg.warmup,
             "CUDA graph mode: ", r.graph.captures, " captures, ", r.graph.replays, " replays, ", r.graph.eager_steps,
             " eager steps for ", cfg.warmup, " warm-up and ", timed, " timed steps");
  }
  r.last = replicas->trainer(0).record();
  for (float v : {r.last.errD_real, r.last.errD_fake, r.last.errG}) r.finite = r.finite && std::isfinite(v);
  return r;
}

}  // namespace ge
