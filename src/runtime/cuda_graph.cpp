// CUDA graphs over the context's stream, with the caching allocator's private pools keeping
// every captured buffer reserved (cuda_graph.h).
#include "ganengine/cuda_graph.h"

#include "runtime/cuda_context.h"
#include "runtime/graph_memset_hoist.h"
#include "runtime/graph_memsets.h"
#include "runtime/graph_roots.h"

namespace ge {

namespace {

// Ends a capture that failed part-way. The capture is invalidated by whatever went wrong, so
// EndCapture may report an error; all that matters is that the stream leaves capture mode.
void abandon_capture(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
    cudaGraph_t broken = nullptr;
    (void)cudaStreamEndCapture(stream, &broken);
    if (broken) (void)cudaGraphDestroy(broken);
  }
  (void)cudaGetLastError();  // the failed call's error is not sticky: clear it
}

// The lanes' cuDNN workspaces as the captured graph refers to them (they cannot grow during a
// capture).
std::vector<gpu::ByteRange> lane_workspaces(gpu::CudaContext& ctx) {
  std::vector<gpu::ByteRange> ranges;
  for (const gpu::LaneState& lane : ctx.lanes)
    if (lane.workspace) ranges.push_back({lane.workspace, lane.workspace_bytes});
  return ranges;
}

}  // namespace

CudaGraph::~CudaGraph() {
  try {
    reset();
  } catch (...) {
    // A destructor must not throw; reset() reports nothing it could not recover from anyway.
  }
}

void CudaGraph::capture(Device device, const std::function<void()>& body) {
  GE_CHECK(device.is_cuda(), "a CUDA graph needs a CUDA device, got ", device.str());
  reset();
  gpu::CudaContext& ctx = gpu::context(device.index);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(ctx.main_stream(), &status));
  GE_CHECK(status == cudaStreamCaptureStatusNone, "CUDA graph capture on cuda:", device.index,
           " while its stream is already being captured");
  // Any error still pending from earlier work would be misread as a capture failure.
  CUDA_CHECK(cudaGetLastError());

  device_ = device.index;
  pool_ = cuda_allocator_begin_graph_pool(device_);
  gpu::pin_workspace(ctx);
  pinned_workspace_ = true;
  try {
    CUDA_CHECK(cudaStreamBeginCapture(ctx.main_stream(), cudaStreamCaptureModeThreadLocal));
    body();
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(ctx.main_stream(), &graph);
    graph_ = graph;
    cuda_allocator_end_graph_pool(device_);
    if (ended != cudaSuccess || graph == nullptr)
      fail("CUDA graph capture on cuda:", device_, " failed: ", cudaGetErrorName(ended), " (",
           cudaGetErrorString(ended), "): the captured work used an operation a graph cannot hold");
    memsets_hoisted_ = gpu::hoist_workspace_memsets(graph, lane_workspaces(ctx));
    memsets_replaced_ = gpu::memsets_to_kernels(graph);
    roots_joined_ = gpu::join_graph_roots(graph);
    cudaGraphExec_t exec = nullptr;
    // Kernels keep the priority of the stream they were captured from (cuda_context.cpp).
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, cudaGraphInstantiateFlagUseNodePriority));
    exec_ = exec;
    size_t n = 0;
    CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &n));
    nodes_ = n;
  } catch (...) {
    abandon_capture(ctx.main_stream());
    // Nothing was launched: the pool's blocks can go back to the cache at once.
    if (exec_) (void)cudaGraphExecDestroy(exec_);
    if (graph_) (void)cudaGraphDestroy(graph_);
    exec_ = nullptr;
    graph_ = nullptr;
    nodes_ = 0;
    memsets_replaced_ = 0;
    memsets_hoisted_ = 0;
    roots_joined_ = 0;
    cuda_allocator_release_graph_pool(device_, pool_);  // also ends it
    pool_ = 0;
    gpu::unpin_workspace(ctx);
    pinned_workspace_ = false;
    (void)cudaGetLastError();
    throw;
  }
}

void CudaGraph::replay() {
  GE_CHECK(exec_ != nullptr, "CudaGraph::replay before a successful capture");
  gpu::CudaContext& ctx = gpu::context(device_);
  CUDA_CHECK(cudaGraphLaunch(exec_, ctx.main_stream()));
}

void CudaGraph::reset() {
  if (device_ < 0) return;
  gpu::CudaContext& ctx = gpu::context(device_);
  if (exec_ || graph_) {
    // A replay may still be running: its buffers go back to the cache only once it is done.
    const cudaError_t synced = cudaStreamSynchronize(ctx.main_stream());
    if (exec_) (void)cudaGraphExecDestroy(exec_);
    if (graph_) (void)cudaGraphDestroy(graph_);
    exec_ = nullptr;
    graph_ = nullptr;
    nodes_ = 0;
    memsets_replaced_ = 0;
    memsets_hoisted_ = 0;
    roots_joined_ = 0;
    if (synced != cudaSuccess) {
      // The device failed; reusing memory it might still touch would turn one error into
      // silent corruption. Keep the pool reserved (leaked) and report.
      (void)cudaGetLastError();
      pool_ = 0;
      pinned_workspace_ = false;  // and the workspace pinned: retired buffers are never freed
      device_ = -1;
      fail("CUDA graph teardown: cudaStreamSynchronize failed: ", cudaGetErrorName(synced), " (",
           cudaGetErrorString(synced), ")");
    }
  }
  if (pool_ != 0) cuda_allocator_release_graph_pool(device_, pool_);
  pool_ = 0;
  if (pinned_workspace_) gpu::unpin_workspace(ctx);
  pinned_workspace_ = false;
  device_ = -1;
}

}  // namespace ge
