// Hooks for Nsight Systems / Nsight Compute: named NVTX ranges around the phases of a training
// step, and the profiler's capture window (`--profile-steps A:B` starts it before step A and
// stops it after step B, so `nsys --capture-range=cudaProfilerApi` or
// `ncu --profile-from-start off` record exactly those steps). Without CUDA they do nothing.
#pragma once

namespace ge {

// Pushes an NVTX range for its lifetime. Ranges opened while a step is being captured into a
// CUDA graph appear once, around the capture; replays show as one graph launch.
class ProfileRange {
 public:
  explicit ProfileRange(const char* name);
  ~ProfileRange();
  ProfileRange(const ProfileRange&) = delete;
  ProfileRange& operator=(const ProfileRange&) = delete;
};

void profiler_start();  // cudaProfilerStart
void profiler_stop();   // cudaProfilerStop

}  // namespace ge
