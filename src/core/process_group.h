// Training spread over processes, one GPU each (`mpirun -np K ganengine train ...`): which rank
// this process is, and how rank 0's NCCL unique id reaches the others.
//  - Open MPI: mpirun sets OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK}; the id goes out with
//    MPI_Bcast. libmpi is loaded only then (dlopen of libmpi.so.40), never linked.
//  - Any other launcher: GANENGINE_RANK, GANENGINE_WORLD_SIZE and GANENGINE_LOCAL_RANK, plus
//    GANENGINE_RENDEZVOUS_FILE, a path on storage every process sees, where rank 0 writes the id
//    (atomically) and the others wait for it. Give each run a fresh path.
#pragma once
#include <functional>
#include <string>

#include "runtime/nccl_group.h"

namespace ge {

struct ProcessGroupInfo {
  int rank = 0, size = 1, local_rank = 0;
  std::string launcher;  // "" (single process), "mpi" or "env"
};

// Reads the environment; throws ge::Error naming the variable when a value is malformed.
ProcessGroupInfo detect_process_group();
// Every process calls this; rank 0's make() result is returned everywhere.
NcclUniqueId share_unique_id(const ProcessGroupInfo& pg, const std::function<NcclUniqueId()>& make);

}  // namespace ge
