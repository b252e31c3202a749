// ReplicaGroup over NCCL: one replica per GPU, in one process (make_nccl_groups: one thread per
// replica drives its GPU) or in one process per GPU (make_nccl_group with a unique id that rank 0
// made and the launcher shared: MPI, or a file). NCCL is loaded when a group is first made
// (dlopen of libnccl.so.2), so single-GPU use never needs it. Collectives run on each device's
// stream, so they order with the step's kernels and can be captured into a CUDA graph.
#pragma once
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "ganengine/replica_group.h"

namespace ge {

using NcclUniqueId = std::array<char, 128>;  // ncclUniqueId's bytes

// "2.28.9"; throws ge::Error saying how to get NCCL when it cannot be loaded.
std::string nccl_version();
NcclUniqueId nccl_unique_id();
// One communicator per device, all in this process (ncclCommInitAll).
std::vector<std::unique_ptr<ReplicaGroup>> make_nccl_groups(const std::vector<Device>& devices);
// This process's rank of a group spread over processes (ncclCommInitRank).
std::unique_ptr<ReplicaGroup> make_nccl_group(const NcclUniqueId& id, int rank, int size, Device device);

}  // namespace ge
