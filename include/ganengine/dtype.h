// Element types, devices and memory formats: the vocabulary every tensor speaks.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace ge {

// F64 exists only on the CPU backend: it is what gradient checks compute in.
enum class DType : uint8_t { F32, F16, BF16, U8, I64, F64 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);                 // "f32", "f16", "bf16", "u8", "i64", "f64"
DType dtype_from_name(const std::string& name);  // throws ge::Error on unknown names
bool is_floating(DType t);

// Physical layout of a 4-D tensor whose logical shape is always (N, C, H, W).
enum class MemoryFormat : uint8_t { NCHW, NHWC };
const char* format_name(MemoryFormat f);

struct Device {
  enum class Kind : uint8_t { CPU, CUDA };
  Kind kind = Kind::CPU;
  int index = 0;

  static Device cpu() { return {Kind::CPU, 0}; }
  static Device cuda(int k = 0) { return {Kind::CUDA, k}; }
  bool is_cpu() const { return kind == Kind::CPU; }
  bool is_cuda() const { return kind == Kind::CUDA; }
  bool operator==(const Device& o) const { return kind == o.kind && (is_cpu() || index == o.index); }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const;                    // "cpu", "cuda:0"
  static Device parse(const std::string& s);  // "cpu", "cuda", "cuda:1"; throws ge::Error
};

}  // namespace ge
