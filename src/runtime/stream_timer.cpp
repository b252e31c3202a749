// Device-side timing of consecutive windows of work with CUDA events on the context stream.
#include <memory>
#include <vector>

#include "runtime/cuda_context.h"
#include "runtime/gpu_measure.h"

namespace ge {

namespace {
// Owns the events so that an exception thrown by the timed work does not leak them.
struct Events {
  std::vector<cudaEvent_t> ev;
  explicit Events(size_t n) {
    for (size_t i = 0; i < n; ++i) {
      cudaEvent_t e = nullptr;
      CUDA_CHECK(cudaEventCreate(&e));  // default flags: timing enabled
      ev.push_back(e);
    }
  }
  ~Events() {
    for (cudaEvent_t e : ev) (void)cudaEventDestroy(e);  // no throwing from a destructor
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
};
}  // namespace

std::vector<double> time_on_stream_ms(Device d, int windows, const std::function<void(int)>& body) {
  GE_CHECK(d.is_cuda(), "time_on_stream_ms on ", d.str());
  GE_CHECK(windows >= 1, "time_on_stream_ms: ", windows, " windows");
  gpu::CudaContext& ctx = gpu::context(d.index);
  Events events(static_cast<size_t>(windows) + 1);
  // Back to back: window w lies between event w and event w+1, so no gap between windows is
  // lost or counted twice, and the host never waits until the last event.
  CUDA_CHECK(cudaEventRecord(events.ev[0], ctx.main_stream()));
  for (int w = 0; w < windows; ++w) {
    body(w);
    CUDA_CHECK(cudaEventRecord(events.ev[w + 1], ctx.main_stream()));
  }
  // Also where an error raised asynchronously by the timed work surfaces (errors of the
  // device are sticky and reported by every later synchronising call).
  CUDA_CHECK(cudaEventSynchronize(events.ev[windows]));
  std::vector<double> ms;
  for (int w = 0; w < windows; ++w) {
    float elapsed = 0.f;
    CUDA_CHECK(cudaEventElapsedTime(&elapsed, events.ev[w], events.ev[w + 1]));
    ms.push_back(elapsed);
  }
  return ms;
}

}  // namespace ge
