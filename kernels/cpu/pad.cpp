// copy_padded on the CPU: element by element in logical order, bytes moved as they are.
#include <cstring>

#include "core/backend.h"
#include "cpu/cpu_util.h"

namespace ge {
namespace cpu {

void copy_padded(const Tensor& src, Tensor& dst) {
  GE_CHECK(src.device().is_cpu() && dst.device().is_cpu(), "copy_padded on the CPU: ", src.str(), " -> ", dst.str());
  const int64_t N = dst.dim(0), C = dst.dim(1), HW = dst.dim(2) * dst.dim(3);
  const size_t bytes = dtype_size(dst.dtype());
  const char* s = static_cast<const char*>(src.data());
  char* d = static_cast<char*>(dst.data());
  for (int64_t i = 0; i < N * C * HW; ++i) {
    const int64_t n = i / (C * HW), c = i / HW % C, hw = i % HW;
    const int64_t to = physical_offset(dst, i);
    if (n < src.dim(0) && c < src.dim(1)) {
      const int64_t from = physical_offset(src, (n * src.dim(1) + c) * HW + hw);
      std::memcpy(d + to * bytes, s + from * bytes, bytes);
    } else {
      std::memset(d + to * bytes, 0, bytes);
    }
  }
}

}  // namespace cpu
}  // namespace ge
