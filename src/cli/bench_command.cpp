// `ganengine bench`: ms/step, images/s, achieved TFLOP/s and the fraction of a half GEMM peak
// measured in the same run, for each opt level and batch size (BENCHMARKS.md, "How we measure").
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cxxopts.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/arguments.h"
#include "cli/bench_report.h"
#include "cli/commands.h"
#include "core/backend.h"
#include "core/cpu_backend.h"
#include "data/dataset_registry.h"
#include "ganengine/data.h"
#include "ganengine/data_pipeline.h"
#include "ganengine/step_bench.h"
#include "io/atomic_file.h"
#include "runtime/gpu_measure.h"
#include "train/step_flops.h"

namespace ge::cli {

namespace {

std::vector<std::string> split_list(const std::string& flag, const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    const size_t end = s.find(',', pos);
    out.push_back(s.substr(pos, end == std::string::npos ? std::string::npos : end - pos));
    if (out.back().empty()) fail(flag, " '", s, "' has an empty item (expected a comma-separated list)");
    if (end == std::string::npos) return out;
    pos = end + 1;
  }
}

std::vector<OptLevel> parse_opt_levels(const std::string& s) {
  std::vector<OptLevel> out;
  for (const std::string& item : split_list("--opt-level", s)) {
    try {
      out.push_back(parse_opt_level(item));
    } catch (const Error& e) {
      fail("--opt-level '", s, "': ", e.what());
    }
  }
  return out;
}

std::vector<int64_t> parse_batch_sizes(const std::string& s) {
  constexpr long long kMax = 1 << 20;
  std::vector<int64_t> out;
  for (const std::string& item : split_list("--batch-sizes", s)) {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (end != item.c_str() + item.size() || errno != 0 || v < 1 || v > kMax)
      fail("--batch-sizes '", s, "': '", item, "' is not a batch size (expected whole numbers 1..", kMax,
           ", comma-separated, e.g. 64,1024)");
    out.push_back(v);
  }
  return out;
}

// "off", "on" or both ("off,on"): the step run eagerly and/or replayed as one CUDA graph.
std::vector<bool> parse_graph_modes(const std::string& s) {
  std::vector<bool> out;
  for (const std::string& item : split_list("--cuda-graph", s)) {
    if (item == "on")
      out.push_back(true);
    else if (item == "off")
      out.push_back(false);
    else
      fail("--cuda-graph '", s, "' (expected on, off, or both as off,on)");
  }
  return out;
}

int positive(const cxxopts::ParseResult& r, const char* flag) {
  const int v = int_flag(r, flag, "at least 1");
  if (v < 1) fail("--", flag, " ", v, " (expected at least 1)");
  return v;
}

// What every configuration of a run shares: the networks, the precision overrides, the device
// and the timing windows.
StepBenchConfig step_bench_config(const BenchRun& run, const AmpOverrides& amp, Device device) {
  StepBenchConfig cfg;
  cfg.net = run.net;
  cfg.amp = amp;
  cfg.device = device;
  cfg.warmup = run.warmup;
  cfg.steps = run.steps;
  cfg.windows = run.windows;
  return cfg;
}

// --device cpu (the fast backend) or cpu-reference (the reference loops): the step timed on the
// host, its convolutions' GFLOP/s beside ms/step and images/s.
int run_cpu_bench(const std::string& spec, const BenchRun& run, const std::vector<OptLevel>& levels,
                  const std::vector<int64_t>& batches, const AmpOverrides& amp, int threads) {
  const Device device = resolve_device(spec, "bench", /*warn_on_cpu=*/false);
  set_cpu_threads(threads);
  set_cpu_bf16_compute(true);
  std::printf("ganengine bench on the CPU (--device %s): %s; %s\n", spec.c_str(), describe_cpu_backend().c_str(),
              describe_cpu_features().c_str());
  std::printf("networks: %dx%d, nz %lld, ngf %lld, ndf %lld; %.3f GFLOP per image per step (convolutions only)\n",
              run.net.image_size, run.net.image_size, static_cast<long long>(run.net.nz),
              static_cast<long long>(run.net.ngf), static_cast<long long>(run.net.ndf),
              static_cast<double>(dcgan_step_flops(run.net, 1)) * 1e-9);
  std::printf("each row: median of %d windows of %d steps after %d warm-up steps; one synthetic batch in host memory\n",
              run.windows, run.steps, run.warmup);
  StepBenchConfig cfg = step_bench_config(run, amp, device);
  bool all_ok = true;
  for (OptLevel level : levels)
    for (int64_t batch : batches) {
      cfg.level = level;
      cfg.batch = batch;
      std::printf("%s batch %5lld: ", opt_level_name(level), static_cast<long long>(batch));
      std::fflush(stdout);
      try {
        const StepBenchResult res = run_step_bench(cfg);
        std::printf("%9.2f ms/step %9.1f images/s %8.1f GFLOP/s  (%s)%s\n", res.ms_per_step, res.images_per_s,
                    res.tflops * 1e3, describe_cpu_precision(resolve_policy(level, amp).compute_dtype).c_str(),
                    res.finite ? "" : "  NON-FINITE LOSSES");
        all_ok = all_ok && res.finite;
      } catch (const Error& e) {
        std::printf("failed: %s\n", e.what());
        all_ok = false;
      }
      std::fflush(stdout);
    }
  return all_ok ? 0 : 1;
}

Device bench_device(const std::string& spec) {
  const Device d = Device::parse(spec);
  if (!d.is_cuda()) fail("ganengine bench needs a CUDA GPU (--device ", spec, " is not one)");
  if (!cuda_available())
    fail("ganengine bench needs a CUDA GPU",
         built_with_cuda() ? ": none is usable here (no driver or no device)" : ": this build has no CUDA",
         "; --device cpu times the CPU step");
  return d;
}

// --dataset and the flags that go with it; nothing without it (a data flag alone is an error).
std::optional<DataPipelineOptions> bench_data(const cxxopts::ParseResult& r) {
  const std::string dataset = r["dataset"].as<std::string>();
  if (dataset.empty()) {
    for (const char* flag :
         {"dataroot", "classes", "workers", "data-on", "cache-dir", "skip-bad-images", "download", "download-mirror"})
      if (r.count(flag))
        fail("--", flag, " goes with --dataset (without it the bench feeds one synthetic batch resident on the GPU)");
    return std::nullopt;
  }
  (void)dataset_entry(dataset);  // an unknown name fails now, listing the known ones
  DataPipelineOptions d = read_data_flags(r);
  d.download = r.count("download") > 0;
  d.mirror = r["download-mirror"].as<std::string>();
  if (!d.download) require_dataroot(d.dataset, d.dataroot, /*offer_download=*/true);
  return d;
}

}  // namespace

