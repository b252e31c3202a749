// Per-thread scratch buffers for the fast backend: the primitives' scratchpads and the operands
// reordered into a primitive's layout or widened to f32. Each slot keeps its largest
// allocation, so after the first step a training loop allocates (and page-faults) nothing.
// Buffers are 64-byte aligned, as oneDNN's vector loads prefer.
#pragma once
#include <cstddef>

namespace ge::onednn {

enum class Slot { Scratchpad, InputA, InputB, Output, WidenA, WidenB, WidenOutput, Count };

// A buffer of at least bytes for this thread's slot; valid until the same slot is asked again.
void* workspace(Slot slot, size_t bytes);

}  // namespace ge::onednn
