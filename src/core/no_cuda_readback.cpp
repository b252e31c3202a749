// AsyncReadback in a CPU-only build: every tensor is on the host, so the copy is done at once.
#ifndef GE_WITH_CUDA
#include <cstdlib>
#include <cstring>

#include "ganengine/async_readback.h"
#include "ganengine/error.h"

namespace ge {

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
#endif
