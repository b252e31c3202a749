#include "ganengine/tensor.h"

#include <cstring>
#include <sstream>

#include "core/half_bits.h"
#include "core/round_from_double.h"
#include "ganengine/allocator.h"
#include "runtime/pinned_memory.h"

namespace ge {

#ifdef GE_WITH_CUDA
namespace gpu {
void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes);
void zero_bytes(void* dst, Device dev, size_t bytes);
}  // namespace gpu
#endif

namespace {

void copy_any(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) {
  if (dst_dev.is_cpu() && src_dev.is_cpu()) {
    if (bytes) std::memcpy(dst, src, bytes);
    return;
  }
#ifdef GE_WITH_CUDA
  gpu::copy_bytes(dst, dst_dev, src, src_dev, bytes);
#else
  fail("copy to/from a CUDA device in a build without CUDA");
#endif
}

}  // namespace

Storage::~Storage() {
  if (pinned)
    pinned_free(ptr, bytes);
  else
    device_free(device, ptr, bytes);
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << ']';
  return os.str();
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Tensor Tensor::allocate(const Shape& shape, DType dtype, Device device, MemoryFormat format, bool pinned) {
  for (int64_t d : shape)
    if (d < 0) fail("negative dimension in shape ", shape_str(shape));
  if (format == MemoryFormat::NHWC && shape.size() != 4)
    fail("NHWC layout needs a 4-D tensor, got shape ", shape_str(shape));
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = device;
  t.format_ = format;
  t.storage_ = std::make_shared<Storage>();
  t.storage_->device = device;
  t.storage_->pinned = pinned;
  t.storage_->bytes = t.nbytes();
  t.storage_->ptr = pinned ? pinned_alloc(t.storage_->bytes) : device_alloc(device, t.storage_->bytes);
  return t;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device, MemoryFormat format) {
  return allocate(shape, dtype, device, format, false);
}

Tensor Tensor::empty_pinned(const Shape& shape, DType dtype, MemoryFormat format) {
  return allocate(shape, dtype, Device::cpu(), format, true);
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device, MemoryFormat format) {
  Tensor t = empty(shape, dtype, device, format);
  t.fill_zero();
  return t;
}

Tensor Tensor::from_doubles(const std::vector<double>& values, const Shape& shape, DType dtype, Device device,
                            MemoryFormat format) {
  if (static_cast<int64_t>(values.size()) != shape_numel(shape))
    fail("from_doubles: ", values.size(), " values for shape ", shape_str(shape));
  Tensor host = empty(shape, dtype, Device::cpu(), MemoryFormat::NCHW);
  for (size_t i = 0; i < values.size(); ++i) store_from_double(host.data(), dtype, static_cast<int64_t>(i), values[i]);
  Tensor laid = format == MemoryFormat::NCHW ? host : host.to_format(format);
  return device.is_cpu() ? laid : laid.to(device);
}

Tensor Tensor::from_floats(const std::vector<float>& values, const Shape& shape, DType dtype, Device device,
                           MemoryFormat format) {
  return from_doubles(std::vector<double>(values.begin(), values.end()), shape, dtype, device, format);
}

int64_t Tensor::dim(int i) const {
  int r = rank();
  int k = i < 0 ? i + r : i;
  GE_CHECK(k >= 0 && k < r, "dimension ", i, " of a rank-", r, " tensor");
  return shape_[k];
}

std::string Tensor::str() const {
  std::ostringstream os;
  os << dtype_name(dtype_) << shape_str(shape_);
  if (rank() == 4) os << ' ' << format_name(format_);
  os << ' ' << device_.str();
  return os.str();
}

Tensor Tensor::to(Device device) const {
  GE_CHECK(defined(), "to() on an undefined tensor");
  Tensor t = empty(shape_, dtype_, device, format_);
  copy_any(t.data(), device, data(), device_, nbytes());
  return t;
}

void Tensor::copy_from(const Tensor& src) {
  GE_CHECK(src.shape_ == shape_ && src.dtype_ == dtype_ && src.format_ == format_, "copy_from: ", src.str(), " into ",
           str());
  copy_any(data(), device_, src.data(), src.device_, nbytes());
}

Tensor Tensor::to_format(MemoryFormat format) const {
  if (format == format_) return clone();
  GE_CHECK(rank() == 4, "to_format needs a 4-D tensor, got ", str());
  Tensor src = device_.is_cpu() ? *this : to(Device::cpu());
  Tensor dst = empty(shape_, dtype_, Device::cpu(), format);
  const int64_t N = shape_[0], C = shape_[1], H = shape_[2], W = shape_[3];
  const size_t es = dtype_size(dtype_);
  const char* s = static_cast<const char*>(src.data());
  char* d = static_cast<char*>(dst.data());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w)
          std::memcpy(d + es * offset4(format, C, H, W, n, c, h, w), s + es * offset4(format_, C, H, W, n, c, h, w),
                      es);
  return device_.is_cpu() ? dst : dst.to(device_);
}

