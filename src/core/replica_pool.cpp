#include "ganengine/replica_pool.h"

#include "ganengine/error.h"

namespace ge {

ReplicaPool::ReplicaPool(int replicas) : errors_(static_cast<size_t>(replicas)) {
  GE_CHECK(replicas >= 1, "a replica pool needs at least one replica, got ", replicas);
  for (int k = 0; k < replicas; ++k) threads_.emplace_back([this, k] { loop(k); });
}

ReplicaPool::~ReplicaPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ReplicaPool::run(const std::function<void(int)>& work) {
  std::unique_lock<std::mutex> lock(mu_);
  work_ = &work;
  pending_ = size();
  for (auto& e : errors_) e = nullptr;
  ++generation_;
  cv_.notify_all();
  cv_.wait(lock, [&] { return pending_ == 0; });
  work_ = nullptr;
  for (auto& e : errors_)
    if (e) std::rethrow_exception(e);
}

void ReplicaPool::loop(int k) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* work = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      work = work_;
    }
    std::exception_ptr error;
    try {
      (*work)(k);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      errors_[static_cast<size_t>(k)] = error;
      if (--pending_ == 0) cv_.notify_all();
    }
  }
}

}  // namespace ge
