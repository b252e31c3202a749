// Per-device CUDA state shared by all GPU ops: the streams work is issued on, and the cuDNN
// and cuBLAS handles bound to them.
//
// Four lanes per device: the main lane, where all work goes by default, and three that a
// ConcurrentRegion (concurrent_region.h) opens for work independent of what the main lane does
// meanwhile: the branch lane (D's pass on the fake batch beside its pass on the real one), and a
// side lane for each of them (a filter gradient beside the rest of its backward pass). Each lane
// has its own stream, cuDNN handle and cuDNN workspace, so concurrent convolutions never share
// scratch memory. Which lane a thread issues to is the thread's current lane; ops read it
// through stream() / cudnn() / workspace().
#pragma once
#include <array>
#include <vector>

#include "runtime/cuda_check.h"

namespace ge {
namespace gpu {

enum class Lane { Main = 0, Side = 1, Branch = 2, BranchSide = 3 };
constexpr size_t kLanes = 4;
// The lane a lane hands its side work to, and the one a side lane joins back into.
inline Lane side_of(Lane l) { return l == Lane::Branch || l == Lane::BranchSide ? Lane::BranchSide : Lane::Side; }
inline Lane primary_of(Lane l) { return l == Lane::Branch || l == Lane::BranchSide ? Lane::Branch : Lane::Main; }

struct LaneState {
  cudaStream_t stream = nullptr;
  cudnnHandle_t cudnn = nullptr;
  void* workspace = nullptr;  // cuDNN workspace, grown on demand outside graph capture
  size_t workspace_bytes = 0;
  std::vector<void*> retired_workspaces;  // outgrown while a CUDA graph still referred to them
  cublasHandle_t cublas = nullptr;        // for GEMMs inside training steps: made on first use
};

// The lane the calling thread issues work to (Main unless a ConcurrentRegion moved it).
Lane current_lane();
void set_current_lane(Lane lane);

struct CudaContext {
  int device = 0;
  cublasHandle_t cublas = nullptr;      // bound to the main stream (used outside training steps)
  std::array<LaneState, kLanes> lanes;  // all but the main lane's stream and handle are made on first use
  // Captured CUDA graphs bake the workspaces' addresses in: while any graph holds a pin, growing
  // a workspace keeps the old buffer alive (retired) instead of freeing it.
  int workspace_pins = 0;
  bool branch_side_below = false;  // rank_branch_side_below_branch

  LaneState& lane(Lane l);  // creates the lane's stream and handle on first use
  LaneState& current() { return lane(current_lane()); }
  cudaStream_t stream() { return current().stream; }
  cudnnHandle_t cudnn() { return current().cudnn; }
  cudaStream_t main_stream() { return lanes[0].stream; }
};

// The context of device k, created on first use (sets the current device).
CudaContext& context(int device_index = 0);
// Stream priorities: the branch lane has the
// greatest, and so has its side lane, or with `below` the next one down, so that the branch
// lane's own kernels take free SMs first. A captured graph keeps the priorities it was captured
// with. Changing it re-creates the side lane's stream (after waiting for it): call it outside
// graph captures and concurrent regions.
void rank_branch_side_below_branch(CudaContext& ctx, bool below);
// The current lane's cuDNN workspace, at least `bytes` large. Growing it synchronises that
// lane's stream and allocates, so it throws ge::Error when asked to grow during graph capture.
void* workspace(CudaContext& ctx, size_t bytes);
// The current lane's cuBLAS handle, bound to its stream and to its workspace (at least `bytes`
// of it, grown as workspace() grows it), so cuBLAS never allocates: GEMMs then run inside CUDA
// graph captures, and the two lanes never share scratch memory.
cublasHandle_t lane_cublas(CudaContext& ctx, size_t bytes);
// A CUDA graph referring to the current workspaces holds a pin for as long as it lives.
void pin_workspace(CudaContext& ctx);
void unpin_workspace(CudaContext& ctx);  // never throws (graph destructors call it)
// Waits for every lane of the device.
void synchronize(int device_index = 0);

}  // namespace gpu
}  // namespace ge
