// Data parallelism: what one replica of the networks needs from the others. Each replica trains
// on its share of the global batch; the group averages the gradients, combines the loss
// scalers' overflow flags (so every replica skips the same steps and keeps the same scales), and
// averages the logged losses. Every call is collective: every replica makes the same calls in
// the same order, with tensors of the same shapes and dtypes, on its own device.
//
// Implementations: NCCL across GPUs (nccl_group.h, in one process or one process per GPU), and
// host threads on the CPU (HostReplicaGroup below: the reference the NCCL one is tested against).
#pragma once
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "ganengine/tensor.h"

namespace ge {

class ReplicaGroup {
 public:
  virtual ~ReplicaGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In place: each tensor becomes the mean over the replicas of that tensor (f32, f16 or bf16).
  virtual void all_reduce_mean(const std::vector<Tensor>& tensors) = 0;
  // In place: elementwise sum over the replicas (per-channel BatchNorm sums with --sync-bn).
  virtual void all_reduce_sum(const Tensor& t) = 0;
  // In place: elementwise maximum over the replicas (overflow flags; any float dtype).
  virtual void all_reduce_max(const Tensor& t) = 0;
  // One replica failed: make every pending and later collective of the group fail instead of
  // waiting forever for it. Not collective; safe to call from any thread, more than once.
  virtual void abort() = 0;
};

// Replicas on the CPU, one host thread each, sharing one HostReplicaHub. Sums are taken in rank
// order in double and rounded once, so every replica gets bitwise the same result.
class HostReplicaHub {
 public:
  explicit HostReplicaHub(int size);
  int size() const { return size_; }
  // Called by every rank with its buffer; returns when all have arrived and the result is in
  // place. op: 0 mean, 1 max, 2 sum.
  void reduce(int rank, const Tensor& t, int op);
  void abort();  // waiting and later reductions throw

 private:
  bool aborted_ = false;
  int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<const Tensor*> arrived_;
  int count_ = 0, leaving_ = 0;
  uint64_t generation_ = 0;
};

class HostReplicaGroup : public ReplicaGroup {
 public:
  HostReplicaGroup(std::shared_ptr<HostReplicaHub> hub, int rank) : hub_(std::move(hub)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return hub_->size(); }
  void all_reduce_mean(const std::vector<Tensor>& tensors) override;
  void all_reduce_max(const Tensor& t) override;
  void all_reduce_sum(const Tensor& t) override { hub_->reduce(rank_, t, 2); }
  void abort() override { hub_->abort(); }

 private:
  std::shared_ptr<HostReplicaHub> hub_;
  int rank_;
};

}  // namespace ge
