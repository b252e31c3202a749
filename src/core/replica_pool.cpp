#include "core/replica_pool.h"

#include "ganengine/error.h"

namespace ge {

ReplicaPool::ReplicaPool(int replicas) {
  GE_CHECK(replicas >= 1, "a replica pool needs at least one replica, got ", replicas);
  try {
    for (int k = 0; k < replicas; ++k) threads_.emplace_back([this, k] { loop(k); });
  } catch (...) {  // no thread to be had: the ones started must be joined before the error leaves
    stop_and_join();
    throw;
  }
}

ReplicaPool::~ReplicaPool() { stop_and_join(); }

void ReplicaPool::stop_and_join() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ReplicaPool::run(const std::function<void(int)>& work, const std::function<void()>& on_error) {
  std::unique_lock<std::mutex> lock(mu_);
  work_ = &work;
  on_error_ = on_error ? &on_error : nullptr;
  pending_ = size();
  first_error_ = nullptr;
  ++generation_;
  cv_.notify_all();
  cv_.wait(lock, [&] { return pending_ == 0; });
  work_ = nullptr;
  if (first_error_) std::rethrow_exception(first_error_);
}

void ReplicaPool::loop(int k) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* work = nullptr;
    const std::function<void()>* on_error = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      work = work_;
      on_error = on_error_;
    }
    std::exception_ptr error;
    try {
      (*work)(k);
    } catch (...) {
      error = std::current_exception();
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!first_error_) first_error_ = error;
      }
      if (on_error) {
        try {
          (*on_error)();
        } catch (...) {  // the replica's own error is the one to report
        }
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) cv_.notify_all();
    }
  }
}

}  // namespace ge
