// Profiler hooks in a build without CUDA: no profiler to talk to, only the phase names.
#ifndef GE_WITH_CUDA
#include "ganengine/profiling.h"

namespace ge {

ProfileRange::ProfileRange(const char* name) { push_profile_phase(name); }
ProfileRange::~ProfileRange() { pop_profile_phase(); }
void profiler_start() {}
void profiler_stop() {}

}  // namespace ge
#endif
