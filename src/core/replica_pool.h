// One host thread per replica, kept for the whole run: each replica's work (enqueueing its
// training step on its GPU, NCCL calls included) is issued from its own thread, as NCCL requires
// when one process drives several GPUs, and the threads' CUDA state (current device, graph
// capture) stays put from step to step. The host Loader keeps its decoding workers in one too,
// so that a batch costs no thread starts.
#pragma once
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ge {

class ReplicaPool {
 public:
  explicit ReplicaPool(int replicas);
  ~ReplicaPool();
  ReplicaPool(const ReplicaPool&) = delete;
  ReplicaPool& operator=(const ReplicaPool&) = delete;
  int size() const { return static_cast<int>(threads_.size()); }
  // Runs work(k) on replica k's thread for every k and waits for all; if any threw, rethrows
  // the first exception thrown (the cause, when others failed because of it) after all have
  // finished. on_error runs (on the failing thread)
  // as soon as one throws: abort the replicas' group there, or the others may wait for the
  // failed one forever.
  void run(const std::function<void(int)>& work, const std::function<void()>& on_error = {});

 private:
  void loop(int k);
  void stop_and_join();
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  const std::function<void(int)>* work_ = nullptr;
  const std::function<void()>* on_error_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::exception_ptr first_error_;
};

}  // namespace ge
