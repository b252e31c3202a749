#include <algorithm>

#include "ganengine/error.h"
#include "ganengine/replica_group.h"

namespace ge {

HostReplicaHub::HostReplicaHub(int size) : size_(size), arrived_(static_cast<size_t>(size), nullptr) {
  GE_CHECK(size >= 1, "a replica group needs at least one replica, got ", size);
}

// A two-phase barrier: everyone arrives, the last to arrive reduces into every buffer, then
// everyone leaves before the next collective may start.
void HostReplicaHub::abort() {
  std::lock_guard<std::mutex> lock(mu_);
  aborted_ = true;
  cv_.notify_all();
}

void HostReplicaHub::reduce(int rank, const Tensor& t, int op) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return leaving_ == 0 || aborted_; });
  if (aborted_) fail("replica ", rank, ": another replica failed, so this collective was abandoned");
  const uint64_t gen = generation_;
  arrived_[static_cast<size_t>(rank)] = &t;
  if (++count_ == size_) {
    const Tensor& first = *arrived_[0];
    for (const Tensor* other : arrived_)
      GE_CHECK(other->device().is_cpu() && other->dtype() == first.dtype() && other->numel() == first.numel(),
               "replica all-reduce: tensors differ across ranks: ", first.str(), " vs ", other->str());
    std::vector<std::vector<double>> values;
    for (const Tensor* x : arrived_) values.push_back(x->to_doubles());
    std::vector<double> out(values[0].size());
    for (size_t i = 0; i < out.size(); ++i) {
      double acc = op == 1 ? values[0][i] : 0.0;
      for (const auto& v : values) acc = op == 1 ? std::max(acc, v[i]) : acc + v[i];
      out[i] = op == 0 ? acc / size_ : acc;
    }
    const Tensor result = Tensor::from_doubles(out, first.shape(), first.dtype(), Device::cpu(), first.format());
    for (const Tensor* x : arrived_) const_cast<Tensor*>(x)->copy_from(result);
    count_ = 0;
    leaving_ = size_;
    ++generation_;
    cv_.notify_all();
  } else {
    cv_.wait(lock, [&] { return generation_ != gen || aborted_; });
    if (generation_ == gen) fail("replica ", rank, ": another replica failed, so this collective was abandoned");
  }
  if (--leaving_ == 0) cv_.notify_all();
}

void HostReplicaGroup::all_reduce_mean(const std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors) hub_->reduce(rank_, t, 0);
}

void HostReplicaGroup::all_reduce_max(const Tensor& t) { hub_->reduce(rank_, t, 1); }

}  // namespace ge
