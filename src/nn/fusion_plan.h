// Fusion across layers, planned in one place (nn.h's Fusion says what each kind is). A network's
// layer list (and so its state_dict) always reads as the example's; the plan says which layers
// do part of their neighbours' work, and applying it sets the links on the layers.
#pragma once
#include <string>
#include <vector>

#include "ganengine/nn.h"

namespace ge::nn {

// The fusions within one network: its activations first, then the links that depend on them.
std::vector<Fusion> plan_fusion(const Sequential& net);
// Sets the links `plan` names on net's layers (net: the network it was planned for, or its twin).
void apply_fusion(const std::vector<Fusion>& plan, Sequential& net);
// The fusion across the two networks of a training step: G's last layer's Tanh gradient taken by
// D's first layer; empty where G does not end in a convolution with its Tanh fused.
std::vector<Fusion> plan_step_fusion(const Sequential& G, const Sequential& D);
void apply_step_fusion(const std::vector<Fusion>& plan, Sequential& G, Sequential& D);

}  // namespace ge::nn
