// The fusion plan (src/nn/fusion_plan.h): which layers of the DCGAN's networks do part of their
// neighbours' work. The GPU and CPU tests of each fused op check that the work is bitwise the
// same; these check that the plan links exactly the layers the example's networks allow.
#include <string>
#include <vector>

#include "ganengine/nn.h"
#include "nn/fusion_plan.h"
#include "support/test_util.h"

using namespace ge;
using namespace ge::nn;

namespace {

std::vector<std::string> described(const std::vector<Fusion>& plan) {
  std::vector<std::string> out;
  for (const Fusion& f : plan) out.push_back(f.describe());
  return out;
}

struct Networks {
  PrecisionPolicy policy = resolve_policy(OptLevel::O2);
  Placement where = Placement::for_device(Device::cpu(), policy.compute_dtype);
  std::unique_ptr<Sequential> G, D;
  explicit Networks(int image_size) {
    NetConfig cfg;
    cfg.image_size = image_size;
    G = make_generator(cfg, policy, where);
    D = make_discriminator(cfg, policy, where);
  }
};

}  // namespace

TEST_CASE("fusion plan: the generator's BatchNorms take their ReLUs and their convolutions' moments") {
  Networks n(64);
  CHECK(described(n.G->fusion()) == std::vector<std::string>{
                                        "activation into BatchNorm: layer 1 -> 2",
                                        "activation into BatchNorm: layer 4 -> 5",
                                        "activation into BatchNorm: layer 7 -> 8",
                                        "activation into BatchNorm: layer 10 -> 11",
                                        "activation into convolution: layer 12 -> 13",
                                        "moments formed for BatchNorm: layer 0 -> 1",
                                        "moments formed for BatchNorm: layer 3 -> 4",
                                        "moments formed for BatchNorm: layer 6 -> 7",
                                        "moments formed for BatchNorm: layer 9 -> 10",
                                    });
  // Applied: G's last layer runs its Tanh, and the Tanh layer passes values through.
  auto& layers = n.G->layers();
  const auto* g_last = static_cast<const Conv2d*>(layers[12].get());
  REQUIRE(g_last->fused_activation().has_value());
  CHECK(g_last->fused_activation()->kind == ops::Activation::Tanh);
  CHECK(static_cast<const Conv2d*>(layers[3].get())->moments_for() == static_cast<BatchNorm2d*>(layers[4].get()));
}

TEST_CASE("fusion plan: the discriminator's last BatchNorm forms the last layer's output") {
  Networks n(64);
  CHECK(described(n.D->fusion()) == std::vector<std::string>{
                                        "activation into convolution: layer 0 -> 1",
                                        "activation into BatchNorm: layer 3 -> 4",
                                        "activation into BatchNorm: layer 6 -> 7",
                                        "activation into BatchNorm: layer 9 -> 10",
                                        "last layer's output formed by BatchNorm: layer 9 -> 11",
                                    });
  auto& layers = n.D->layers();
  CHECK(static_cast<const BatchNorm2d*>(layers[9].get())->dots_for() == static_cast<Conv2d*>(layers[11].get()));
}

TEST_CASE("fusion plan: a training step routes G's Tanh gradient into D's first layer") {
  for (int size : {16, 32, 64, 128}) {
    INFO(size);
    Networks n(size);
    const std::vector<Fusion> step = plan_step_fusion(*n.G, *n.D);
    REQUIRE(step.size() == 1);
    CHECK(step[0].describe() ==
          "Tanh gradient into D's first layer: layer " + std::to_string(n.G->layers().size() - 2) + " -> 0");
  }
  // A generator whose last layer does not run its Tanh gives no step fusion.
  Sequential g;
  const PrecisionPolicy policy = resolve_policy(OptLevel::O0);
  g.add(std::make_unique<Conv2d>(8, 3, 4, 2, 1, true, policy, Placement{}));
  g.add(std::make_unique<ActivationLayer>(ops::Activation::Tanh));
  Networks n(32);
  CHECK(plan_step_fusion(g, *n.D).empty());
}

TEST_CASE("fusion plan: a twin is fused and linked to its own layers as its network is") {
  Networks n(32);
  auto twin = n.D->twin();
  CHECK(described(twin->fusion()) == described(n.D->fusion()));
  auto& layers = twin->layers();
  const size_t last = layers.size() - 1;
  CHECK(static_cast<const BatchNorm2d*>(layers[last - 2].get())->dots_for() ==
        static_cast<Conv2d*>(layers[last].get()));
  CHECK(static_cast<const BatchNorm2d*>(n.D->layers()[last - 2].get())->dots_for() ==
        static_cast<Conv2d*>(n.D->layers()[last].get()));
}
