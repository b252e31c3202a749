// Independent parts of a training step running side by side on one GPU. At batch 64 most of
// the step's kernels fill a fraction of the H200, so a second stream lets, for example, G's
// forward run beside D's pass on the real batch, and a layer's filter gradient beside the rest
// of the backward pass. Captured into a CUDA graph, the two streams become parallel branches.
//
// A region is opened on a device by the one thread driving it; while it is open, on_side()
// hands work to the device's side lane (cuda_context.h) and everything else keeps going to the
// main lane. The caching allocator holds each freed block for the lane that freed it until the
// lanes join (allocator.h), so neither lane reuses memory the other may still be using.
//
// What the caller must keep in mind: work given to the side lane may still run after the host
// has moved on. Tensors it reads or writes that the caller could release before the next join
// go into on_side's `keep` list; results it writes may be read on the main lane only after a
// join (the destructor joins).
//
// Off on a CPU device, or when not wanted: on_side then runs its work in place on the main lane.
#pragma once
#include <functional>
#include <vector>

#include "ganengine/tensor.h"

namespace ge {

class ConcurrentRegion {
 public:
  // wanted false: a region that runs everything in place (on_side runs fn at once).
  explicit ConcurrentRegion(Device device, bool wanted = true);
  ~ConcurrentRegion();  // joins; never throws
  ConcurrentRegion(const ConcurrentRegion&) = delete;
  ConcurrentRegion& operator=(const ConcurrentRegion&) = delete;

  // fn's device work goes to the side lane, ordered after everything the main lane has been
  // given so far; the host runs fn now. `keep` stays alive until the next join. To bound what is
  // kept, a call with a non-empty `keep` joins first if an earlier call's tensors are still kept.
  void on_side(std::vector<Tensor> keep, const std::function<void()>& fn);
  // The main lane waits for everything given to the side lane so far.
  void join();

  // The region this thread has open on `device`, or null.
  static ConcurrentRegion* active(Device device);

 private:
  Device device_;
  bool enabled_ = false;
  bool side_pending_ = false;  // side work given since the last join
  std::vector<Tensor> keep_;
  ConcurrentRegion* outer_ = nullptr;  // this thread's region on another device, if any
  void* fork_event_ = nullptr;  // cudaEvent_t
  void* join_event_ = nullptr;
};


}  // namespace ge
