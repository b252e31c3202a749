#include "runtime/profiling.h"

#include <cuda_profiler_api.h>
#include <nvtx3/nvToolsExt.h>

#include "runtime/cuda_check.h"

namespace ge {

// NVTX is header-only: without a profiler attached these calls return at once.
ProfileRange::ProfileRange(const char* name) {
  nvtxRangePushA(name);
  push_profile_phase(name);
}
ProfileRange::~ProfileRange() {
  pop_profile_phase();
  nvtxRangePop();
}

void profiler_start() { CUDA_CHECK(cudaProfilerStart()); }
void profiler_stop() { CUDA_CHECK(cudaProfilerStop()); }

}  // namespace ge
