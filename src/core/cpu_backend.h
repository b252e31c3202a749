// Which implementation runs the ops on CPU tensors: the fast backend (kernels/onednn: oneDNN
// primitives and threaded loops) or the reference loops (kernels/cpu), which every test compares
// against. A process-wide choice: the CLI's --device cpu picks Fast, --device cpu-reference
// Reference; the unit tests run on the reference and switch with ScopedCpuBackend.
// In a build without oneDNN, Fast is accepted and runs the reference.
#pragma once
#include <string>

#include "ganengine/dtype.h"

namespace ge {

enum class CpuBackend { Fast, Reference };

void set_cpu_backend(CpuBackend choice);
CpuBackend cpu_backend();  // the choice as set (Fast by default)
bool cpu_fast_built();     // whether this build has the fast backend (GE_WITH_ONEDNN)
// Whether CPU ops run on the fast backend now: chosen and built.
inline bool cpu_fast_active() { return cpu_backend() == CpuBackend::Fast && cpu_fast_built(); }

// Sets the choice for a scope and restores the previous one on exit (tests).
class ScopedCpuBackend {
 public:
  explicit ScopedCpuBackend(CpuBackend choice) : previous_(cpu_backend()) { set_cpu_backend(choice); }
  ~ScopedCpuBackend() { set_cpu_backend(previous_); }
  ScopedCpuBackend(const ScopedCpuBackend&) = delete;
  ScopedCpuBackend& operator=(const ScopedCpuBackend&) = delete;

 private:
  CpuBackend previous_;
};

// The compute threads of the fast backend. 0 (the default) means OMP_NUM_THREADS when set, else
// every core; set_cpu_threads applies the count to oneDNN's OpenMP pool and the backend's loops.
void set_cpu_threads(int threads);
int cpu_threads();  // the count in effect (1 in a build without the fast backend)

// One line each, for `ganengine info` and train's start-up: the backend in use with its library
// version, and the CPU features it sees ("avx512_core_bf16"), or why the reference runs.
std::string describe_cpu_backend();
std::string describe_cpu_features();

// Whether the CPU computes bf16 natively (AVX512-BF16 or AMX), so half-precision CPU ops can
// run in bf16 rather than widen to fp32.
bool cpu_has_native_bf16();
// Whether the fast backend's convolutions on bf16 tensors compute in bf16 (with f32
// accumulation) where the CPU has native bf16; off (the default), or without native bf16, they
// widen to f32 and round the result once. The CLI turns it on; the tests choose per case.
void set_cpu_bf16_compute(bool native);
// One line for train's start-up: what the CPU computes a policy's convolutions in, and why
// ("fp16 storage, fp32 compute: ..."), for the compute dtype of the opt level.
std::string describe_cpu_precision(DType compute);

}  // namespace ge
