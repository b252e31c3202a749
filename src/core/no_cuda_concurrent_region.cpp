// ConcurrentRegion in a build without CUDA: one lane, so on_side runs its work in place.
#ifndef GE_WITH_CUDA
#include "ganengine/concurrent_region.h"

namespace ge {

ConcurrentRegion::ConcurrentRegion(Device device, bool) : device_(device) {}
ConcurrentRegion::~ConcurrentRegion() {}
void ConcurrentRegion::on_side(std::vector<Tensor>, const std::function<void()>& fn) { fn(); }
void ConcurrentRegion::join() {}
ConcurrentRegion* ConcurrentRegion::active(Device) { return nullptr; }

}  // namespace ge
#endif
