// One entry point for a captured graph with several lanes.
//
// A step captured from several streams (concurrent_region.h) becomes a graph with one root per
// lane that starts with work of its own: at batch 64 G's first kernel on the branch lane, D's
// first layer on the main lane and a counter memset. Launched, such roots do not start
// together, and the first root's successor starts later than a kernel behind another does; made
// to wait for one of them, the others start sooner, and so does that successor
// (docs/performance.md). The root kept is the one the step most needs early:
// the highest stream priority (the lane the trainer ranks first), the first on ties.
#pragma once
#include <cstddef>

struct CUgraph_st;

namespace ge {
namespace gpu {

// Makes every other root of `graph` wait for its root of highest priority; returns how many
// roots now wait (0 when it had one root, or none of its roots is a kernel).
size_t join_graph_roots(CUgraph_st* graph);

}  // namespace gpu
}  // namespace ge
