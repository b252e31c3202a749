#include "ganengine/optim.h"

#include <map>

namespace ge {

Adam::Adam(std::vector<nn::Param*> params, const ops::AdamConfig& cfg, Device device)
    : params_(std::move(params)), cfg_(cfg) {
  step_ = Tensor::zeros({1}, DType::F32, device);
  // Group by state dtype: f32 (masters, whose half model copies are refreshed in the same
  // pass, and plain f32 parameters), and at O3 half parameters updated in place.
  std::map<int, Group> by_kind;
  for (size_t i = 0; i < params_.size(); ++i) {
    nn::Param* p = params_[i];
    Tensor& value = p->optimizer_value();
    exp_avg_.push_back(Tensor::zeros(value.shape(), value.dtype(), device, value.format()));
    exp_avg_sq_.push_back(Tensor::zeros(value.shape(), value.dtype(), device, value.format()));
    Group& g = by_kind[static_cast<int>(value.dtype())];
    g.values.push_back(value);
    g.grads.push_back(p->grad);
    g.m.push_back(exp_avg_.back());
    g.v.push_back(exp_avg_sq_.back());
    g.half_copies.push_back(p->master.defined() ? p->value : Tensor());
    g.index.push_back(i);
  }
  for (auto& kv : by_kind) groups_.push_back(std::move(kv.second));
}

void Adam::step(const Tensor& skip, const ops::PendingGrads* pending) {
  GE_CHECK(!pending || pending->src.size() == params_.size(), "Adam::step: ", pending ? pending->src.size() : 0,
           " pending gradients for ", params_.size(), " parameters");
  // Every group must see the same step count t; only the last call may advance it, so the
  // earlier groups work on a copy that is then discarded.
  for (size_t i = 0; i < groups_.size(); ++i) {
    Group& g = groups_[i];
    ops::PendingGrads mine;
    if (pending) {
      mine.scale = pending->scale;
      mine.found_inf = pending->found_inf;
      mine.accumulate = pending->accumulate;
      mine.store_grads = pending->store_grads;
      for (size_t k : g.index) mine.src.push_back(pending->src[k]);
    }
    Tensor t = i + 1 < groups_.size() ? step_.clone() : step_;
    ops::adam_step(g.values, g.grads, g.m, g.v, t, skip, cfg_, g.half_copies, pending ? &mine : nullptr);
  }
}

}  // namespace ge
