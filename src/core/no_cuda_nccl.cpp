// NCCL in a build without CUDA: there are no GPUs to reduce across.
#ifndef GE_WITH_CUDA
#include "ganengine/error.h"
#include "ganengine/nccl_group.h"

namespace ge {

std::string nccl_version() { fail("multi-GPU training (NCCL) needs a build with CUDA"); }
NcclUniqueId nccl_unique_id() { fail("multi-GPU training (NCCL) needs a build with CUDA"); }
std::vector<std::unique_ptr<ReplicaGroup>> make_nccl_groups(const std::vector<Device>&) {
  fail("multi-GPU training (NCCL) needs a build with CUDA");
}
std::unique_ptr<ReplicaGroup> make_nccl_group(const NcclUniqueId&, int, int, Device) {
  fail("multi-GPU training (NCCL) needs a build with CUDA");
}

}  // namespace ge
#endif
