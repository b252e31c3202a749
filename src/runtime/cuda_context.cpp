#include "runtime/cuda_context.h"

#include <mutex>
#include <vector>

#include "core/backend.h"
#include "ganengine/allocator.h"

namespace ge {

bool built_with_cuda() { return true; }

int cuda_device_count() {
  static const int count = [] {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

bool cuda_available() { return cuda_device_count() > 0; }

void synchronize(Device d) {
  if (d.is_cuda()) gpu::synchronize(d.index);
}

size_t cuda_workspace_bytes(int device_index) {
  const gpu::CudaContext& ctx = gpu::context(device_index);
  size_t bytes = 0;
  for (const gpu::LaneState& lane : ctx.lanes) bytes += lane.workspace_bytes;
  return bytes;
}

void cuda_release_workspace(int device_index) {
  gpu::CudaContext& ctx = gpu::context(device_index);
  if (ctx.workspace_pins > 0) return;
  for (gpu::LaneState& lane : ctx.lanes) {
    if (!lane.workspace) continue;
    CUDA_CHECK(cudaStreamSynchronize(lane.stream));  // queued work may still use it
    CUDA_CHECK(cudaFree(lane.workspace));
    lane.workspace = nullptr;
    lane.workspace_bytes = 0;
  }
}

namespace gpu {

namespace {
thread_local Lane g_current_lane = Lane::Main;

// The branch lanes carry a step's longest chain while they run (G's forward, then D's pass on
// the fake batch, beside D's shorter pass on the real batch): their blocks go first when both
// wait for SMs.
int lane_priority(Lane l, bool branch_side_below) {
  if (l != Lane::Branch && l != Lane::BranchSide) return 0;
  int least = 0, greatest = 0;
  CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  // Lower numbers are greater priorities.
  if (l == Lane::BranchSide && branch_side_below && greatest < least) return greatest + 1;
  return greatest;
}

cudaStream_t new_lane_stream(Lane l, bool branch_side_below) {
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, lane_priority(l, branch_side_below)));
  return stream;
}

void create_lane(LaneState& lane, Lane l, bool branch_side_below) {
  lane.stream = new_lane_stream(l, branch_side_below);
  CUDNN_CHECK(cudnnCreate(&lane.cudnn));
  CUDNN_CHECK(cudnnSetStream(lane.cudnn, lane.stream));
}
}  // namespace

Lane current_lane() { return g_current_lane; }
void set_current_lane(Lane lane) { g_current_lane = lane; }

LaneState& CudaContext::lane(Lane l) {
  LaneState& s = lanes[static_cast<size_t>(l)];
  if (!s.stream) create_lane(s, l, branch_side_below);  // never the main lane: it exists from the start
  return s;
}

CudaContext& context(int device_index) {
  static std::mutex mu;
  static auto* contexts = new std::vector<CudaContext*>(64, nullptr);  // leaked: outlives tensors
  std::lock_guard<std::mutex> lock(mu);
  if (device_index < 0 || device_index >= 64) fail("CUDA device index ", device_index, " out of range");
  CudaContext*& ctx = (*contexts)[device_index];
  if (!ctx) {
    int count = 0;
    CUDA_CHECK(cudaGetDeviceCount(&count));
    if (device_index >= count)
      fail("cuda:", device_index, " requested but only ", count, " CUDA device(s) are present");
    ctx = new CudaContext;
    ctx->device = device_index;
    CUDA_CHECK(cudaSetDevice(device_index));
    create_lane(ctx->lanes[0], Lane::Main, false);
    CUBLAS_CHECK(cublasCreate(&ctx->cublas));
    CUBLAS_CHECK(cublasSetStream(ctx->cublas, ctx->lanes[0].stream));
  }
  CUDA_CHECK(cudaSetDevice(device_index));
  return *ctx;
}

void rank_branch_side_below_branch(CudaContext& ctx, bool below) {
  if (ctx.branch_side_below == below) return;
  ctx.branch_side_below = below;
  LaneState& lane = ctx.lanes[static_cast<size_t>(Lane::BranchSide)];
  if (!lane.stream) return;  // made later, with the priority asked for
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(lane.stream, &capture));
  GE_CHECK(capture == cudaStreamCaptureStatusNone, "rank_branch_side_below_branch during a CUDA graph capture");
  CUDA_CHECK(cudaStreamSynchronize(lane.stream));
  cudaStream_t old = lane.stream;
  lane.stream = new_lane_stream(Lane::BranchSide, below);
  CUDNN_CHECK(cudnnSetStream(lane.cudnn, lane.stream));
  if (lane.cublas) CUBLAS_CHECK(cublasSetStream(lane.cublas, lane.stream));
  CUDA_CHECK(cudaStreamDestroy(old));
}

void* workspace(CudaContext& ctx, size_t bytes) {
  LaneState& lane = ctx.current();
  if (bytes <= lane.workspace_bytes) return lane.workspace;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(lane.stream, &capture));
  if (capture != cudaStreamCaptureStatusNone)
    fail("the cuDNN workspace of cuda:", ctx.device, " would have to grow from ", lane.workspace_bytes, " to ", bytes,
         " bytes during CUDA graph capture, which cannot synchronise or allocate: run more warm-up steps with the "
         "same shapes before capturing");
  // Growing means freeing the old buffer, which may still be read by queued work.
  CUDA_CHECK(cudaStreamSynchronize(lane.stream));
  if (lane.workspace) {
    if (ctx.workspace_pins > 0)
      lane.retired_workspaces.push_back(lane.workspace);  // a live CUDA graph still uses it
    else
      CUDA_CHECK(cudaFree(lane.workspace));
    lane.workspace = nullptr;
    lane.workspace_bytes = 0;
  }
  size_t want = ((bytes + (1 << 20) - 1) >> 20) << 20;
  CUDA_CHECK(cudaMalloc(&lane.workspace, want));
  lane.workspace_bytes = want;
  return lane.workspace;
}

cublasHandle_t lane_cublas(CudaContext& ctx, size_t bytes) {
  void* ws = workspace(ctx, bytes);
  LaneState& lane = ctx.current();
  if (!lane.cublas) {
    CUBLAS_CHECK(cublasCreate(&lane.cublas));
    CUBLAS_CHECK(cublasSetStream(lane.cublas, lane.stream));
  }
  // Every call: the workspace may have been reallocated since (always the same size asked for
  // a given GEMM, so cuBLAS chooses the same algorithm on both lanes and every run).
  CUBLAS_CHECK(cublasSetWorkspace(lane.cublas, ws, bytes));
  return lane.cublas;
}

void pin_workspace(CudaContext& ctx) { ++ctx.workspace_pins; }

void unpin_workspace(CudaContext& ctx) {
  if (ctx.workspace_pins > 0) --ctx.workspace_pins;
  if (ctx.workspace_pins > 0) return;
  for (LaneState& lane : ctx.lanes) {
    if (lane.retired_workspaces.empty()) continue;
    // No graph refers to the retired buffers any more; queued work might still.
    if (cudaStreamSynchronize(lane.stream) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;  // keep them: freeing memory the device may still read is worse than a leak
    }
    for (void* p : lane.retired_workspaces) (void)cudaFree(p);
    lane.retired_workspaces.clear();
  }
  (void)cudaGetLastError();
}

void synchronize(int device_index) {
  CudaContext& ctx = context(device_index);
  for (LaneState& lane : ctx.lanes)
    if (lane.stream) CUDA_CHECK(cudaStreamSynchronize(lane.stream));
}

}  // namespace gpu
}  // namespace ge
