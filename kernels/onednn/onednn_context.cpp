#include "onednn/onednn_context.h"

#include <atomic>

#include "ganengine/error.h"

namespace ge::onednn {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

dt data_type(DType t) {
  switch (t) {
    case DType::F32: return dt::f32;
    case DType::F16: return dt::f16;
    case DType::BF16: return dt::bf16;
    default: break;
  }
  fail("the fast CPU backend takes f32, f16 and bf16 tensors, got ", dtype_name(t));
}

namespace {
dnnl::memory::dims dims_of(const Tensor& t) { return dnnl::memory::dims(t.shape().begin(), t.shape().end()); }

tag layout_of(const Tensor& t) {
  if (t.rank() != 4) return t.rank() == 1 ? tag::a : tag::ab;
  return t.format() == MemoryFormat::NHWC ? tag::nhwc : tag::nchw;
}

std::atomic<bool> g_native_bf16{false};
}  // namespace

dnnl::memory::desc user_desc(const Tensor& t) { return user_desc(t, data_type(t.dtype())); }

dnnl::memory::desc user_desc(const Tensor& t, dt type) { return {dims_of(t), type, layout_of(t)}; }

dnnl::memory::desc any_desc(const Tensor& t, dt type) { return {dims_of(t), type, tag::any}; }

dnnl::memory user_memory(const Tensor& t) { return {user_desc(t), engine(), t.data()}; }

void set_native_bf16(bool on) { g_native_bf16 = on; }
bool native_bf16() { return g_native_bf16; }

dt compute_type(DType t) { return t == DType::BF16 && native_bf16() ? dt::bf16 : dt::f32; }

std::string isa_name() {
  using isa = dnnl::cpu_isa;
  switch (dnnl::get_effective_cpu_isa()) {
    case isa::sse41: return "sse41";
    case isa::avx: return "avx";
    case isa::avx2: return "avx2";
    case isa::avx2_vnni: return "avx2_vnni";
    case isa::avx512_core: return "avx512_core";
    case isa::avx512_core_vnni: return "avx512_core_vnni";
    case isa::avx512_core_bf16: return "avx512_core_bf16";
    case isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

std::string version() {
  const dnnl_version_t* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

}  // namespace ge::onednn
