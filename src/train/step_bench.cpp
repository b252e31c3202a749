#include "ganengine/step_bench.h"

#include <algorithm>
#include <cmath>

#include "ganengine/allocator.h"
#include "ganengine/backend.h"
#include "ganengine/gpu_measure.h"
#include "ganengine/profiling.h"
#include "ganengine/step_flops.h"

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

}  // namespace

StepBenchResult run_step_bench(const StepBenchConfig& cfg) {
  GE_CHECK(cfg.device.is_cuda(), "run_step_bench on ", cfg.device.str());
  GE_CHECK(cfg.batch >= 1 && cfg.warmup >= 1 && cfg.steps >= 1 && cfg.windows >= 1, "run_step_bench: batch ",
           cfg.batch, " warmup ", cfg.warmup, " steps ", cfg.steps, " windows ", cfg.windows);
  const int k = cfg.device.index;
  // Whatever earlier configurations left cached goes back to the driver, so this one's peak
  // and device total start from the same baseline.
  synchronize(cfg.device);
  cuda_allocator_release_cached(k);
  cuda_allocator_reset_peak(k);

  TrainerConfig tc;
  tc.net = cfg.net;
  tc.policy = resolve_policy(cfg.level, cfg.amp);
  tc.device = cfg.device;
  tc.seed = cfg.seed;
  tc.cuda_graph = cfg.cuda_graph;
  // The trainer's eager steps, then the capture (itself a step), then at least one replay: all
  // inside the warm-up, so every timed step is a replay.
  if (cfg.cuda_graph && cfg.warmup < tc.cuda_graph_warmup + 2)
    fail("--warmup ", cfg.warmup, " is too short for CUDA graph mode (at least ", tc.cuda_graph_warmup + 2,
         ": eager warm-up steps, the capture, one replay)");
  DcganTrainer trainer(tc);
  const Tensor real = synthetic_real_batch(cfg, tc.policy);
  Tensor noise = Tensor::empty({cfg.batch, cfg.net.nz, 1, 1}, DType::F32, cfg.device);
  ops::fill_normal(noise, cfg.seed, /*offset=*/ops::philox_counters_for(real.numel()));

  for (int i = 0; i < cfg.warmup; ++i) trainer.step(real, noise);
  synchronize(cfg.device);  // warm-up errors surface here, and the timed windows start idle

  StepBenchResult r;
  // step() only enqueues work, so the events, not the host clock, say how long it ran.
  if (cfg.profile) profiler_start();
  const std::vector<double> window_ms = time_on_stream_ms(cfg.device, cfg.windows, [&](int) {
    for (int i = 0; i < cfg.steps; ++i) trainer.step(real, noise);
  });
  if (cfg.profile) profiler_stop();  // time_on_stream_ms has waited for the last window
  for (double ms : window_ms) r.window_ms_per_step.push_back(ms / cfg.steps);
  r.ms_per_step = median(r.window_ms_per_step);
  GE_CHECK(r.ms_per_step > 0, "timed ", r.ms_per_step, " ms per step");
  r.images_per_s = static_cast<double>(cfg.batch) / (r.ms_per_step * 1e-3);
  r.step_flops = dcgan_step_flops(cfg.net, cfg.batch);
  r.tflops = static_cast<double>(r.step_flops) / (r.ms_per_step * 1e-3) / 1e12;
  r.peak_alloc_bytes = cuda_allocator_stats(k).peak_bytes_in_use;
  r.device_used_bytes = device_memory(cfg.device).used_bytes();
  r.graph = trainer.graph_stats();
  if (cfg.cuda_graph) {
    const int64_t timed = static_cast<int64_t>(cfg.steps) * cfg.windows;
    // Anything else would mean eager steps were timed under the graph label.
    GE_CHECK(r.graph.captures == 1 && r.graph.replays >= timed && r.graph.eager_steps < cfg.warmup,
             "CUDA graph mode: ", r.graph.captures, " captures, ", r.graph.replays, " replays, ", r.graph.eager_steps,
             " eager steps for ", cfg.warmup, " warm-up and ", timed, " timed steps");
  }
  r.last = trainer.record();
  for (float v : {r.last.errD_real, r.last.errD_fake, r.last.errG}) r.finite = r.finite && std::isfinite(v);
  return r;
}

}  // namespace ge
