#include "ganengine/nn.h"
#include "nn/fusion_plan.h"
#include "runtime/profiling.h"

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

void Sequential::fuse() {
  fusion_ = plan_fusion(*this);
  apply_fusion(fusion_, *this);
}

std::unique_ptr<Sequential> Sequential::twin() const {
  auto t = std::make_unique<Sequential>();
  for (const auto& layer : layers_) t->add(layer->twin());
  // Layer::twin keeps each layer's own fusions and drops its links to this network's layers.
  t->fusion_ = fusion_;
  apply_fusion(t->fusion_, *t);
  return t;
}

void Sequential::set_update_running_stats(bool on) {
  for (auto& layer : layers_) {
    if (layer->layer_kind() == LayerKind::BatchNorm)
      static_cast<BatchNorm2d*>(layer.get())->set_update_running_stats(on);
    if (layer->layer_kind() == LayerKind::Conv) static_cast<Conv2d*>(layer.get())->set_record_amax(on);
  }
}

std::vector<std::pair<std::string, Fp8ConvScaling*>> Sequential::named_fp8_scalings() {
  std::vector<std::pair<std::string, Fp8ConvScaling*>> out;
  for (size_t i = 0; i < layers_.size(); ++i)
    if (layers_[i]->layer_kind() == LayerKind::Conv)
      if (Fp8ConvScaling* s = static_cast<Conv2d*>(layers_[i].get())->fp8())
        out.emplace_back("main." + std::to_string(i), s);
  return out;
}

void Sequential::form_fp8_weights() {
  std::vector<ops::Fp8RoundTripOf> trips;
  std::vector<ops::Fp8WeightFragmentsOf> layouts;  // of the codes the round trips write: run after them
  for (auto& layer : layers_) {
    if (layer->layer_kind() != LayerKind::Conv) continue;
    auto* conv = static_cast<Conv2d*>(layer.get());
    if (std::optional<ops::Fp8RoundTripOf> trip = conv->form_fp8_weight()) trips.push_back(std::move(*trip));
    for (ops::Fp8WeightFragmentsOf& job : conv->form_fp8_weight_fragments()) layouts.push_back(std::move(job));
  }
  ops::fp8_round_trip_all(trips);
  ops::fp8_weight_fragments_all(layouts);
}

void Sequential::drop_fp8_weights() {
  for (auto& layer : layers_)
    if (layer->layer_kind() == LayerKind::Conv) static_cast<Conv2d*>(layer.get())->drop_formed_fp8_weight();
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
