// ConcurrentRegion in a build without CUDA: one lane, so on_side and on_branch run their work in
// place.
#ifndef GE_WITH_CUDA
#include "ganengine/concurrent_region.h"

namespace ge {

ConcurrentRegion::ConcurrentRegion(Device device, bool) : device_(device) {}
ConcurrentRegion::~ConcurrentRegion() {}
void ConcurrentRegion::on_side(std::vector<Tensor>, const std::function<void()>& fn) { fn(); }
void ConcurrentRegion::join() {}
void ConcurrentRegion::fork_branch() {}
void ConcurrentRegion::on_branch(const std::function<void()>& fn) { fn(); }
void ConcurrentRegion::join_branch() {}
ConcurrentRegion::Mark ConcurrentRegion::mark() { return {}; }
void ConcurrentRegion::wait(const Mark&) {}
ConcurrentRegion* ConcurrentRegion::active(Device) { return nullptr; }
void ConcurrentRegion::rank_branch_side_below_branch(Device, bool) {}

}  // namespace ge
#endif
