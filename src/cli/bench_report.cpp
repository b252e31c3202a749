#include "cli/bench_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "cli/commands.h"
#include "io/json.h"
#include "train/step_flops.h"

namespace ge::cli {

namespace {

double gib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

const char* half_label(DType half) { return half == DType::BF16 ? "bf16" : "fp16"; }

// (slowest - fastest) / median window: how far apart the windows were, so a noisy machine
// shows in the table instead of hiding behind the median.
double spread(const StepBenchResult& r) {
  const auto mm = std::minmax_element(r.window_ms_per_step.begin(), r.window_ms_per_step.end());
  return (*mm.second - *mm.first) / r.ms_per_step;
}

const char* mode(const BenchRow& row) { return row.cuda_graph ? "graph" : "eager"; }

}  // namespace

std::string utc_now_iso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string bench_row_line(const BenchRun& run, const BenchRow& row) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s %s  batch %-5lld%s", opt_level_name(row.level), mode(row),
                static_cast<long long>(row.batch),
                run.ngpu > 1 ? (" on " + std::to_string(run.ngpu) + " GPUs").c_str() : "");
  if (!row.ok) return std::string(buf) + "  failed: " + row.error;  // the whole message, however long
  const StepBenchResult& r = row.result;
  char rest[512];
  std::snprintf(rest, sizeof rest,
                " %8.3f ms/step %9.0f img/s %7.1f TFLOP/s %6.1f%% of %s GEMM peak (%.0f TFLOP/s)"
                "   peak mem %.2f GiB (%.0f MiB of it cuDNN workspace; device %.2f GiB)   spread %.1f%%%s",
                r.ms_per_step, r.images_per_s, r.tflops, 100.0 * r.tflops / run.gemm_peak_tflops, half_label(run.half),
                run.gemm_peak_tflops, gib(r.peak_mem_bytes()), static_cast<double>(r.workspace_bytes) / (1 << 20),
                gib(r.device_used_bytes), 100.0 * spread(r), r.finite ? "" : "   [last step's losses not finite]");
  std::string line = std::string(buf) + rest;
  if (row.level == OptLevel::O4 && run.fp8_gemm_peak_tflops > 0) {
    char fp8[96];
    std::snprintf(fp8, sizeof fp8, "   %.1f%% of FP8 GEMM peak (%.0f TFLOP/s)",
                  100.0 * r.tflops / run.fp8_gemm_peak_tflops, run.fp8_gemm_peak_tflops);
    line += fp8;
  }
  return line;
}

