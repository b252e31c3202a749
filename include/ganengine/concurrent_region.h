// Independent parts of a training step running side by side on one GPU. At small batches most
// of the step's kernels fill a fraction of the GPU, so more streams let, for example, D's pass on
// the fake batch (with G's forward before it) run beside its pass on the real batch, and a
// layer's filter gradient beside the rest of the backward pass. Captured into a CUDA graph, the
// streams become parallel branches.
//
// A region is opened on a device by the one thread driving it. While it is open:
// - fork_branch() opens the device's branch lane (cuda_context.h) at the main lane's current
//   point; on_branch() hands it work, which runs after that point only; join_branch() makes
//   the main lane wait for all of it.
// - on_side() hands work to the side lane of the lane the caller issues to (the main lane's or
//   the branch lane's); join() makes that lane wait for its side lane.
// - mark() / wait() order one lane after a point of another (what must happen in a fixed order
//   across lanes, such as updates of one running statistic).
// The caching allocator holds each freed block for the lane that freed it until the lanes it
// could still be used by have been waited for (allocator.h), so no lane reuses memory another
// may still be using.
//
// What the caller must keep in mind: work given to another lane may still run after the host
// has moved on. Tensors it reads or writes that the caller could release before the next join
// go into on_side's `keep` list; results it writes may be read on the issuing lane only after a
// join. A tensor the branch lane uses must be released either on the branch lane (inside
// on_branch) or after join_branch (the destructor joins everything).
//
// Off on a CPU device, or when not wanted: every lane is the main lane, on_side and on_branch
// run their work in place, marks are empty and waits do nothing.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "ganengine/tensor.h"

namespace ge {
namespace gpu {
enum class Lane;  // cuda_context.h
}

class ConcurrentRegion {
 public:
  // A point in one lane's work; wait() orders another lane after it. A mark left by an earlier
  // region needs no waiting: that region joined every lane into the main lane when it closed.
  struct Mark {
    uint64_t region = 0;  // the region's serial number; 0: no point (a region that is off)
    int index = -1;
  };

  // wanted false: a region that runs everything in place (on_side runs fn at once).
  explicit ConcurrentRegion(Device device, bool wanted = true);
  ~ConcurrentRegion();  // joins every lane; never throws
  ConcurrentRegion(const ConcurrentRegion&) = delete;
  ConcurrentRegion& operator=(const ConcurrentRegion&) = delete;

  // fn's device work goes to the calling lane's side lane, ordered after everything the calling
  // lane has been given so far; the host runs fn now. `keep` stays alive until that side lane's
  // next join. To bound what is kept, a call with a non-empty `keep` joins first if an earlier
  // call's tensors are still kept, unless hold_kept_until_join(true) was asked.
  void on_side(std::vector<Tensor> keep, const std::function<void()>& fn);
  // true: on_side never joins to release what earlier calls kept (the calling lane does not
  // wait for its side lane's earlier work; what is kept stays until the next explicit join).
  void hold_kept_until_join(bool hold) { hold_kept_ = hold; }
  // The calling lane waits for everything given to its side lane so far.
  void join();

  // Opens the branch lane at the main lane's current point: work given to it later
  // (on_branch) runs after this point only, beside whatever the main lane is given meanwhile.
  // Until join_branch, no block the main lane frees goes to the branch lane, or the other way.
  void fork_branch();
  // fn's device work goes to the branch lane, after the fork and the branch lane's earlier
  // work; the host runs fn now, from the main lane. fn's side work has joined the branch lane
  // when on_branch returns.
  void on_branch(const std::function<void()>& fn);
  // The main lane waits for everything given to the branch lane (and the side lanes) so far.
  void join_branch();

  // The current point of the calling lane's work.
  Mark mark();
  // The calling lane's later work runs after `m`. An empty mark, or one an earlier region left,
  // is already satisfied.
  void wait(const Mark& m);

  // The region this thread has open on `device`, or null.
  static ConcurrentRegion* active(Device device);
  // The branch lane's side lane at a stream priority one below the branch lane's, or (false, the
  // default) at the same (cuda_context.h). Between regions, outside graph captures.
  static void rank_branch_side_below_branch(Device device, bool below);

 private:
  // A lane that issues work and the side lane it hands filter gradients to.
  struct LanePair {
    bool side_pending = false;  // side work given since the last join
    std::vector<Tensor> keep;
  };
  LanePair& calling_pair();
  void join_pair(LanePair& pair);
  void release_after_join();

  Device device_;
  uint64_t serial_ = 0;  // distinct for every enabled region of the process
  bool enabled_ = false;
  bool hold_kept_ = false;       // hold_kept_until_join
  bool branch_pending_ = false;  // forked and not joined yet
  bool branch_work_ = false;     // on_branch gave it work since the fork
  Mark branch_fork_;
  std::array<LanePair, 2> pairs_;      // the main lane's, the branch lane's
  ConcurrentRegion* outer_ = nullptr;  // this thread's region on another device, if any
  std::vector<void*> events_;          // cudaEvent_t, one per mark (forks and joins are marks)
  // The calling lane waits for everything `lane` has been given so far.
  void wait_for_lane(gpu::Lane lane);
};

}  // namespace ge
