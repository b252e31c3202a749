// Timing a piece of GPU work the way a captured training step runs it: `runs` repetitions
// captured into one CUDA graph, uploaded, then replayed once between two events. Timed as
// back-to-back stream calls instead, work whose launch costs the host more than the GPU's run
// (cuDNN's legacy API at small batches) measures the host: the search would then rank host
// overhead, not kernels.
#pragma once
#include <limits>

#include "runtime/cuda_check.h"

namespace ge {
namespace gpu {

class TimingEvents {
 public:
  TimingEvents() {
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~TimingEvents() {
    (void)cudaEventDestroy(start);
    (void)cudaEventDestroy(stop);
  }
  TimingEvents(const TimingEvents&) = delete;
  TimingEvents& operator=(const TimingEvents&) = delete;
  cudaEvent_t start = nullptr, stop = nullptr;
};

// Milliseconds per run of `run` (which enqueues the work on `stream` and returns true when it
// succeeded); infinity when a run fails or cannot be captured. One run goes eagerly first: it
// loads kernels lazily, which a capture must not do.
template <class Run>
double graph_time_ms(cudaStream_t stream, int runs, const Run& run, TimingEvents& ev) {
  constexpr double kFailed = std::numeric_limits<double>::infinity();
  if (!run()) return kFailed;
  cudaGraph_t graph = nullptr;
  if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    (void)cudaGetLastError();
    return kFailed;
  }
  bool ok = true;
  for (int r = 0; r < runs && ok; ++r) ok = run();
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  cudaGraphExec_t exec = nullptr;
  ok = ok && ended == cudaSuccess && graph && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
  float ms = 0.f;
  ok = ok && cudaGraphUpload(exec, stream) == cudaSuccess && cudaEventRecord(ev.start, stream) == cudaSuccess &&
       cudaGraphLaunch(exec, stream) == cudaSuccess && cudaEventRecord(ev.stop, stream) == cudaSuccess &&
       cudaEventSynchronize(ev.stop) == cudaSuccess && cudaEventElapsedTime(&ms, ev.start, ev.stop) == cudaSuccess;
  if (exec) (void)cudaGraphExecDestroy(exec);
  if (graph) (void)cudaGraphDestroy(graph);
  if (!ok) {
    (void)cudaGetLastError();  // a refused capture or launch is not sticky; report it as a failure
    return kFailed;
  }
  return ms / runs;
}

}  // namespace gpu
}  // namespace ge
