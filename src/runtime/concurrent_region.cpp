#include "ganengine/concurrent_region.h"

#include <atomic>

#include "ganengine/allocator.h"
#include "runtime/cuda_context.h"

namespace ge {

namespace {
thread_local ConcurrentRegion* g_innermost = nullptr;

// The calling thread issues to `lane` for the scope's lifetime (also when fn throws).
class LaneScope {
 public:
  explicit LaneScope(gpu::Lane lane) : before_(gpu::current_lane()) { gpu::set_current_lane(lane); }
  ~LaneScope() { gpu::set_current_lane(before_); }
  LaneScope(const LaneScope&) = delete;
  LaneScope& operator=(const LaneScope&) = delete;

 private:
  gpu::Lane before_;
};

int lane_index(gpu::Lane l) { return static_cast<int>(l); }

// Events a region recorded go back here for the next region of the thread on that device (an
// eager step opens a region and records some forty points: creating and destroying that many
// events each step would cost more host time than recording them). Leaked on purpose at thread
// exit: destroying events after the CUDA context may be gone is worse.
std::vector<cudaEvent_t>& spare_events(int device) {
  static thread_local auto* spare = new std::vector<std::vector<cudaEvent_t>>(64);
  return spare->at(static_cast<size_t>(device));
}
}  // namespace

ConcurrentRegion::ConcurrentRegion(Device device, bool wanted) : device_(device) {
  if (!wanted || !device.is_cuda()) return;
  GE_CHECK(!active(device), "a concurrent region is already open on ", device.str(), " (regions do not nest)");
  gpu::CudaContext& ctx = gpu::context(device.index);
  // Made now, not in the middle of a graph capture.
  for (gpu::Lane l : {gpu::Lane::Side, gpu::Lane::Branch, gpu::Lane::BranchSide}) ctx.lane(l);
  cuda_allocator_open_lanes(device.index);
  static std::atomic<uint64_t> regions{0};
  serial_ = ++regions;
  enabled_ = true;
  outer_ = g_innermost;
  g_innermost = this;
}

ConcurrentRegion::~ConcurrentRegion() {
  if (!enabled_) return;
  try {
    join_branch();
  } catch (...) {
    // Only when the device already failed: the error surfaces at the next synchronising call.
    // Kept tensors and held blocks wait for every lane before being released.
    (void)gpu::synchronize(device_.index);
    for (LanePair& pair : pairs_) pair.keep.clear();
  }
  cuda_allocator_close_lanes(device_.index);
  for (void* e : events_) spare_events(device_.index).push_back(static_cast<cudaEvent_t>(e));
  g_innermost = outer_;
}

void ConcurrentRegion::rank_branch_side_below_branch(Device device, bool below) {
  if (!device.is_cuda()) return;
  GE_CHECK(!active(device), "ConcurrentRegion::rank_branch_side_below_branch while a region is open on ", device.str());
  gpu::rank_branch_side_below_branch(gpu::context(device.index), below);
}

ConcurrentRegion* ConcurrentRegion::active(Device device) {
  for (ConcurrentRegion* r = g_innermost; r; r = r->outer_)
    if (r->device_ == device) return r;
  return nullptr;
}

ConcurrentRegion::LanePair& ConcurrentRegion::calling_pair() {
  return pairs_[gpu::primary_of(gpu::current_lane()) == gpu::Lane::Branch ? 1 : 0];
}

ConcurrentRegion::Mark ConcurrentRegion::mark() {
  if (!enabled_) return {};
  gpu::CudaContext& ctx = gpu::context(device_.index);  // the device current: events belong to one
  std::vector<cudaEvent_t>& spare = spare_events(device_.index);
  cudaEvent_t e = nullptr;
  if (spare.empty()) {
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  } else {
    e = spare.back();
    spare.pop_back();
  }
  events_.push_back(e);
  CUDA_CHECK(cudaEventRecord(e, ctx.stream()));
  return {serial_, static_cast<int>(events_.size()) - 1};
}

void ConcurrentRegion::wait(const Mark& m) {
  if (!enabled_ || m.region != serial_) return;
  GE_CHECK(m.index >= 0 && static_cast<size_t>(m.index) < events_.size(), "ConcurrentRegion::wait: mark ", m.index,
           " of ", events_.size());
  CUDA_CHECK(cudaStreamWaitEvent(gpu::context(device_.index).stream(),
                                 static_cast<cudaEvent_t>(events_[static_cast<size_t>(m.index)]), 0));
}

void ConcurrentRegion::wait_for_lane(gpu::Lane lane) {
  Mark done;
  {
    LaneScope scope(lane);
    done = mark();
  }
  wait(done);
}

void ConcurrentRegion::on_side(std::vector<Tensor> keep, const std::function<void()>& fn) {
  if (!enabled_) {
    fn();
    return;
  }
  LanePair& pair = calling_pair();
  if (!hold_kept_ && !keep.empty() && !pair.keep.empty()) join();
  const gpu::Lane caller = gpu::current_lane();
  LaneScope scope(gpu::side_of(caller));
  wait_for_lane(caller);
  pair.side_pending = true;
  for (Tensor& t : keep) pair.keep.push_back(std::move(t));
  fn();
}

void ConcurrentRegion::join() {
  if (!enabled_) return;
  join_pair(calling_pair());
}

void ConcurrentRegion::join_pair(LanePair& pair) {
  if (!pair.side_pending) return;
  const gpu::Lane lane = gpu::primary_of(gpu::current_lane());
  LaneScope scope(lane);
  wait_for_lane(gpu::side_of(lane));
  pair.side_pending = false;
  // This lane's work from here on runs after its side lane's: the kept tensors are released
  // as this lane's, with what the side lane held.
  pair.keep.clear();
  cuda_allocator_merge_held(device_.index, lane_index(gpu::side_of(lane)), lane_index(lane));
  if (lane == gpu::Lane::Main) release_after_join();
}

void ConcurrentRegion::release_after_join() {
  // Only once the main lane has waited for every other lane may any lane reuse any block.
  if (branch_pending_ || pairs_[0].side_pending || pairs_[1].side_pending) return;
  cuda_allocator_join_lanes(device_.index);
}

void ConcurrentRegion::fork_branch() {
  if (!enabled_) return;
  GE_CHECK(gpu::current_lane() == gpu::Lane::Main && !branch_pending_,
           "ConcurrentRegion::fork_branch: from the main lane, once until join_branch");
  branch_fork_ = mark();
  branch_pending_ = true;
}

void ConcurrentRegion::on_branch(const std::function<void()>& fn) {
  if (!enabled_) {
    fn();
    return;
  }
  GE_CHECK(gpu::current_lane() == gpu::Lane::Main && branch_pending_,
           "ConcurrentRegion::on_branch: from the main lane, after fork_branch");
  LaneScope scope(gpu::Lane::Branch);
  wait(branch_fork_);
  branch_work_ = true;
  fn();
  join_pair(pairs_[1]);
}

void ConcurrentRegion::join_branch() {
  if (!enabled_) return;
  LaneScope scope(gpu::Lane::Main);
  if (branch_pending_ && branch_work_) {
    {
      LaneScope branch(gpu::Lane::Branch);
      join_pair(pairs_[1]);
    }
    wait_for_lane(gpu::Lane::Branch);
  }
  if (branch_pending_) {
    branch_pending_ = branch_work_ = false;
    cuda_allocator_merge_held(device_.index, lane_index(gpu::Lane::Branch), lane_index(gpu::Lane::Main));
  }
  join_pair(pairs_[0]);
  release_after_join();
}

}  // namespace ge
