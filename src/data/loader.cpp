// Loader: per-epoch shuffle, batch assembly on worker threads, one batch of prefetch.
#include <algorithm>
#include <array>
#include <cstdint>
#include <exception>
#include <string>
#include <system_error>

#include "core/replica_pool.h"
#include "ganengine/batch_source.h"
#include "ganengine/data.h"
#include "ganengine/error.h"

namespace ge {
namespace {

// ToTensor() then Normalize(0.5, 0.5) for each byte value, in float as torchvision does.
const std::array<float, 256>& normalised_byte_values() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int v = 0; v < 256; ++v) t[v] = (static_cast<float>(v) / 255.0f - 0.5f) / 0.5f;
    return t;
  }();
  return table;
}

}  // namespace

Loader::Loader(const Dataset& ds, int64_t batch_size, uint64_t seed, int workers, bool pinned)
    : ds_(ds), batch_size_(batch_size), seed_(seed), workers_(workers < 1 ? 1 : workers), pinned_(pinned) {
  if (batch_size < 1) fail("--batchSize: expected at least 1, got ", batch_size);
  if (workers < 0) fail("--workers: expected 0 or more, got ", workers);
  if (workers_ > 1) {
    try {
      pool_ = std::make_unique<ReplicaPool>(workers_);
    } catch (const std::system_error&) {
      // No threads to be had: the calling thread decodes every item (the same batches).
    }
  }
}

Loader::~Loader() { drop_prefetch(); }

int64_t Loader::batches_per_epoch() const { return batches_of(ds_.size(), batch_size_); }

std::string Loader::describe() const {
  return "host loader: " + std::to_string(workers_) + " worker thread" + (workers_ == 1 ? "" : "s") +
         (pinned_ ? ", f32 batches in pinned memory copied to the device each step" : ", f32 batches in host memory");
}

std::vector<int64_t> Loader::order(int64_t epoch) const { return epoch_order(ds_.size(), seed_, epoch); }

std::vector<int64_t> Loader::indices_of(int64_t epoch, int64_t index) {
  if (epoch != cached_epoch_) {
    cached_order_ = order(epoch);
    cached_epoch_ = epoch;
  }
  const int64_t begin = index * batch_size_;
  const int64_t end = std::min(begin + batch_size_, ds_.size());
  return {cached_order_.begin() + begin, cached_order_.begin() + end};
}

Tensor Loader::assemble(const std::vector<int64_t>& indices) const {
  const int64_t n = static_cast<int64_t>(indices.size());
  const int64_t c = ds_.channels(), s = ds_.image_size(), plane = s * s;
  Tensor batch = pinned_ ? Tensor::empty_pinned({n, c, s, s}, DType::F32) : Tensor::empty({n, c, s, s}, DType::F32);
  float* out = batch.data_as<float>();
  const std::array<float, 256>& value_of = normalised_byte_values();

  // Worker w takes items w, w + threads, ...: every item is written by exactly one thread,
  // and its values do not depend on which, so any worker count gives the same batch.
  const int64_t threads = pool_ ? std::min<int64_t>(pool_->size(), n) : 1;
  auto work = [&](int64_t first) {
    std::vector<uint8_t> hwc(static_cast<size_t>(plane * c));
    for (int64_t k = first; k < n; k += threads) {
      ds_.read(indices[size_t(k)], hwc.data());
      float* item = out + k * c * plane;
      for (int64_t p = 0; p < plane; ++p)
        for (int64_t ch = 0; ch < c; ++ch) item[ch * plane + p] = value_of[hwc[size_t(p * c + ch)]];
    }
  };
  if (threads <= 1) {
    work(0);
    return batch;
  }
  // Each worker's error kept apart, and the lowest worker's reported: the same error for the
  // same bad items whichever worker fails first.
  std::vector<std::exception_ptr> errors(static_cast<size_t>(threads));
  pool_->run([&](int w) {
    if (w >= threads) return;
    try {
      work(w);
    } catch (...) {
      errors[size_t(w)] = std::current_exception();
    }
  });
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  return batch;
}

void Loader::start_prefetch(int64_t epoch, int64_t index) {
  if (epoch > int64_t(UINT32_MAX)) return;
  std::vector<int64_t> indices = indices_of(epoch, index);  // on this thread: it owns the order cache
  try {
    prefetched_ = std::async(std::launch::async, [this, indices = std::move(indices)] { return assemble(indices); });
    prefetched_key_ = {epoch, index};
  } catch (const std::system_error&) {
    // No thread available: prefetch is only an optimisation; the batch is built when asked for.
  }
}

void Loader::drop_prefetch() {
  if (!prefetched_.valid()) return;
  try {
    prefetched_.get();  // waits; an error in a batch nobody asked for is not an error
  } catch (...) {
  }
  prefetched_key_ = {-1, -1};
}

Tensor Loader::batch(int64_t epoch, int64_t index) {
  const int64_t batches = batches_per_epoch();
  if (index < 0 || index >= batches)
    fail("batch ", index, " out of range: an epoch of ", ds_.name(), " has ", batches, " batches of ", batch_size_);
  GE_CHECK(epoch >= 0 && epoch <= int64_t(UINT32_MAX), "epoch ", epoch, " out of range");

  Tensor result;
  if (prefetched_.valid() && prefetched_key_ == std::make_pair(epoch, index)) {
    prefetched_key_ = {-1, -1};
    result = prefetched_.get();  // rethrows what the background decode raised
  } else {
    drop_prefetch();
    result = assemble(indices_of(epoch, index));
  }
  if (index + 1 < batches)
    start_prefetch(epoch, index + 1);
  else
    start_prefetch(epoch + 1, 0);
  return result;
}

}  // namespace ge
