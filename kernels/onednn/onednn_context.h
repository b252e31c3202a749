// What every primitive of the fast CPU backend shares: the CPU engine, a stream per calling
// thread, and the translation of our tensors into oneDNN memory descriptors. Private to
// kernels/onednn and src/core/cpu_backend.cpp.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "ganengine/tensor.h"

namespace ge::onednn {

dnnl::engine& engine();
// This thread's stream: primitives are stateless (user scratchpads), so threads that train
// replicas side by side each execute on their own stream.
dnnl::stream& stream();

dnnl::memory::data_type data_type(DType t);
// The user layout of a 4-D tensor (activations N,C,H,W or filters O,I,H,W in logical order):
// nchw or nhwc by its format, in the given data type (its own by default).
dnnl::memory::desc user_desc(const Tensor& t);
dnnl::memory::desc user_desc(const Tensor& t, dnnl::memory::data_type dt);
// The same logical dims as t, any layout (the primitive's choice), in data type dt.
dnnl::memory::desc any_desc(const Tensor& t, dnnl::memory::data_type dt);
// A memory object over the tensor's own storage.
dnnl::memory user_memory(const Tensor& t);

// The data type a primitive computes half tensors in: bf16 stays bf16 where the CPU has native
// bf16 arithmetic and half compute is enabled (set_native_bf16), everything else computes in
// f32 (f16 is storage only: widened exactly, the result rounded once).
dnnl::memory::data_type compute_type(DType t);
void set_native_bf16(bool on);
bool native_bf16();

std::string isa_name();  // the ISA oneDNN dispatches to, "avx512_core_bf16"
std::string version();   // "2.6.3"

}  // namespace ge::onednn
