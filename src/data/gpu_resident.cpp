// GpuResidentSource: read the whole dataset once on worker threads, keep it on the device as
// u8, and build every batch there with one kernel (kernels/cuda/gather_normalize.cu).
#include "data/gpu_resident.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <mutex>
#include <thread>
#include <vector>

#include "ganengine/data.h"
#include "ganengine/error.h"

#ifdef GE_WITH_CUDA
#include "cuda/gather_normalize.h"
#include "runtime/cuda_context.h"
#endif

namespace ge {

#ifdef GE_WITH_CUDA
// Where an epoch's order is uploaded from. Pinned, so the copy is truly asynchronous (from
// pageable memory the driver would stage it and the host would wait); the event marks when the
// copy has read the buffer, so the next epoch's order never overwrites it too early.
struct GpuResidentSource::OrderStaging {
  int64_t* host = nullptr;
  cudaEvent_t copied = nullptr;
  OrderStaging() = default;
  OrderStaging(const OrderStaging&) = delete;
  OrderStaging& operator=(const OrderStaging&) = delete;
  ~OrderStaging() {  // no throwing here: a failure at teardown has nobody left to tell
    if (copied) {
      (void)cudaEventSynchronize(copied);
      (void)cudaEventDestroy(copied);
    }
    if (host) (void)cudaFreeHost(host);
  }
};

namespace {

using Clock = std::chrono::steady_clock;

std::string minutes_seconds(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  char text[32];
  std::snprintf(text, sizeof text, "%ldm%02lds", s / 60, s % 60);
  return text;
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Reads every image of ds into dst (image i at i * S*S*C) with `threads` threads, which take
// images one at a time from a shared counter. The calling thread waits and, after 2 s, prints
// a progress line with an ETA every second. Returns whether it printed anything. The first
// read error stops the other threads and is rethrown.
bool read_all(const Dataset& ds, uint8_t* dst, int threads, std::ostream* progress, const std::string& what) {
  const int64_t n = ds.size();
  if (n == 0) return false;
  const int64_t image_bytes = int64_t(ds.image_size()) * ds.image_size() * ds.channels();
  threads = static_cast<int>(std::clamp<int64_t>(threads, 1, n));

  std::atomic<int64_t> next{0}, done{0};
  std::atomic<bool> stop{false};
  std::mutex mu;  // guards error and finished; cv wakes the reporter when a thread ends
  std::condition_variable cv;
  std::exception_ptr error;
  int finished = 0;
  auto work = [&] {
    try {
      for (int64_t i = next.fetch_add(1); i < n && !stop.load(); i = next.fetch_add(1)) {
        ds.read(i, dst + i * image_bytes);
        done.fetch_add(1);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!error) error = std::current_exception();
      stop = true;
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      ++finished;
    }
    cv.notify_all();
  };

  const Clock::time_point start = Clock::now();
  std::vector<std::thread> pool;
  try {
    for (int t = 0; t < threads; ++t) pool.emplace_back(work);
  } catch (...) {  // no thread to be had: stop and join what started, then report
    stop = true;
    for (auto& t : pool) t.join();
    throw;
  }

  bool reported = false;
  {
    std::unique_lock<std::mutex> lock(mu);
    Clock::time_point report_at = start + std::chrono::seconds(2);
    const int started = static_cast<int>(pool.size());
    while (!cv.wait_until(lock, report_at, [&] { return finished == started; })) {
      report_at += std::chrono::seconds(1);
      if (!progress) continue;
      const int64_t d = done.load();
      const double elapsed = seconds_since(start);
      const std::string eta = d > 0 ? minutes_seconds(elapsed * double(n - d) / double(d)) : std::string("unknown");
      *progress << "preparing " << what << ": " << d << "/" << n << " images, ETA " << eta << std::endl;
      reported = true;
    }
  }
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  return reported;
}

}  // namespace
#else
struct GpuResidentSource::OrderStaging {};
#endif

std::ostream& GpuResidentSource::default_progress() { return std::cerr; }

int64_t GpuResidentSource::bytes_needed(const Dataset& ds) {
  return ds.size() * ds.image_size() * ds.image_size() * ds.channels();
}

GpuResidentSource::GpuResidentSource(const Dataset& ds, int64_t batch_size, uint64_t seed, int workers, Device device,
                                     DType out_dtype, MemoryFormat out_format, std::ostream* progress)
    : name_(ds.name()),
      size_(ds.size()),
      channels_(ds.channels()),
      image_size_(ds.image_size()),
      batch_size_(batch_size),
      seed_(seed),
      device_(device),
      out_dtype_(out_dtype),
      out_format_(out_format) {
#ifndef GE_WITH_CUDA
  (void)workers;
  (void)progress;
  fail("GPU-resident data needs a CUDA build: this ganengine was built without CUDA (use the host loader)");
#else
  if (!device.is_cuda()) fail("GPU-resident data needs a CUDA device, got ", device.str());
  if (batch_size < 1) fail("--batchSize: expected at least 1, got ", batch_size);
  if (workers < 0) fail("--workers: expected 0 or more, got ", workers);
  if (out_dtype != DType::F32 && out_dtype != DType::F16 && out_dtype != DType::BF16)
    fail("GPU-resident batches are f32, f16 or bf16, not ", dtype_name(out_dtype));
  gpu::context(device.index);  // a clear error now for a device that is not there

  const Clock::time_point start = Clock::now();
  const std::string what = name_ + " on " + device.str();
  const Shape shape{size_, channels_, image_size_, image_size_};  // stored NHWC: image i's HWC bytes
  bool reported = false;
  {
    Tensor host = Tensor::empty(shape, DType::U8, Device::cpu(), MemoryFormat::NHWC);
    reported = read_all(ds, host.data_as<uint8_t>(), workers, progress, what);
    try {
      images_ = Tensor::empty(shape, DType::U8, device, MemoryFormat::NHWC);
      order_ = Tensor::empty({size_}, DType::I64, device);
    } catch (const Error& e) {
      fail("keeping ", what, " needs ", bytes_needed(ds) / 1000000, " MB of GPU memory: ", e.what(),
           " (build batches on the host instead: --data-on host)");
    }
    images_.copy_from(host);  // returns once the copy is done: `host` is freed next
  }

  staging_ = std::make_unique<OrderStaging>();
  void* pinned = nullptr;
  CUDA_CHECK(
      cudaHostAlloc(&pinned, static_cast<size_t>(std::max<int64_t>(size_, 1)) * sizeof(int64_t), cudaHostAllocDefault));
  staging_->host = static_cast<int64_t*>(pinned);
  CUDA_CHECK(cudaEventCreateWithFlags(&staging_->copied, cudaEventDisableTiming));
  if (reported && progress)
    *progress << "preparing " << what << ": " << size_ << "/" << size_ << " images, done in "
              << minutes_seconds(seconds_since(start)) << std::endl;
#endif
}

GpuResidentSource::~GpuResidentSource() = default;

int64_t GpuResidentSource::batches_per_epoch() const { return batches_of(size_, batch_size_); }

Tensor GpuResidentSource::batch(int64_t epoch, int64_t index) {
  const int64_t batches = batches_per_epoch();
  if (index < 0 || index >= batches)
    fail("batch ", index, " out of range: an epoch of ", name_, " has ", batches, " batches of ", batch_size_);
  GE_CHECK(epoch >= 0 && epoch <= int64_t(UINT32_MAX), "epoch ", epoch, " out of range");
#ifndef GE_WITH_CUDA
  fail("GPU-resident data needs a CUDA build");  // unreachable: the constructor already refused
#else
  gpu::CudaContext& ctx = gpu::context(device_.index);  // also makes device_ current
  if (epoch != order_epoch_) {
    // Once per epoch. The wait is for the previous epoch's upload, normally finished long ago:
    // it only keeps this host write from racing a copy that still reads the staging buffer.
    const std::vector<int64_t> order = epoch_order(size_, seed_, epoch);
    const size_t bytes = order.size() * sizeof(int64_t);
    order_epoch_ = -1;  // until the upload is enqueued
    CUDA_CHECK(cudaEventSynchronize(staging_->copied));
    std::memcpy(staging_->host, order.data(), bytes);
    CUDA_CHECK(cudaMemcpyAsync(order_.data(), staging_->host, bytes, cudaMemcpyHostToDevice, ctx.main_stream()));
    CUDA_CHECK(cudaEventRecord(staging_->copied, ctx.main_stream()));
    order_epoch_ = epoch;
  }
  const int64_t begin = index * batch_size_;
  const int64_t n = std::min(batch_size_, size_ - begin);
  // A fresh tensor each call: the caching allocator hands back the previous step's block, and
  // the caller may keep a batch while asking for the next.
  Tensor out = Tensor::empty({n, int64_t(channels_), int64_t(image_size_), int64_t(image_size_)}, out_dtype_, device_,
                             out_format_);
  gpu::gather_normalize(images_, order_.data_as<int64_t>() + begin, out);
  return out;
#endif
}

std::string GpuResidentSource::describe() const {
  const double mb = double(size_) * image_size_ * image_size_ * channels_ / 1e6;
  char size_text[32];
  std::snprintf(size_text, sizeof size_text, mb < 10 ? "%.1f" : "%.0f", mb);
  return "GPU-resident: " + std::to_string(size_) + " images (" + size_text + " MB u8) on " + device_.str() + ", " +
         dtype_name(out_dtype_) + " " + format_name(out_format_) + " batches built on the device";
}

}  // namespace ge
