// The replicas of a data-parallel run that live in this process: one trainer per device, the
// groups joining them (to each other, or under mpirun to the other processes' replicas), and
// one host thread each when there are several (replica_pool.h). `train`, `bench` and the tests
// drive their steps through it, so a failing replica always aborts the others' collectives.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "core/replica_pool.h"
#include "ganengine/replica_group.h"
#include "ganengine/trainer.h"

namespace ge {

class ReplicaSet {
 public:
  // groups: none (one replica, no data parallelism) or one per device, replica k's group at k.
  ReplicaSet(std::vector<Device> devices, std::vector<std::unique_ptr<ReplicaGroup>> groups);
  // Replicas on these GPUs of this process, joined by NCCL when there are several.
  static std::unique_ptr<ReplicaSet> on_gpus(const std::vector<Device>& devices);

  // Builds replica k's trainer from `base` on devices()[k] with its group. Separate from the
  // constructor so that NCCL (and a missing GPU) fails before the data is read.
  void make_trainers(const TrainerConfig& base);

  int size() const { return static_cast<int>(devices_.size()); }
  bool data_parallel() const { return !groups_.empty(); }
  const std::vector<Device>& devices() const { return devices_; }
  DcganTrainer& trainer(int k) { return *trainers_.at(static_cast<size_t>(k)); }
  const std::vector<std::unique_ptr<DcganTrainer>>& trainers() const { return trainers_; }
  ReplicaGroup& group(int k) { return *groups_.at(static_cast<size_t>(k)); }

  // work(k) for every replica, each on its own thread when there are several. When one throws,
  // every group is aborted at once (the others would wait in a collective for it forever), and
  // the first error is rethrown after all have returned.
  void run(const std::function<void(int)>& work);

 private:
  std::vector<Device> devices_;
  std::vector<std::unique_ptr<ReplicaGroup>> groups_;
  std::unique_ptr<ReplicaPool> pool_;  // only with several replicas
  std::vector<std::unique_ptr<DcganTrainer>> trainers_;
};

}  // namespace ge
