#include "ganengine/optim.h"

#include <map>

namespace ge {

Adam::Adam(std::vector<nn::Param*> params, const ops::AdamConfig& cfg, Device device)
    : params_(std::move(params)), cfg_(cfg) {
  step_ = Tensor::zeros({1}, DType::F32, device);
  // Group by state dtype: f32 (masters, whose half model copies are refreshed in the same
  // pass, and plain f32 parameters), and at O3 half parameters updated in place.
  std::map<int, Group> by_kind;
  for (nn::Param* p : params_) {
    Tensor& value = p->optimizer_value();
    exp_avg_.push_back(Tensor::zeros(value.shape(), value.dtype(), device, value.format()));
    exp_avg_sq_.push_back(Tensor::zeros(value.shape(), value.dtype(), device, value.format()));
    Group& g = by_kind[static_cast<int>(value.dtype())];
    g.values.push_back(value);
    g.grads.push_back(p->grad);
    g.m.push_back(exp_avg_.back());
    g.v.push_back(exp_avg_sq_.back());
    g.half_copies.push_back(p->master.defined() ? p->value : Tensor());
  }
  for (auto& kv : by_kind) groups_.push_back(std::move(kv.second));
}

void Adam::step(const Tensor& skip) {
  // Every group must see the same step count t; only the last call may advance it, so the
  // earlier groups work on a copy that is then discarded.
  for (size_t i = 0; i < groups_.size(); ++i) {
    Group& g = groups_[i];
    if (i + 1 < groups_.size()) {
      Tensor t = step_.clone();
      ops::adam_step(g.values, g.grads, g.m, g.v, t, skip, cfg_, g.half_copies);
    } else {
      ops::adam_step(g.values, g.grads, g.m, g.v, step_, skip, cfg_, g.half_copies);
    }
  }
}

}  // namespace ge
