// How `ganengine bench` shows its measurements: one table line per configuration on the
// console, and the same rows (with the run's setting and what it ran on) as a JSON document.
#pragma once
#include <string>
#include <vector>

#include "ganengine/amp.h"
#include "ganengine/step_bench.h"
#include "runtime/gpu_measure.h"

namespace ge::cli {

struct BenchRow {
  OptLevel level = OptLevel::O0;
  int64_t batch = 0;
  bool cuda_graph = false;
  bool ok = false;
  StepBenchResult result;  // when ok
  std::string error;       // when not
};

struct BenchRun {
  DeviceFacts facts;
  int ngpu = 1;        // data-parallel GPUs per configuration (batch is the global batch)
  std::string device;  // "cuda:0"
  std::string date;    // UTC, ISO 8601
  nn::NetConfig net;
  DType half = DType::F16;
  std::string loss_scale;  // --loss-scale ("dynamic" or a number); empty: each opt level's own
  std::string input;       // where the real batches come from: synthetic and resident, or --dataset
  bool tf32 = false;       // --tf32: O0's fp32 convolutions may use TF32
  int warmup = 0, steps = 0, windows = 0;
  double gemm_peak_tflops = 0;
  double fp8_gemm_peak_tflops = 0;  // measured when an O4 row is asked for; 0: not measured
  std::vector<BenchRow> rows;
};

// "O2  batch 64     0.912 ms/step    70200 img/s  161.3 TFLOP/s  20.4% of fp16 GEMM peak (790 TFLOP/s)  ..."
std::string bench_row_line(const BenchRun& run, const BenchRow& row);
// The whole run; complete is false while configurations are still to come.
std::string bench_json(const BenchRun& run, bool complete);
std::string utc_now_iso8601();

}  // namespace ge::cli
