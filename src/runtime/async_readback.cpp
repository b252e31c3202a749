#include "runtime/async_readback.h"

#include <cstring>

#include "runtime/cuda_context.h"
#include "runtime/pinned_memory.h"

namespace ge {

AsyncReadback::AsyncReadback(size_t max_bytes) : host_(pinned_alloc(max_bytes)), capacity_(max_bytes) {}

AsyncReadback::~AsyncReadback() {
  if (event_) {
    (void)cudaEventSynchronize(static_cast<cudaEvent_t>(event_));  // the copy may still write host_
    (void)cudaEventDestroy(static_cast<cudaEvent_t>(event_));
  }
  pinned_free(host_, capacity_);
}

void AsyncReadback::start(const Tensor& t) {
  GE_CHECK(!pending_, "AsyncReadback: the previous copy has not been taken");
  GE_CHECK(t.nbytes() <= capacity_, "AsyncReadback: ", t.str(), " is larger than ", capacity_, " bytes");
  pending_ = true;
  on_gpu_ = t.device().is_cuda();
  if (!on_gpu_) {
    std::memcpy(host_, t.data(), t.nbytes());
    return;
  }
  gpu::CudaContext& ctx = gpu::context(t.device().index);  // also makes it the current device
  if (event_ && event_device_ != t.device().index) {
    CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)));
    CUDA_CHECK(cudaEventDestroy(static_cast<cudaEvent_t>(event_)));
    event_ = nullptr;
  }
  if (!event_) {
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    event_ = e;
    event_device_ = t.device().index;
  }
  CUDA_CHECK(cudaMemcpyAsync(host_, t.data(), t.nbytes(), cudaMemcpyDeviceToHost, ctx.main_stream()));
  CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event_), ctx.main_stream()));
}

bool AsyncReadback::ready() const {
  if (!pending_) return false;
  if (!on_gpu_) return true;
  const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(event_));
  if (status == cudaErrorNotReady) {
    (void)cudaGetLastError();  // not an error: the copy is still queued
    return false;
  }
  CUDA_CHECK(status);  // an error of the queued work surfaces here
  return true;
}

const void* AsyncReadback::take() {
  GE_CHECK(pending_, "AsyncReadback: nothing was started");
  pending_ = false;
  if (on_gpu_) CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)));
  return host_;
}

}  // namespace ge
