// `ganengine info`: what this build can do here, and a smoke test of each backend.
#include <cstdio>

#include "cli/commands.h"
#include "ganengine/backend.h"
#include "ganengine/system_info.h"

namespace ge::cli {

const char* version() { return "0.1.0"; }

int run_info(int, char**) {
  std::printf("ganengine %s\n", version());
  for (const auto& line : system_info_lines()) std::printf("%s\n", line.c_str());
  return 0;
}

}  // namespace ge::cli
