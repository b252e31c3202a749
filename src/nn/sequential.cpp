#include "ganengine/nn.h"
#include "ganengine/profiling.h"

namespace ge::nn {

namespace {
// "main.2 BatchNorm2d(128) forward": the layer's parameter prefix, what it is, and the pass, for
// Nsight's timeline and the allocator's memory breakdown.
std::string layer_range(size_t i, const Layer& layer, const char* pass) {
  return "main." + std::to_string(i) + " " + layer.describe() + " " + pass;
}
}  // namespace

Tensor Sequential::forward(const Tensor& x, bool training) {
  Tensor h = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    ProfileRange range(layer_range(i, *layers_[i], "forward"));
    h = layers_[i]->forward(h, training);
  }
  return h;
}

Tensor Sequential::backward(const Tensor& dy, bool want_param_grads, bool want_input_grad) {
  Tensor g = dy;
  for (size_t i = layers_.size(); i-- > 0;) {
    ProfileRange range(layer_range(i, *layers_[i], "backward"));
    g = layers_[i]->backward(std::move(g), want_param_grads, i > 0 || want_input_grad);
  }
  return g;
}

void Sequential::fuse_activations() {
  for (size_t i = 0; i + 1 < layers_.size(); ++i) {
    auto* act = dynamic_cast<ActivationLayer*>(layers_[i + 1].get());
    if (!act) continue;
    const ops::FusedActivation fused{act->kind(), act->slope()};
    if (auto* bn = dynamic_cast<BatchNorm2d*>(layers_[i].get())) {
      if (act->kind() == ops::Activation::Tanh) continue;  // BatchNorm's kernels fuse ReLU and LeakyReLU only
      bn->fuse_activation(fused);
    } else if (auto* conv = dynamic_cast<Conv2d*>(layers_[i].get()); conv && conv->can_fuse_activation()) {
      conv->fuse_activation(fused);
    } else {
      continue;
    }
    act->set_fused_into_previous(true);
  }
}

void Sequential::link_moments() {
  for (size_t i = 0; i + 1 < layers_.size(); ++i)
    if (auto* conv = dynamic_cast<Conv2d*>(layers_[i].get()); conv && conv->transposed())
      conv->form_moments_for(dynamic_cast<BatchNorm2d*>(layers_[i + 1].get()));
}

void Sequential::link_dots() {
  for (size_t i = 0; i + 2 < layers_.size(); ++i) {
    auto* bn = dynamic_cast<BatchNorm2d*>(layers_[i].get());
    auto* act = dynamic_cast<ActivationLayer*>(layers_[i + 1].get());
    auto* head = dynamic_cast<Conv2d*>(layers_[i + 2].get());
    if (bn && bn->fused() && act && head && head->can_take_dots()) bn->form_dots_for(head);
  }
}

std::unique_ptr<Sequential> Sequential::twin() const {
  auto t = std::make_unique<Sequential>();
  for (const auto& layer : layers_) t->add(layer->twin());
  // Where this network's convolutions hand their moments on, the twin's hand theirs to the twin's
  // BatchNorms (Conv2d::twin drops the link to this network's).
  for (size_t i = 0; i + 1 < layers_.size(); ++i)
    if (auto* conv = dynamic_cast<const Conv2d*>(layers_[i].get()); conv && conv->moments_for())
      static_cast<Conv2d*>(t->layers_[i].get())->form_moments_for(dynamic_cast<BatchNorm2d*>(t->layers_[i + 1].get()));
  for (size_t i = 0; i + 2 < layers_.size(); ++i)
    if (auto* bn = dynamic_cast<const BatchNorm2d*>(layers_[i].get()); bn && bn->dots_for())
      static_cast<BatchNorm2d*>(t->layers_[i].get())->form_dots_for(static_cast<Conv2d*>(t->layers_[i + 2].get()));
  return t;
}

void Sequential::set_update_running_stats(bool on) {
  for (auto& layer : layers_)
    if (auto* bn = dynamic_cast<BatchNorm2d*>(layer.get())) bn->set_update_running_stats(on);
}

std::vector<Param*> Sequential::params() {
  std::vector<Param*> out;
  for (auto& kv : named_params()) out.push_back(kv.second);
  return out;
}

std::vector<std::pair<std::string, Param*>> Sequential::named_params() {
  std::vector<std::pair<std::string, Param*>> out;
  for (size_t i = 0; i < layers_.size(); ++i)
    for (Param* p : layers_[i]->params()) out.emplace_back("main." + std::to_string(i) + "." + p->name, p);
  return out;
}

std::vector<std::pair<std::string, Buffer>> Sequential::named_buffers() {
  std::vector<std::pair<std::string, Buffer>> out;
  for (size_t i = 0; i < layers_.size(); ++i)
    for (const Buffer& b : layers_[i]->buffers()) out.emplace_back("main." + std::to_string(i) + "." + b.name, b);
  return out;
}

}  // namespace ge::nn
