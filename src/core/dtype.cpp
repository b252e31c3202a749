#include "ganengine/dtype.h"

#include <cstdlib>

#include "ganengine/error.h"

namespace ge {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::U8: return 1;
    case DType::I64: return 8;
    case DType::F64: return 8;
  }
  fail("unknown dtype");
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::U8: return "u8";
    case DType::I64: return "i64";
    case DType::F64: return "f64";
  }
  return "?";
}

DType dtype_from_name(const std::string& name) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::U8, DType::I64, DType::F64})
    if (name == dtype_name(t)) return t;
  fail("unknown dtype '", name, "' (expected f32, f16, bf16, u8, i64 or f64)");
}

bool is_floating(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64; }

const char* format_name(MemoryFormat f) { return f == MemoryFormat::NCHW ? "NCHW" : "NHWC"; }

std::string Device::str() const { return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index); }

Device Device::parse(const std::string& s) {
  if (s == "cpu") return cpu();
  if (s == "cuda" || s == "gpu") return cuda(0);
  if (s.rfind("cuda:", 0) == 0 && s.size() > 5) {
    char* end = nullptr;
    long k = std::strtol(s.c_str() + 5, &end, 10);
    if (*end == '\0' && k >= 0 && k < 64) return cuda(static_cast<int>(k));
  }
  fail("unknown device '", s, "' (expected cpu, cuda or cuda:<index>)");
}

}  // namespace ge
