// Tensor: a typed, shaped view of one allocation on one device.
// 4-D tensors have the logical shape (N, C, H, W) whatever their physical layout; format()
// says whether memory is NCHW or NHWC. Other ranks are always plain row-major.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ganengine/dtype.h"
#include "ganengine/error.h"

namespace ge {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);
int64_t shape_numel(const Shape& s);

// Owns raw bytes; returned to its allocator when the last Tensor referring to it goes away.
struct Storage {
  void* ptr = nullptr;
  size_t bytes = 0;
  Device device;
  bool pinned = false;  // page-locked host memory (pinned_memory.h)
  ~Storage();
  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

class Tensor {
 public:
  Tensor() = default;

  // Uninitialised memory. On the GPU it comes from the caching allocator.
  static Tensor empty(const Shape& shape, DType dtype, Device device = Device::cpu(),
                      MemoryFormat format = MemoryFormat::NCHW);
  static Tensor zeros(const Shape& shape, DType dtype, Device device = Device::cpu(),
                      MemoryFormat format = MemoryFormat::NCHW);
  // A CPU tensor in page-locked memory: the fast source of a host-to-GPU copy.
  static Tensor empty_pinned(const Shape& shape, DType dtype, MemoryFormat format = MemoryFormat::NCHW);
  bool is_pinned() const { return storage_ && storage_->pinned; }
  // Host floats (logical NCHW order) converted to dtype and laid out in format.
  static Tensor from_floats(const std::vector<float>& values, const Shape& shape, DType dtype,
                            Device device = Device::cpu(), MemoryFormat format = MemoryFormat::NCHW);
  static Tensor from_doubles(const std::vector<double>& values, const Shape& shape, DType dtype,
                             Device device = Device::cpu(), MemoryFormat format = MemoryFormat::NCHW);

  bool defined() const { return storage_ != nullptr; }
  // No other tensor (view or copy of this handle) refers to this one's memory.
  bool sole_owner() const { return storage_ != nullptr && storage_.use_count() == 1; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const;  // negative counts from the end
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return shape_numel(shape_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  MemoryFormat format() const { return format_; }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  std::string str() const;  // "f16[64, 3, 64, 64] NHWC cuda:0"

  void* data() const { return static_cast<char*>(storage_->ptr) + offset_bytes_; }
  template <class T>
  T* data_as() const {
    return static_cast<T*>(data());
  }

  // Copies of the same bytes: to another device, or (same device) a new buffer.
  Tensor to(Device device) const;
  Tensor clone() const { return to(device_); }
  // Copies bytes from src (same shape, dtype and format; any devices).
  void copy_from(const Tensor& src);
  // Physical layout changed, values kept (runs on the CPU; GPU tensors round-trip the host).
  Tensor to_format(MemoryFormat format) const;

  // Host copy of all values as doubles in logical NCHW order (any dtype, any device).
  std::vector<double> to_doubles() const;
  std::vector<float> to_floats() const;
  double item() const;  // the single element of a 1-element tensor

  // Same storage, another shape with the same element count (row-major / NCHW only).
  Tensor reshape(const Shape& shape) const;
  // Elements [begin, end) along dim 0 of a contiguous tensor (shares storage).
  Tensor slice0(int64_t begin, int64_t end) const;

  void fill_zero();  // asynchronous on the GPU (current stream)
  bool same_storage(const Tensor& o) const { return storage_ == o.storage_ && offset_bytes_ == o.offset_bytes_; }

 private:
  static Tensor allocate(const Shape& shape, DType dtype, Device device, MemoryFormat format, bool pinned);
  std::shared_ptr<Storage> storage_;
  size_t offset_bytes_ = 0;
  Shape shape_;
  DType dtype_ = DType::F32;
  Device device_;
  MemoryFormat format_ = MemoryFormat::NCHW;
};

// Physical offset of logical element (n, c, h, w) of a 4-D tensor of shape (N, C, H, W).
inline int64_t offset4(MemoryFormat f, int64_t C, int64_t H, int64_t W, int64_t n, int64_t c, int64_t h, int64_t w) {
  return f == MemoryFormat::NCHW ? ((n * C + c) * H + h) * W + w : ((n * H + h) * W + w) * C + c;
}

// Scalar load/store of any floating dtype as double, for reference code and tests.
double load_as_double(const void* base, DType t, int64_t i);
void store_from_double(void* base, DType t, int64_t i, double v);

}  // namespace ge
