#include "onednn/workspace.h"

#include <cstdlib>
#include <memory>
#include <new>

namespace ge::onednn {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

struct Buffer {
  std::unique_ptr<void, FreeDeleter> data;
  size_t bytes = 0;
};

}  // namespace

void* workspace(Slot slot, size_t bytes) {
  thread_local Buffer buffers[static_cast<size_t>(Slot::Count)];
  Buffer& b = buffers[static_cast<size_t>(slot)];
  if (bytes > b.bytes || !b.data) {
    const size_t rounded = (bytes + 63) / 64 * 64 + 64;
    b.data.reset(std::aligned_alloc(64, rounded));
    if (!b.data) throw std::bad_alloc();
    b.bytes = rounded;
  }
  return b.data.get();
}

}  // namespace ge::onednn
