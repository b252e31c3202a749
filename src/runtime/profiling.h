// Hooks for Nsight Systems / Nsight Compute: named NVTX ranges around the phases of a training
// step, and the profiler's capture window (`--profile-steps A:B` starts it before step A and
// stops it after step B, so `nsys --capture-range=cudaProfilerApi` or
// `ncu --profile-from-start off` record exactly those steps). Without CUDA they do nothing.
#pragma once
#include <string>

namespace ge {

// Pushes an NVTX range for its lifetime. Ranges opened while a step is being captured into a
// CUDA graph appear once, around the capture; replays show as one graph launch.
class ProfileRange {
 public:
  explicit ProfileRange(const char* name);
  explicit ProfileRange(const std::string& name) : ProfileRange(name.c_str()) {}
  ~ProfileRange();
  ProfileRange(const ProfileRange&) = delete;
  ProfileRange& operator=(const ProfileRange&) = delete;
};

// The ranges open on the calling thread, outermost first, joined by '/' ("train_step/D_real/
// D.2 forward"); empty outside any. The allocator labels blocks with it (allocator.h).
std::string current_profile_phase();
// What both builds' ProfileRange do besides NVTX (profile_phase.cpp).
void push_profile_phase(const char* name);
void pop_profile_phase();

void profiler_start();  // cudaProfilerStart
void profiler_stop();   // cudaProfilerStop

}  // namespace ge
