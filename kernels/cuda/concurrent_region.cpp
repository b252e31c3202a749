#include "ganengine/concurrent_region.h"

#include "ganengine/allocator.h"
#include "ganengine/cuda_context.h"

namespace ge {

namespace {
thread_local ConcurrentRegion* g_innermost = nullptr;

// The calling thread issues to the side lane for its lifetime (also when fn throws).
class SideLaneScope {
 public:
  SideLaneScope() { gpu::set_current_lane(gpu::Lane::Side); }
  ~SideLaneScope() { gpu::set_current_lane(gpu::Lane::Main); }
  SideLaneScope(const SideLaneScope&) = delete;
  SideLaneScope& operator=(const SideLaneScope&) = delete;
};
}  // namespace

ConcurrentRegion::ConcurrentRegion(Device device, bool wanted) : device_(device) {
  if (!wanted || !device.is_cuda()) return;
  GE_CHECK(!active(device), "a concurrent region is already open on ", device.str(), " (regions do not nest)");
  gpu::CudaContext& ctx = gpu::context(device.index);
  ctx.lane(gpu::Lane::Side);  // made now, not in the middle of a graph capture
  cudaEvent_t fork = nullptr, join = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  if (cudaEventCreateWithFlags(&join, cudaEventDisableTiming) != cudaSuccess) {
    (void)cudaEventDestroy(fork);
    fail("cannot create a CUDA event on ", device.str());
  }
  fork_event_ = fork;
  join_event_ = join;
  cuda_allocator_open_lanes(device.index);
  enabled_ = true;
  outer_ = g_innermost;
  g_innermost = this;
}

ConcurrentRegion::~ConcurrentRegion() {
  if (!enabled_) return;
  try {
    join();
  } catch (...) {
    // Only when the device already failed: the error surfaces at the next synchronising call.
    // Kept tensors and held blocks then wait for the main stream before being released.
    (void)cudaStreamSynchronize(gpu::context(device_.index).lane(gpu::Lane::Side).stream);
    keep_.clear();
  }
  cuda_allocator_close_lanes(device_.index);
  (void)cudaEventDestroy(static_cast<cudaEvent_t>(fork_event_));
  (void)cudaEventDestroy(static_cast<cudaEvent_t>(join_event_));
  g_innermost = outer_;
}

ConcurrentRegion* ConcurrentRegion::active(Device device) {
  for (ConcurrentRegion* r = g_innermost; r; r = r->outer_)
    if (r->device_ == device) return r;
  return nullptr;
}

void ConcurrentRegion::on_side(std::vector<Tensor> keep, const std::function<void()>& fn) {
  if (!enabled_) {
    fn();
    return;
  }
  if (!keep.empty() && !keep_.empty()) join();
  gpu::CudaContext& ctx = gpu::context(device_.index);
  const auto fork = static_cast<cudaEvent_t>(fork_event_);
  CUDA_CHECK(cudaEventRecord(fork, ctx.main_stream()));
  CUDA_CHECK(cudaStreamWaitEvent(ctx.lane(gpu::Lane::Side).stream, fork, 0));
  side_pending_ = true;
  for (Tensor& t : keep) keep_.push_back(std::move(t));
  SideLaneScope scope;
  fn();
}

void ConcurrentRegion::join() {
  if (!enabled_ || !side_pending_) return;
  gpu::CudaContext& ctx = gpu::context(device_.index);
  const auto join = static_cast<cudaEvent_t>(join_event_);
  CUDA_CHECK(cudaEventRecord(join, ctx.lane(gpu::Lane::Side).stream));
  CUDA_CHECK(cudaStreamWaitEvent(ctx.main_stream(), join, 0));
  side_pending_ = false;
  // Main-lane work from here on runs after the side lane's: its tensors and held blocks are free.
  keep_.clear();
  cuda_allocator_join_lanes(device_.index);
}

}  // namespace ge
