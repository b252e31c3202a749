// Element-wise kernels move 16 bytes per access where the buffers allow it: 8 halves or 4
// floats per thread instead of one, which is what lets them run near memory bandwidth.
#pragma once
#include <cstdint>
#include <initializer_list>

#include "cuda/aligned.h"
#include "cuda/cuda_util.cuh"

namespace ge {
namespace gpu {

template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

template <class T>
constexpr int kWidePack = 16 / static_cast<int>(sizeof(T));

// The widest pack (kWidePack<T> or 1) for n elements at these addresses: n must be a multiple
// and every pointer 16-byte aligned. A positive `group` must divide by the pack too, when the
// caller needs a pack to stay within runs of that length (a channel's, say); 0: no such need.
template <class T>
int pack_width(int64_t n, int64_t group, std::initializer_list<const void*> ptrs) {
  const int w = kWidePack<T>;
  if (n % w != 0 || (group != 0 && group % w != 0)) return 1;
  for (const void* p : ptrs)
    if (p && !aligned16(p)) return 1;
  return w;
}

}  // namespace gpu
}  // namespace ge
