#include "train/replica_set.h"

#include "ganengine/error.h"
#include "runtime/nccl_group.h"

namespace ge {

ReplicaSet::ReplicaSet(std::vector<Device> devices, std::vector<std::unique_ptr<ReplicaGroup>> groups)
    : devices_(std::move(devices)), groups_(std::move(groups)) {
  GE_CHECK(!devices_.empty(), "ReplicaSet: no devices");
  GE_CHECK(groups_.empty() || groups_.size() == devices_.size(), "ReplicaSet: ", groups_.size(), " groups for ",
           devices_.size(), " replicas");
  GE_CHECK(devices_.size() == 1 || !groups_.empty(), "ReplicaSet: ", devices_.size(), " replicas need their groups");
  if (devices_.size() > 1) pool_ = std::make_unique<ReplicaPool>(size());
}

std::unique_ptr<ReplicaSet> ReplicaSet::on_gpus(const std::vector<Device>& devices) {
  return std::make_unique<ReplicaSet>(
      devices, devices.size() > 1 ? make_nccl_groups(devices) : std::vector<std::unique_ptr<ReplicaGroup>>{});
}

void ReplicaSet::make_trainers(const TrainerConfig& base) {
  GE_CHECK(trainers_.empty(), "ReplicaSet: trainers already made");
  for (size_t k = 0; k < devices_.size(); ++k) {
    TrainerConfig ck = base;
    ck.device = devices_[k];
    ck.replicas = groups_.empty() ? nullptr : groups_[k].get();
    trainers_.push_back(std::make_unique<DcganTrainer>(ck));
  }
}

void ReplicaSet::run(const std::function<void(int)>& work) {
  if (!pool_) {
    work(0);
    return;
  }
  pool_->run(work, [this] {
    for (auto& g : groups_) g->abort();
  });
}

}  // namespace ge
