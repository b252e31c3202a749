#include "core/cpu_backend.h"

#include <atomic>
#include <cstdlib>
#include <thread>

#include "ganengine/error.h"

#ifdef GE_WITH_ONEDNN
#include <omp.h>

#include "onednn/onednn_context.h"
#endif

namespace ge {
namespace {
std::atomic<CpuBackend> g_backend{CpuBackend::Fast};
#ifdef GE_WITH_ONEDNN
std::atomic<int> g_threads{0};

// OMP_NUM_THREADS when it names a positive count, else every core.
int default_threads() {
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}
#endif
// The reference rounds every op's result once from fp64.
std::string reference_precision(DType compute) {
  if (compute == DType::F32) return "fp32, computed in fp64 by the reference loops";
  return std::string(dtype_name(compute)) + " storage, computed in fp64 by the reference loops (emulation)";
}
}  // namespace

void set_cpu_backend(CpuBackend choice) { g_backend = choice; }
CpuBackend cpu_backend() { return g_backend; }

#ifdef GE_WITH_ONEDNN
bool cpu_fast_built() { return true; }

void set_cpu_threads(int threads) {
  if (threads < 0) fail("--threads ", threads, ": expected a count of threads (0: every core)");
  const int n = threads == 0 ? default_threads() : threads;
  omp_set_num_threads(n);
  g_threads = n;
}

int cpu_threads() { return g_threads != 0 ? g_threads.load() : default_threads(); }

bool cpu_has_native_bf16() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

std::string describe_cpu_backend() {
  if (!cpu_fast_active()) return "reference loops (kernels/cpu)";
  return "oneDNN " + onednn::version() + ", " + std::to_string(cpu_threads()) + " threads";
}

std::string describe_cpu_features() {
  return onednn::isa_name() + (cpu_has_native_bf16() ? " (native bf16)" : " (no native bf16)");
}
void set_cpu_bf16_compute(bool native) { onednn::set_native_bf16(native && cpu_has_native_bf16()); }

std::string describe_cpu_precision(DType compute) {
  if (!cpu_fast_active()) return reference_precision(compute);
  switch (compute) {
    case DType::F32: return "fp32 (oneDNN)";
    case DType::F16:
      return "fp16 storage, fp32 compute (oneDNN): CPUs have no fp16 arithmetic short of AVX512-FP16, so each op "
             "widens exactly and rounds its result to fp16 once";
    case DType::BF16:
      if (onednn::native_bf16())
        return "bf16 convolutions on " + onednn::isa_name() +
               " (fp32 accumulation), the other ops in fp32 with bf16 storage (oneDNN)";
      return cpu_has_native_bf16() ? "bf16 storage, fp32 compute (oneDNN; native bf16 convolutions off)"
                                   : "bf16 storage, fp32 compute (oneDNN): this CPU has no native bf16 "
                                     "(AVX512-BF16 or AMX)";
    default: return dtype_name(compute);
  }
}
#else
void set_cpu_bf16_compute(bool) {}
std::string describe_cpu_precision(DType compute) { return reference_precision(compute); }
bool cpu_fast_built() { return false; }
void set_cpu_threads(int threads) {
  if (threads < 0) fail("--threads ", threads, ": expected a count of threads (0: every core)");
}
int cpu_threads() { return 1; }
bool cpu_has_native_bf16() { return false; }
std::string describe_cpu_backend() { return "reference loops (kernels/cpu): this build has no oneDNN"; }
std::string describe_cpu_features() { return "not probed (this build has no oneDNN)"; }
#endif

}  // namespace ge
