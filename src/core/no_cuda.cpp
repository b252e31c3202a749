// What a build without CUDA answers wherever the CUDA backend (kernels/cuda, src/runtime) would be:
// the CPU backend runs everything, and whatever needs a GPU fails with a message that says so.
#ifndef GE_WITH_CUDA
#include <cstdlib>
#include <cstring>

#include "core/backend.h"
#include "cuda/conv/conv_fp8_wgrad.h"
#include "cuda/conv/conv_phase_dgrad.h"
#include "cuda/conv/conv_phase_fprop.h"
#include "cuda/conv/fp8_conv_wgmma.h"
#include "cuda/conv/weight_fragments.h"
#include "ganengine/concurrent_region.h"
#include "ganengine/cuda_graph.h"
#include "ganengine/error.h"
#include "runtime/async_readback.h"
#include "runtime/gpu_measure.h"
#include "runtime/nccl_group.h"
#include "runtime/pinned_memory.h"
#include "runtime/profiling.h"

// Pinned host memory is plain aligned memory; there is no device.
namespace ge {
void* pinned_alloc(size_t bytes) {
  void* p = std::aligned_alloc(4096, ((bytes + 4095) / 4096 + (bytes == 0)) * 4096);
  if (!p) fail("out of host memory allocating ", bytes, " bytes");
  return p;
}
void pinned_free(void* p, size_t) { std::free(p); }
bool built_with_cuda() { return false; }
bool cuda_available() { return false; }
int cuda_device_count() { return 0; }
void synchronize(Device) {}
namespace gpu {
std::vector<std::string> describe_conv_paths() { return {"none: this build has no CUDA backend"}; }
bool fp8_conv2d_forward_wgmma(const Fp8Tensor&, const Fp8Tensor&, Tensor&, const Conv2dParams&) { return false; }
bool fp8_conv2d_backward_data_wgmma(const Fp8Tensor&, const Fp8Tensor&, Tensor&, const Conv2dParams&) { return false; }
bool fp8_conv2d_backward_filter_wgmma(const Fp8Tensor&, const Fp8Tensor&, Tensor&, const Conv2dParams&, float) {
  return false;
}
bool fp8_conv2d_backward_data_phases_takes(const Shape&, const Shape&, const Shape&, const Conv2dParams&, Device) {
  return false;
}
bool fp8_conv2d_backward_data_phases(const Fp8Tensor&, const Fp8Tensor&, Tensor&, const Conv2dParams&, Tensor*) {
  return false;
}
bool fp8_conv2d_backward_filter_takes(const Shape&, const Shape&, const Shape&, const Conv2dParams&, Device) {
  return false;
}
bool fp8_conv2d_forward_phases_takes(const Shape&, const Shape&, const Shape&, const Conv2dParams&, Device) {
  return false;
}
bool fp8_conv2d_backward_data_resident_takes(const Shape&, const Shape&, const Shape&, const Conv2dParams&, Device) {
  return false;
}
bool fp8_conv2d_forward_resident_takes(const Shape&, const Shape&, const Shape&, const Conv2dParams&, Device) {
  return false;
}
FragmentLayout fragment_layout(const Shape&, ops::Fp8WeightPass, Device) { return FragmentLayout::None; }
void lay_out_weight_fragments(const std::vector<ops::Fp8WeightFragmentsOf>&) {
  fail("laying out FP8 weight fragments needs a build with CUDA");
}
}  // namespace gpu

// ConcurrentRegion: one lane, so on_side and on_branch run their work in place.

ConcurrentRegion::ConcurrentRegion(Device device, bool) : device_(device) {}
ConcurrentRegion::~ConcurrentRegion() {}
// NOLINTNEXTLINE(performance-unnecessary-value-param): the CUDA build keeps the tensors it is given
void ConcurrentRegion::on_side(std::vector<Tensor>, const std::function<void()>& fn) { fn(); }
void ConcurrentRegion::join() {}
void ConcurrentRegion::fork_branch() {}
void ConcurrentRegion::on_branch(const std::function<void()>& fn) { fn(); }
void ConcurrentRegion::join_branch() {}
ConcurrentRegion::Mark ConcurrentRegion::mark() { return {}; }
void ConcurrentRegion::wait(const Mark&) {}
ConcurrentRegion* ConcurrentRegion::active(Device) { return nullptr; }
void ConcurrentRegion::rank_branch_side_below_branch(Device, bool) {}

// CUDA graphs and graph memory pools: nothing to capture.

GraphPoolId cuda_allocator_begin_graph_pool(int) { fail("CUDA graph memory pools need a build with CUDA"); }
void cuda_allocator_end_graph_pool(int) {}
void cuda_allocator_release_graph_pool(int, GraphPoolId) {}
size_t cuda_allocator_graph_pool_bytes(int, GraphPoolId) { return 0; }

CudaGraph::~CudaGraph() {}  // user-provided, as the CUDA build's (which frees the graph) is
void CudaGraph::capture(Device device, const std::function<void()>&) {
  fail("CUDA graph capture on ", device.str(), " needs a build with CUDA");
}
void CudaGraph::replay() { fail("CudaGraph::replay in a build without CUDA"); }
void CudaGraph::reset() {}

// The GPU measurements of gpu_measure.h: `ganengine bench` refuses to start without a GPU, so
// these only keep the program linkable.

namespace {
[[noreturn]] void no_cuda(const char* what) {
  fail(what, " needs a CUDA GPU, but this ganengine was built without CUDA");
}
}  // namespace

std::vector<double> time_on_stream_ms(Device, int, const std::function<void(int)>&) { no_cuda("GPU timing"); }
double measure_half_gemm_tflops(Device, DType) { no_cuda("the GEMM peak"); }
double measure_fp8_gemm_tflops(Device) { no_cuda("the FP8 GEMM peak"); }
double square_gemm_tflops(Device, int64_t, const std::function<void(int)>&) { no_cuda("GEMM timing"); }
DeviceMemory device_memory(Device) { no_cuda("device memory info"); }
DeviceFacts device_facts(Device) { no_cuda("device facts"); }

// NCCL: there are no GPUs to reduce across.

std::string nccl_version() { fail("multi-GPU training (NCCL) needs a build with CUDA"); }
NcclUniqueId nccl_unique_id() { fail("multi-GPU training (NCCL) needs a build with CUDA"); }
std::vector<std::unique_ptr<ReplicaGroup>> make_nccl_groups(const std::vector<Device>&) {
  fail("multi-GPU training (NCCL) needs a build with CUDA");
}
std::unique_ptr<ReplicaGroup> make_nccl_group(const NcclUniqueId&, int, int, Device) {
  fail("multi-GPU training (NCCL) needs a build with CUDA");
}

// Profiler hooks: no profiler to talk to, only the phase names.

ProfileRange::ProfileRange(const char* name) { push_profile_phase(name); }
ProfileRange::~ProfileRange() { pop_profile_phase(); }
void profiler_start() {}
void profiler_stop() {}

// AsyncReadback in a CPU-only build: every tensor is on the host, so the copy is done at once.

AsyncReadback::AsyncReadback(size_t max_bytes) : host_(std::malloc(max_bytes)), capacity_(max_bytes) {
  GE_CHECK(host_ != nullptr, "AsyncReadback: cannot allocate ", max_bytes, " bytes");
}

AsyncReadback::~AsyncReadback() { std::free(host_); }

void AsyncReadback::start(const Tensor& t) {
  GE_CHECK(!pending_, "AsyncReadback: the previous copy has not been taken");
  GE_CHECK(t.nbytes() <= capacity_, "AsyncReadback: ", t.str(), " is larger than ", capacity_, " bytes");
  std::memcpy(host_, t.data(), t.nbytes());
  pending_ = true;
}

bool AsyncReadback::ready() const { return pending_; }

const void* AsyncReadback::take() {
  GE_CHECK(pending_, "AsyncReadback: nothing was started");
  pending_ = false;
  return host_;
}

}  // namespace ge

#endif  // GE_WITH_CUDA
