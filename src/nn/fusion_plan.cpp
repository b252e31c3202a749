#include "nn/fusion_plan.h"

namespace ge::nn {
namespace {

// The layer at i as what its kind says it is; nullptr past the end or for another kind.
template <class L>
const L* layer_as(const Sequential& net, size_t i, LayerKind kind) {
  const auto& layers = net.layers();
  return i < layers.size() && layers[i]->layer_kind() == kind ? static_cast<const L*>(layers[i].get()) : nullptr;
}
template <class L>
L* layer_as(Sequential& net, size_t i) {
  return static_cast<L*>(net.layers()[i].get());
}

const char* kind_name(Fusion::Kind k) {
  switch (k) {
    case Fusion::Kind::ActivationIntoBatchNorm: return "activation into BatchNorm";
    case Fusion::Kind::ActivationIntoConv: return "activation into convolution";
    case Fusion::Kind::MomentsForBatchNorm: return "moments formed for BatchNorm";
    case Fusion::Kind::DotsForHead: return "last layer's output formed by BatchNorm";
    case Fusion::Kind::Fp8GradientFromBatchNorm: return "FP8 output gradient rounded by BatchNorm";
    case Fusion::Kind::Fp8InputFromBatchNorm: return "FP8 input rounded by BatchNorm";
    case Fusion::Kind::Fp8InputFromConv: return "FP8 input rounded by convolution";
    default: return "Tanh gradient into D's first layer";
  }
}

}  // namespace

std::string Fusion::describe() const {
  return std::string(kind_name(kind)) + ": layer " + std::to_string(layer) + " -> " + std::to_string(partner);
}

std::vector<Fusion> plan_fusion(const Sequential& net) {
  std::vector<Fusion> plan;
  const size_t n = net.layers().size();
  // Activations first: the dots link below depends on which layers fuse theirs.
  std::vector<bool> fused(n, false);
  for (size_t i = 0; i + 1 < n; ++i) {
    const auto* act = layer_as<ActivationLayer>(net, i + 1, LayerKind::Activation);
    if (!act) continue;
    if (layer_as<BatchNorm2d>(net, i, LayerKind::BatchNorm)) {
      if (act->kind() == ops::Activation::Tanh) continue;  // BatchNorm's kernels fuse ReLU and LeakyReLU only
      plan.push_back({Fusion::Kind::ActivationIntoBatchNorm, i, i + 1});
      fused[i] = true;
    } else if (const auto* conv = layer_as<Conv2d>(net, i, LayerKind::Conv); conv && conv->can_fuse_activation()) {
      plan.push_back({Fusion::Kind::ActivationIntoConv, i, i + 1});
      fused[i] = true;
    }
  }
  for (size_t i = 0; i + 1 < n; ++i) {
    const auto* conv = layer_as<Conv2d>(net, i, LayerKind::Conv);
    if (conv && conv->transposed() && layer_as<BatchNorm2d>(net, i + 1, LayerKind::BatchNorm))
      plan.push_back({Fusion::Kind::MomentsForBatchNorm, i, i + 1});
  }
  for (size_t i = 0; i + 1 < n; ++i) {
    const auto* conv = layer_as<Conv2d>(net, i, LayerKind::Conv);
    if (conv && conv->fp8() && layer_as<BatchNorm2d>(net, i + 1, LayerKind::BatchNorm) && fused[i + 1])
      plan.push_back({Fusion::Kind::Fp8GradientFromBatchNorm, i + 1, i});
  }
  for (size_t i = 0; i + 2 < n; ++i) {
    const auto* next = layer_as<Conv2d>(net, i + 2, LayerKind::Conv);
    if (!next || !next->fp8() || !fused[i]) continue;
    const auto* conv = layer_as<Conv2d>(net, i, LayerKind::Conv);
    if (layer_as<BatchNorm2d>(net, i, LayerKind::BatchNorm))
      plan.push_back({Fusion::Kind::Fp8InputFromBatchNorm, i, i + 2});
    else if (conv && !conv->transposed())
      plan.push_back({Fusion::Kind::Fp8InputFromConv, i, i + 2});
  }
  for (size_t i = 0; i + 2 < n; ++i) {
    const auto* head = layer_as<Conv2d>(net, i + 2, LayerKind::Conv);
    if (layer_as<BatchNorm2d>(net, i, LayerKind::BatchNorm) && fused[i] &&
        layer_as<ActivationLayer>(net, i + 1, LayerKind::Activation) && head && head->can_take_dots() && !fused[i + 2])
      plan.push_back({Fusion::Kind::DotsForHead, i, i + 2});
  }
  return plan;
}

void apply_fusion(const std::vector<Fusion>& plan, Sequential& net) {
  for (const Fusion& f : plan) {
    switch (f.kind) {
      case Fusion::Kind::ActivationIntoBatchNorm:
      case Fusion::Kind::ActivationIntoConv: {
        auto* act = layer_as<ActivationLayer>(net, f.partner);
        const ops::FusedActivation fused{act->kind(), act->slope()};
        if (f.kind == Fusion::Kind::ActivationIntoBatchNorm)
          layer_as<BatchNorm2d>(net, f.layer)->fuse_activation(fused);
        else
          layer_as<Conv2d>(net, f.layer)->fuse_activation(fused);
        act->set_fused_into_previous(true);
        break;
      }
      case Fusion::Kind::MomentsForBatchNorm:
        layer_as<Conv2d>(net, f.layer)->form_moments_for(layer_as<BatchNorm2d>(net, f.partner));
        break;
      case Fusion::Kind::DotsForHead:
        layer_as<BatchNorm2d>(net, f.layer)->form_dots_for(layer_as<Conv2d>(net, f.partner));
        break;
      case Fusion::Kind::Fp8GradientFromBatchNorm:
        layer_as<BatchNorm2d>(net, f.layer)->round_gradient_for(layer_as<Conv2d>(net, f.partner));
        break;
      case Fusion::Kind::Fp8InputFromBatchNorm:
        layer_as<BatchNorm2d>(net, f.layer)->round_output_for(layer_as<Conv2d>(net, f.partner));
        break;
      case Fusion::Kind::Fp8InputFromConv:
        layer_as<Conv2d>(net, f.layer)->round_output_for(layer_as<Conv2d>(net, f.partner));
        break;
      default: fail("apply_fusion: ", f.describe(), " spans two networks (apply_step_fusion)");
    }
  }
}

std::vector<Fusion> plan_step_fusion(const Sequential& G, const Sequential& D) {
  const size_t g = G.layers().size();
  if (g < 2 || D.layers().empty()) return {};
  const auto* g_last = layer_as<Conv2d>(G, g - 2, LayerKind::Conv);
  const auto* d_first = layer_as<Conv2d>(D, 0, LayerKind::Conv);
  if (!g_last || !d_first || !g_last->fused_activation()) return {};
  return {{Fusion::Kind::TanhGradientIntoD, g - 2, 0}};
}

void apply_step_fusion(const std::vector<Fusion>& plan, Sequential& G, Sequential& D) {
  for (const Fusion& f : plan) {
    GE_CHECK(f.kind == Fusion::Kind::TanhGradientIntoD, "apply_step_fusion: ", f.describe(), " is within one network");
    auto* g_last = layer_as<Conv2d>(G, f.layer);
    layer_as<Conv2d>(D, f.partner)->take_input_gradient_through(*g_last->fused_activation());
    g_last->receives_gradient_through_activation(true);
  }
}

}  // namespace ge::nn
