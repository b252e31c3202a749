// Human-readable facts about the build and the devices present: printed by `ganengine info`
// and recorded in benchmark and training logs.
#pragma once
#include <string>
#include <vector>

namespace ge {
std::vector<std::string> system_info_lines();
}
