// Primitives created once per shape and kept for the process, as the CUDA side keeps its
// convolution plans: creating a oneDNN primitive (its JIT kernel) costs far more than running
// one at DCGAN's sizes. Thread-safe; entries are immutable once made.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>

#include "ganengine/tensor.h"

namespace ge::onednn {

template <class Entry>
class PrimitiveCache {
 public:
  // The entry for key, made by make() the first time it is asked for.
  std::shared_ptr<const Entry> get(const std::string& key, const std::function<Entry()>& make) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = entries_.find(key);
      if (it != entries_.end()) return it->second;
    }
    auto made = std::make_shared<const Entry>(make());  // outside the lock: JIT takes a while
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_.emplace(key, std::move(made)).first->second;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const Entry>> entries_;
};

// A tensor's part of a cache key: shape, dtype and layout.
inline std::string key_of(const Tensor& t) {
  std::ostringstream s;
  s << shape_str(t.shape()) << dtype_name(t.dtype()) << format_name(t.format());
  return s.str();
}

}  // namespace ge::onednn
