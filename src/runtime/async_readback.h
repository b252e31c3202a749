// A small device tensor read back to the host without stalling the device: the copy is queued
// on the device's stream behind the work that writes the tensor, and the host takes the bytes
// once the stream has got there. `train` reads each logged step's losses this way, so it never
// waits for one step to finish before queueing the next (no host synchronisation per step).
#pragma once
#include <cstddef>

#include "ganengine/tensor.h"

namespace ge {

class AsyncReadback {
 public:
  explicit AsyncReadback(size_t max_bytes);
  ~AsyncReadback();
  AsyncReadback(const AsyncReadback&) = delete;
  AsyncReadback& operator=(const AsyncReadback&) = delete;

  // Queues the copy of t (a dense tensor or a slice0 of one, at most max_bytes) on its device's
  // stream, after the work already queued there. A CPU tensor is copied at once. A previous
  // copy must have been taken.
  void start(const Tensor& t);
  bool pending() const { return pending_; }
  // The copy has landed (never blocks).
  bool ready() const;
  // Blocks until the copy has landed and returns the bytes; the readback is free again.
  const void* take();

 private:
  void* host_ = nullptr;  // pinned, so the copy runs asynchronously
  size_t capacity_ = 0;
  void* event_ = nullptr;  // cudaEvent_t, created on first GPU use
  int event_device_ = -1;
  bool pending_ = false;
  bool on_gpu_ = false;  // the pending copy is the GPU's (else it was done at start)
};

}  // namespace ge
