// One host thread per replica, kept for the whole run: each replica's work (enqueueing its
// training step on its GPU, NCCL calls included) is issued from its own thread, as NCCL requires
// when one process drives several GPUs, and the threads' CUDA state (current device, graph
// capture) stays put from step to step.
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
  // the lowest rank's exception after all have finished.
  void run(const std::function<void(int)>& work);

 private:
  void loop(int k);
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  const std::function<void(int)>* work_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::vector<std::exception_ptr> errors_;
};

}  // namespace ge
