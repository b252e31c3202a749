// The subcommands of the ganengine program; each returns the process exit code.
#pragma once

namespace ge::cli {
const char* version();
int run_info(int argc, char** argv);
}  // namespace ge::cli