int run_bench(int argc, char** argv) {
  cxxopts::Options o("ganengine bench",
                     "Time the DCGAN training step on the GPU for each opt level and batch size: ms/step, "
                     "images/s,\nachieved TFLOP/s (convolutions, counted analytically) and the fraction of a "
                     "cuBLAS half GEMM\npeak measured in the same run.");
  // clang-format off
  o.add_options()
    ("opt-level", "comma-separated opt levels", cxxopts::value<std::string>()->default_value("O0,O1,O2,O3"))
    ("batch-sizes", "comma-separated batch sizes", cxxopts::value<std::string>()->default_value("64,1024"))
    ("imageSize", "image side (a power of two, 16..512)", cxxopts::value<std::string>()->default_value("64"))
    ("nz", "size of the latent z vector", cxxopts::value<std::string>()->default_value("100"))
    ("ngf", "generator width", cxxopts::value<std::string>()->default_value("64"))
    ("ndf", "discriminator width", cxxopts::value<std::string>()->default_value("64"))
    ("half", "what half precision means: fp16 | bf16", cxxopts::value<std::string>()->default_value("fp16"))
    ("loss-scale", "Apex override for every opt level timed: dynamic | <value> (default: each level's own)", cxxopts::value<std::string>())
    ("cuda-graph", "on | off | off,on: replay each step as one captured CUDA graph, as train does by default", cxxopts::value<std::string>()->default_value("on")->implicit_value("on"))
    ("no-cuda-graph", "run every step eagerly (the same as --cuda-graph off)")
    ("tf32", "let O0's fp32 convolutions use TF32 (off: O0 is true fp32, as PyTorch's fp32 twin with TF32 off)")
    ("warmup", "untimed steps per configuration", cxxopts::value<std::string>()->default_value("20"))
    ("steps", "steps per timed window", cxxopts::value<std::string>()->default_value("50"))
    ("windows", "timed windows per configuration (the median is reported)", cxxopts::value<std::string>()->default_value("5"))
    ("ngpu", "data parallel over this many GPUs from --device on (NCCL); --batch-sizes are global batches", cxxopts::value<std::string>()->default_value("1"))
    ("memory-breakdown", "after each row, what was in use at its peak memory, by the phase and layer that allocated it")
    ("profile", "start the CUDA profiler for each configuration's timed steps only (nsys --capture-range=cudaProfilerApi, ncu --profile-from-start off)")
    ("json", "also write the rows, the GPU and library versions and the date to this file", cxxopts::value<std::string>()->default_value(""))
    ("dataset", "include the input pipeline: every step takes its batch from this dataset as train reads it (" + dataset_choices() + "; default: one synthetic batch resident on the GPU)", cxxopts::value<std::string>()->default_value(""))
    ("dataroot", "with --dataset: path to it", cxxopts::value<std::string>()->default_value("./"))
    ("classes", "with --dataset lsun: its classes", cxxopts::value<std::string>()->default_value("bedroom"))
    ("workers", "with --dataset: the host loader's decoding threads", cxxopts::value<std::string>()->default_value("2"))
    ("data-on", "with --dataset: auto | host | gpu, where batches are assembled (auto: on the GPU when the dataset fits)", cxxopts::value<std::string>()->default_value("auto"))
    ("cache-dir", "with --dataset: decoded-image cache (folder-like and lsun datasets)", cxxopts::value<std::string>()->default_value(""))
    ("skip-bad-images", "with --dataset: skip undecodable images instead of stopping")
    ("download", "with --dataset: fetch it into --dataroot first (" + downloadable_datasets() + "), md5-checked")
    ("download-mirror", "with --download: base URL to download from (else $GANENGINE_DATASET_MIRROR, else the official sites)", cxxopts::value<std::string>()->default_value(""))
    ("device", "cuda | cuda:K | cpu | cpu-reference (cpu: the oneDNN backend; cpu-reference: the plain reference loops)", cxxopts::value<std::string>()->default_value("cuda:0"))
    ("threads", "with --device cpu: compute threads (default 0: OMP_NUM_THREADS when set, else every core)", cxxopts::value<std::string>()->default_value("0"))
    ("h,help", "show this help");
  // clang-format on
  Arguments args = normalise_arguments(argc, argv,
                                       {{"opt_level", "opt-level"},
                                        {"opt-levels", "opt-level"},
                                        {"batch-size", "batch-sizes"},
                                        {"batchSize", "batch-sizes"},
                                        {"image-size", "imageSize"},
                                        {"data-root", "dataroot"}},
                                       {"cuda-graph"});
  const std::optional<cxxopts::ParseResult> parsed = parse_command_line(o, args, "bench");
  if (!parsed) return 0;
  const cxxopts::ParseResult& r = *parsed;

  // Every flag is checked before the GPU is touched, so a typo fails at once.
  BenchRun run;
  const std::vector<OptLevel> levels = parse_opt_levels(r["opt-level"].as<std::string>());
  const std::vector<int64_t> batches = parse_batch_sizes(r["batch-sizes"].as<std::string>());
  run.net.image_size = int_flag(r, "imageSize", "a power of two from 16 to 512");
  run.net.nz = int64_flag(r, "nz", "1..100000");
  run.net.ngf = int64_flag(r, "ngf", "1..4096");
  run.net.ndf = int64_flag(r, "ndf", "1..4096");
  nn::validate(run.net);
  const std::string half = r["half"].as<std::string>();
  if (half == "fp16" || half == "f16")
    run.half = DType::F16;
  else if (half == "bf16")
    run.half = DType::BF16;
  else
    fail("--half '", half, "' (expected fp16 or bf16)");
  AmpOverrides amp;
  amp.half = run.half;
  amp.allow_tf32 = run.tf32 = r.count("tf32") > 0;
  if (r.count("loss-scale")) {
    run.loss_scale = r["loss-scale"].as<std::string>();
    amp.loss_scale = run.loss_scale;
  }
  for (OptLevel level : levels) (void)resolve_policy(level, amp);  // a bad --loss-scale fails now
  // --cuda-graph's default (on) gives way to --no-cuda-graph; only an explicit --cuda-graph that
  // asks for graphs contradicts it.
  std::vector<bool> graph_modes = parse_graph_modes(r["cuda-graph"].as<std::string>());
  if (r.count("no-cuda-graph")) {
    if (r.count("cuda-graph") && graph_modes != std::vector<bool>{false})
      fail("--cuda-graph ", r["cuda-graph"].as<std::string>(), " and --no-cuda-graph contradict each other");
    graph_modes = {false};
  }
  run.warmup = positive(r, "warmup");
  run.steps = positive(r, "steps");
  run.windows = positive(r, "windows");
  const int graph_warmup = TrainerConfig{}.cuda_graph_warmup + 2;          // eager steps, the capture, one replay
  const bool on_cpu = r["device"].as<std::string>().rfind("cpu", 0) == 0;  // CPU steps are never captured
  if (!on_cpu && run.warmup < graph_warmup && std::count(graph_modes.begin(), graph_modes.end(), true))
    fail("--warmup ", run.warmup, " is too short for --cuda-graph on (at least ", graph_warmup,
         ": the trainer's eager steps, the capture and one replay come before the timed steps)");
  run.ngpu = int_flag(r, "ngpu", "1..64");
  if (run.ngpu < 1 || run.ngpu > 64) fail("--ngpu ", run.ngpu, " (expected 1..64)");
  for (int64_t b : batches)
    if (b % run.ngpu != 0) fail("--batch-sizes: ", b, " does not split evenly over --ngpu ", run.ngpu);
  const std::string json_path = r["json"].as<std::string>();
  std::optional<DataPipelineOptions> data = bench_data(r);
  // Opened once for every configuration, and before the GPU is asked for, so that a missing or
  // damaged dataset is named at once.
  std::unique_ptr<Dataset> dataset;
  if (data) {
    data->image_size = run.net.image_size;
    data->seed = StepBenchConfig{}.seed;
    dataset = open_pipeline_dataset(*data);
    run.net.nc = dataset->channels();
  }
  run.input = data ? "--dataset " + data->dataset +
                         (dataset_entry(data->dataset).reads_files ? " from " + data->dataroot : "") +
                         ": the input pipeline train uses, each step's batch and noise drawn as train draws them "
                         "(an epoch's last, partial batch left out)"
                   : "one synthetic batch and one noise batch resident on the GPU (no input pipeline; --dataset "
                     "includes it)";
  const std::string device_spec = r["device"].as<std::string>();
  if (on_cpu) {
    if (data || !json_path.empty() || run.ngpu != 1 || r.count("profile") || r.count("memory-breakdown"))
      fail("--device ", device_spec,
           " times the step alone: --dataset, --json, --ngpu, --profile and --memory-breakdown are for GPU runs");
    return run_cpu_bench(device_spec, run, levels, batches, amp,
                         int_flag(r, "threads", "a count of threads, 0: every core"));
  }
  const Device device = bench_device(device_spec);
  run.device = device.str();
  run.date = utc_now_iso8601();
  run.facts = device_facts(device);

  std::printf("ganengine bench on %s (%s, %d SMs): driver %s (CUDA %s), CUDA runtime %s, cuDNN %s, cuBLAS %s\n",
              run.facts.name.c_str(), run.device.c_str(), run.facts.sm_count, run.facts.driver.c_str(),
              run.facts.driver_cuda.c_str(), run.facts.cuda_runtime.c_str(), run.facts.cudnn.c_str(),
              run.facts.cublas.c_str());
  std::printf("networks: %dx%d, nz %lld, ngf %lld, ndf %lld; %.3f GFLOP per image per step (convolutions only)\n",
              run.net.image_size, run.net.image_size, static_cast<long long>(run.net.nz),
              static_cast<long long>(run.net.ngf), static_cast<long long>(run.net.ndf),
              static_cast<double>(dcgan_step_flops(run.net, 1)) * 1e-9);
  run.gemm_peak_tflops = measure_half_gemm_tflops(device, run.half);
  std::printf("cuBLAS %s GEMM peak (8192^3, fp32 accumulation): %.1f TFLOP/s\n", half == "bf16" ? "bf16" : "fp16",
              run.gemm_peak_tflops);
  if (std::count(levels.begin(), levels.end(), OptLevel::O4)) {
    run.fp8_gemm_peak_tflops = measure_fp8_gemm_tflops(device);
    std::printf("cuBLASLt FP8 GEMM peak (8192^3, E4M3 in, f16 out, fp32 accumulation): %.1f TFLOP/s\n",
                run.fp8_gemm_peak_tflops);
  }
  // An unwritable --json path fails now, not after the first configuration has run.
  if (!json_path.empty()) write_file_atomically(json_path, bench_json(run, false));
  std::printf("each row: median of %d windows of %d steps after %d warm-up steps\n", run.windows, run.steps,
              run.warmup);
  std::printf("input: %s\n", run.input.c_str());
  if (std::count(levels.begin(), levels.end(), OptLevel::O0))
    std::printf("%s\n", run.tf32 ? "O0: fp32 with TF32 convolutions (--tf32)"
                                 : "O0: true fp32, no TF32 (--tf32 allows it for the convolutions)");
  if (!run.loss_scale.empty())
    std::printf("loss scale: %s at every opt level (--loss-scale)\n", run.loss_scale.c_str());
  std::fflush(stdout);

  StepBenchConfig cfg = step_bench_config(run, amp, device);
  cfg.profile = r.count("profile") > 0;
  cfg.replicas = run.ngpu;
  cfg.memory_breakdown = r.count("memory-breakdown") > 0;
  cfg.data = data;
  cfg.dataset = dataset.get();
  std::vector<BenchRow> plan;  // opt level, then batch size, then graph mode
  for (OptLevel level : levels)
    for (int64_t batch : batches)
      for (bool graph : graph_modes) {
        plan.emplace_back();
        plan.back().level = level;
        plan.back().batch = batch;
        plan.back().cuda_graph = graph;
      }
  bool all_ok = true;
  for (BenchRow row : plan) {
    cfg.level = row.level;
    cfg.batch = row.batch;
    cfg.cuda_graph = row.cuda_graph;
    // One configuration failing (out of memory at a large batch) still leaves the others' rows.
    try {
      row.result = run_step_bench(cfg);
      row.ok = true;
    } catch (const Error& e) {
      row.error = e.what();
      all_ok = false;
    }
    run.rows.push_back(row);
    std::printf("%s\n", bench_row_line(run, row).c_str());
    if (row.ok && data)
      std::printf("  data: %s; sources prepared in %.1f s\n", row.result.data.c_str(), row.result.data_prepare_s);
    if (row.ok && cfg.memory_breakdown) std::printf("%s", row.result.memory_breakdown.c_str());
    std::fflush(stdout);
    // Rewritten after every row, so a run that dies later still leaves what it measured.
    if (!json_path.empty()) write_file_atomically(json_path, bench_json(run, false));
  }
  if (!json_path.empty()) {
    write_file_atomically(json_path, bench_json(run, true));
    std::printf("wrote %s\n", json_path.c_str());
  }
  return all_ok ? 0 : 1;
}

}  // namespace ge::cli
