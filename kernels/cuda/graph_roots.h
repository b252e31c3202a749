// One entry point for a captured graph with several lanes.
//
// A step captured from several streams (concurrent_region.h) becomes a graph with one root per
// lane that starts with work of its own: at batch 64 G's first kernel on the branch lane, D's
// first layer on the main lane and a counter memset. Launched, those roots did not start
// together: in the CUPTI timeline of the O2 step at batch 64 (H200) they began at 0, 8.5 and
// 21.5 us, and the first root's successor 6 us after it ended, where a kernel behind another
// starts within 1 us. Made to wait for one of them, the others started within 4-16 us and the
// first root's successor within 2.2 us. The root kept is the one the step most needs early:
// the highest stream priority (the lane the trainer ranks first), the first on ties.
#pragma once
#include <cstddef>

struct CUgraph_st;

namespace ge {
namespace gpu {

// Makes every other root of `graph` wait for its root of highest priority; returns how many
// roots now wait (0 when it had one root, or none of its roots is a kernel).
// GANENGINE_GRAPH_ROOTS=many leaves the roots as captured (returns 0).
size_t join_graph_roots(CUgraph_st* graph);

}  // namespace gpu
}  // namespace ge