std::vector<double> Tensor::to_doubles() const {
  Tensor host = device_.is_cpu() ? *this : to(Device::cpu());
  if (rank() == 4 && format_ == MemoryFormat::NHWC) host = host.to_format(MemoryFormat::NCHW);
  std::vector<double> out(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) out[static_cast<size_t>(i)] = load_as_double(host.data(), dtype_, i);
  return out;
}

std::vector<float> Tensor::to_floats() const {
  std::vector<double> d = to_doubles();
  return std::vector<float>(d.begin(), d.end());
}

double Tensor::item() const {
  GE_CHECK(numel() == 1, "item() of ", str(), " which has ", numel(), " elements");
  return to_doubles()[0];
}

Tensor Tensor::reshape(const Shape& shape) const {
  GE_CHECK(shape_numel(shape) == numel(), "reshape ", str(), " to ", shape_str(shape));
  GE_CHECK(format_ == MemoryFormat::NCHW || shape.size() == 4, "reshape of an NHWC tensor ", str());
  Tensor t = *this;
  t.shape_ = shape;
  if (shape.size() != 4) t.format_ = MemoryFormat::NCHW;
  return t;
}

Tensor Tensor::slice0(int64_t begin, int64_t end) const {
  GE_CHECK(rank() >= 1 && begin >= 0 && begin <= end && end <= shape_[0], "slice0(", begin, ", ", end, ") of ", str());
  Tensor t = *this;
  const int64_t row = shape_[0] ? numel() / shape_[0] : 0;
  t.shape_[0] = end - begin;
  t.offset_bytes_ += static_cast<size_t>(begin * row) * dtype_size(dtype_);
  return t;
}

void Tensor::fill_zero() {
  if (device_.is_cpu()) {
    std::memset(data(), 0, nbytes());
    return;
  }
#ifdef GE_WITH_CUDA
  gpu::zero_bytes(data(), device_, nbytes());
#endif
}

double load_as_double(const void* base, DType t, int64_t i) {
  switch (t) {
    case DType::F32: return static_cast<const float*>(base)[i];
    case DType::F16: return half_bits_to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::BF16: return bf16_bits_to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::U8: return static_cast<const uint8_t*>(base)[i];
    case DType::I64: return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case DType::F64: return static_cast<const double*>(base)[i];
  }
  return 0;
}

void store_from_double(void* base, DType t, int64_t i, double v) {
  switch (t) {
    // Half types round straight from double: going through float could round twice.
    case DType::F32: static_cast<float*>(base)[i] = static_cast<float>(v); return;
    case DType::F16: static_cast<uint16_t*>(base)[i] = double_to_half_bits(v); return;
    case DType::BF16: static_cast<uint16_t*>(base)[i] = double_to_bf16_bits(v); return;
    case DType::U8: static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v); return;
    case DType::I64: static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v); return;
    case DType::F64: static_cast<double*>(base)[i] = v; return;
  }
}

}  // namespace ge
