// One `ganengine bench` measurement: the full DcganTrainer::step at one opt level and batch
// size on one GPU, timed on the device over several windows of steps.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ganengine/amp.h"
#include "ganengine/data_pipeline.h"
#include "ganengine/nn.h"
#include "ganengine/trainer.h"

namespace ge {

struct StepBenchConfig {
  nn::NetConfig net;
  OptLevel level = OptLevel::O2;
  AmpOverrides amp;
  int64_t batch = 64;
  Device device = Device::cuda(0);
  int warmup = 20;  // untimed steps first: allocation, cuDNN algorithm choice, clocks
  int steps = 50;   // steps per timed window
  int windows = 5;  // timed windows; the median is reported
  uint64_t seed = 2809;
  // TrainerConfig::cuda_graph: the step is captured during the warm-up (after the trainer's own
  // eager warm-up steps) and every timed step is a replay. warmup must leave room for that.
  bool cuda_graph = false;
  bool profile = false;  // the CUDA profiler records the timed windows only (profiling.h)
  // Data parallel over this many GPUs from `device` on (NCCL, one host thread each): batch is the
  // global batch, split evenly. Windows are then timed on the host clock, every GPU waited for.
  int replicas = 1;
  // StepBenchResult::memory_breakdown: what was in use at the peak, by the phase that allocated
  // it (cuda_allocator_trace_peak; GPU 0 of the replicas).
  bool memory_breakdown = false;
  // `bench --dataset`: the input pipeline included. Every step then takes the next batch from
  // the source `train` would use (host workers or GPU-resident; its image_size, batch_size,
  // seed, device and GPU dtype/layout are set here from the rest of this config) and draws its
  // own noise, as train does; net.nc must be the dataset's channels. An epoch's last, partial
  // batch is left out (BatchSource::set_drop_last), so that every timed step replays one graph.
  // Without it, one synthetic batch and one noise batch, resident on the GPU, serve every step.
  std::optional<DataPipelineOptions> data;
  // With data: the dataset, opened once by a caller that runs several configurations over it
  // (open_pipeline_dataset; it must outlive the call). Null: opened here.
  const Dataset* dataset = nullptr;
};

struct StepBenchResult {
  std::vector<double> window_ms_per_step;  // each window's ms / steps, in order
  double ms_per_step = 0;                  // median over the windows
  double images_per_s = 0;
  int64_t step_flops = 0;       // dcgan_step_flops (convolutions only)
  double tflops = 0;            // step_flops / time per step
  size_t peak_alloc_bytes = 0;  // caching allocator's peak while this configuration ran
  size_t workspace_bytes = 0;   // cuDNN workspace held for the timed steps (outside the allocator)
  // The number to compare with PyTorch's max_memory_allocated, which counts its cuDNN workspaces.
  size_t peak_mem_bytes() const { return peak_alloc_bytes + workspace_bytes; }
  size_t device_used_bytes = 0;    // cudaMemGetInfo after the windows, whole device
  StepRecord last;                 // the last step's losses and scales
  bool finite = true;              // the last step's losses were all finite
  DcganTrainer::GraphStats graph;  // with cuda_graph: one capture, every timed step a replay
  std::string memory_breakdown;    // with StepBenchConfig::memory_breakdown
  std::string data;                // where the real batches came from (one line)
  double data_prepare_s = 0;       // opening the sources (a GPU-resident one decodes the whole dataset)
};

// Builds a fresh trainer (returning the previous configurations' cached GPU memory to the
// driver first, so the peak and the device total are this configuration's), one synthetic real
// batch uniform in [-1, 1) and one noise batch N(0, 1), both resident on the GPU (or, with
// StepBenchConfig::data, the input pipeline), then runs warmup steps and windows x steps timed
// steps.
StepBenchResult run_step_bench(const StepBenchConfig& cfg);

}  // namespace ge
