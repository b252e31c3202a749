#include "onednn/reorder.h"

#include "onednn/element_types.h"
#include "onednn/onednn_context.h"

namespace ge::onednn {
namespace {

using dt = dnnl::memory::data_type;

void reorder(dnnl::memory src, dnnl::memory dst) {  // execute takes non-const references
  dnnl::reorder(src, dst).execute(stream(), src, dst);
  stream().wait();
}

// t widened to f32 in its own layout, in the widen slot.
dnnl::memory widened(const Tensor& t, Slot slot) {
  const dnnl::memory::desc f32 = user_desc(t, dt::f32);
  float* out = static_cast<float*>(workspace(slot, f32.get_size()));
  with_element_type(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(t.data());
    const int64_t n = t.numel();
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = widen(in[i]);
  });
  return {f32, engine(), out};
}

// The result in t's layout as f32: t's own memory for an f32 t, else the widen slot.
dnnl::memory result_as_f32(const dnnl::memory& result, const Tensor& t, Slot widen) {
  const dnnl::memory::desc f32 = user_desc(t, dt::f32);
  if (result.get_desc() == f32) return result;
  dnnl::memory flat =
      t.dtype() == DType::F32 ? user_memory(t) : dnnl::memory(f32, engine(), workspace(widen, f32.get_size()));
  reorder(result, flat);
  return flat;
}

}  // namespace

dnnl::memory input_in_layout(const Tensor& t, const dnnl::memory::desc& want, Slot slot, Slot widen) {
  dnnl::memory user = user_memory(t);
  if (user.get_desc() == want) return user;
  if (t.dtype() != DType::F32 && want.data_type() == dt::f32) {
    user = widened(t, widen);
    if (user.get_desc() == want) return user;
  }
  dnnl::memory m(want, engine(), workspace(slot, want.get_size()));
  reorder(user, m);
  return m;
}

dnnl::memory output_in_layout(const Tensor& t, const dnnl::memory::desc& want, Slot slot) {
  dnnl::memory user = user_memory(t);
  if (user.get_desc() == want) return user;
  return {want, engine(), workspace(slot, want.get_size())};
}

void store_result(const dnnl::memory& result, Tensor& t, Slot widen) {
  if (result.get_data_handle() == t.data()) return;  // written in place
  const dnnl::memory flat = result_as_f32(result, t, widen);
  if (t.dtype() == DType::F32) return;
  const float* in = static_cast<const float*>(flat.get_data_handle());
  with_element_type(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* out = static_cast<T*>(t.data());
    const int64_t n = t.numel();
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = narrow<T>(in[i]);
  });
}

}  // namespace ge::onednn
