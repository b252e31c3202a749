// Moving operands between our tensors (nchw/nhwc; f32, f16, bf16) and the layouts and data
// types a primitive chose. Layout changes go through oneDNN's JIT reorders; f16 and bf16 are
// widened to f32 (exactly) and results narrowed (rounded to nearest even, once) by our own
// loops first and last, since oneDNN's reorders between those types and f32 take its slow
// reference path.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

#include "ganengine/tensor.h"
#include "onednn/workspace.h"

namespace ge::onednn {

// The operand t in the layout want: t's own memory when it already is, else a copy in this
// thread's workspace (slot, and widen for an f32 copy of a narrower t).
dnnl::memory input_in_layout(const Tensor& t, const dnnl::memory::desc& want, Slot slot, Slot widen);

// Where a primitive writes a result bound for t: t's own memory when t already has the layout
// want, else the slot's workspace; then store_result moves it into t.
dnnl::memory output_in_layout(const Tensor& t, const dnnl::memory::desc& want, Slot slot);
void store_result(const dnnl::memory& result, Tensor& t, Slot widen);

}  // namespace ge::onednn