std::string bench_json(const BenchRun& run, bool complete) {
  using json::Value;
  Value doc = Value::object();
  doc.append_member("tool", Value::string("ganengine bench"));
  doc.append_member("version", Value::string(version()));
  doc.append_member("date", Value::string(run.date));
  doc.append_member("complete", Value::boolean(complete));
  Value gpu = Value::object();
  gpu.append_member("device", Value::string(run.device));
  gpu.append_member("ngpu", Value::integer(run.ngpu));
  gpu.append_member("name", Value::string(run.facts.name));
  gpu.append_member("compute_capability", Value::string(run.facts.compute_capability));
  gpu.append_member("sm_count", Value::integer(run.facts.sm_count));
  gpu.append_member("driver", Value::string(run.facts.driver));
  gpu.append_member("driver_cuda", Value::string(run.facts.driver_cuda));
  gpu.append_member("cuda_runtime", Value::string(run.facts.cuda_runtime));
  gpu.append_member("cudnn", Value::string(run.facts.cudnn));
  gpu.append_member("cublas", Value::string(run.facts.cublas));
  doc.append_member("gpu", std::move(gpu));
  Value net = Value::object();
  net.append_member("image_size", Value::integer(run.net.image_size));
  net.append_member("nz", Value::integer(run.net.nz));
  net.append_member("ngf", Value::integer(run.net.ngf));
  net.append_member("ndf", Value::integer(run.net.ndf));
  net.append_member("nc", Value::integer(run.net.nc));
  doc.append_member("net", std::move(net));
  doc.append_member("half", Value::string(half_label(run.half)));
  doc.append_member("loss_scale", Value::string(run.loss_scale.empty() ? "opt level default" : run.loss_scale));
  doc.append_member("input", Value::string(run.input));
  doc.append_member("tf32", Value::boolean(run.tf32));
  doc.append_member("warmup_steps", Value::integer(run.warmup));
  doc.append_member("steps_per_window", Value::integer(run.steps));
  doc.append_member("windows", Value::integer(run.windows));
  doc.append_member("flops_per_image", Value::integer(dcgan_step_flops(run.net, 1)));
  doc.append_member("flops_counted", Value::string("convolution passes of one training step, 2 per multiply-add; "
                                                   "BatchNorm, activations, losses and Adam not counted"));
  doc.append_member("gemm_peak_tflops", Value::number(run.gemm_peak_tflops));
  doc.append_member("gemm_peak_method", Value::string("cublasGemmEx 8192^3, half in/out, CUBLAS_COMPUTE_32F, "
                                                      "median of 10"));
  if (run.fp8_gemm_peak_tflops > 0) {
    doc.append_member("fp8_gemm_peak_tflops", Value::number(run.fp8_gemm_peak_tflops));
    doc.append_member("fp8_gemm_peak_method", Value::string("cublasLtMatmul 8192^3, E4M3 in (TN), f16 out, "
                                                            "CUBLAS_COMPUTE_32F, median of 10"));
  }
  Value rows = Value::array();
  for (const BenchRow& row : run.rows) {
    Value o = Value::object();
    o.append_member("opt_level", Value::string(opt_level_name(row.level)));
    o.append_member("batch", Value::integer(row.batch));
    o.append_member("cuda_graph", Value::boolean(row.cuda_graph));
    o.append_member("ok", Value::boolean(row.ok));
    if (!row.ok) {
      o.append_member("error", Value::string(row.error));
      rows.push_back(std::move(o));
      continue;
    }
    const StepBenchResult& r = row.result;
    o.append_member("ms_per_step", Value::number(r.ms_per_step));
    Value windows = Value::array();
    for (double ms : r.window_ms_per_step) windows.push_back(Value::number(ms));
    o.append_member("window_ms_per_step", std::move(windows));
    o.append_member("images_per_s", Value::number(r.images_per_s));
    o.append_member("step_flops", Value::integer(r.step_flops));
    o.append_member("tflops", Value::number(r.tflops));
    o.append_member("fraction_of_gemm_peak", Value::number(r.tflops / run.gemm_peak_tflops));
    if (row.level == OptLevel::O4 && run.fp8_gemm_peak_tflops > 0)
      o.append_member("fraction_of_fp8_gemm_peak", Value::number(r.tflops / run.fp8_gemm_peak_tflops));
    o.append_member("peak_mem_bytes", Value::integer(static_cast<int64_t>(r.peak_mem_bytes())));
    o.append_member("peak_alloc_bytes", Value::integer(static_cast<int64_t>(r.peak_alloc_bytes)));
    o.append_member("workspace_bytes", Value::integer(static_cast<int64_t>(r.workspace_bytes)));
    o.append_member("device_used_bytes", Value::integer(static_cast<int64_t>(r.device_used_bytes)));
    o.append_member("losses_finite", Value::boolean(r.finite));
    Value losses = Value::object();  // the last step's (null where not finite)
    for (const auto& [name, v] : {std::pair<const char*, float>{"errD_real", r.last.errD_real},
                                  {"errD_fake", r.last.errD_fake},
                                  {"errG", r.last.errG}})
      losses.append_member(name, std::isfinite(v) ? Value::number(v) : Value());
    o.append_member("losses", std::move(losses));
    o.append_member("data", Value::string(r.data));
    o.append_member("data_prepare_s", Value::number(r.data_prepare_s));
    Value scales = Value::array();  // the three losses' scales after the last step
    for (float s : r.last.scale) scales.push_back(Value::number(s));
    o.append_member("loss_scales", std::move(scales));
    if (row.cuda_graph) {
      o.append_member("graph_nodes", Value::integer(static_cast<int64_t>(r.graph.nodes)));
      o.append_member("graph_memsets_hoisted", Value::integer(static_cast<int64_t>(r.graph.memsets_hoisted)));
      o.append_member("graph_roots_joined", Value::integer(static_cast<int64_t>(r.graph.roots_joined)));
    }
    rows.push_back(std::move(o));
  }
  doc.append_member("rows", std::move(rows));
  return json::write(doc) + "\n";
}

}  // namespace ge::cli
