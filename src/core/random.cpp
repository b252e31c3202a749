// Counter bookkeeping for the Philox fills: callers advance their offset by this much after
// each fill so that consecutive draws never share a block.
#include "ganengine/ops.h"

namespace ge {
namespace ops {

uint64_t philox_counters_for(int64_t n) {
  GE_CHECK(n >= 0, "philox_counters_for: negative element count ", n);
  return (static_cast<uint64_t>(n) + 3) / 4;  // four output words per counter value
}

}  // namespace ops
}  // namespace ge
