// kernel_launch.cuh's switch (this file is compiled by the host compiler, which does not read
// that header's device code).
#include <atomic>

#include "ganengine/backend.h"
#include "ganengine/env_choice.h"

namespace ge {
namespace gpu {
namespace {
std::atomic<EarlyLaunch> early_launch{EarlyLaunch::FromEnv};
}

void set_early_launch(EarlyLaunch choice) { early_launch = choice; }

bool programmatic_launch_enabled() {
  static const bool env_on = env_choice("GANENGINE_PDL", {"on", "off"}) == "on";
  const EarlyLaunch choice = early_launch.load(std::memory_order_relaxed);
  return choice == EarlyLaunch::FromEnv ? env_on : choice == EarlyLaunch::On;
}

}  // namespace gpu
}  // namespace ge
