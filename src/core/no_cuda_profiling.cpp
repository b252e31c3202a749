// Profiler hooks in a build without CUDA: there is no profiler to talk to.
#ifndef GE_WITH_CUDA
#include "ganengine/profiling.h"

namespace ge {

ProfileRange::ProfileRange(const char*) {}
ProfileRange::~ProfileRange() {}
void profiler_start() {}
void profiler_stop() {}

}  // namespace ge
#endif
