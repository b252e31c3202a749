// `ganengine train`'s command line into TrainOptions: every flag parsed and every value checked
// before anything runs, so that a bad value fails at once with an error naming the flag, the
// value and what it accepts. It touches no device and reads no file, except with --resume the
// state file whose recorded flags complete the command line (cli/resume_settings.h).
#pragma once
#include <optional>
#include <string>

#include "ganengine/train_loop.h"

namespace ge::cli {

// What the command runs with, and the flags whose meaning depends on the machine.
struct TrainFlags {
  TrainOptions options;        // all but device and cuda_graph, which the machine decides
  std::string device;          // --device as given ("": the GPU when there is one, else the CPU)
  int threads = 0;             // --threads (0: OMP_NUM_THREADS when set, else every core)
  bool cuda_graph = false;     // --cuda-graph was given
  bool no_cuda_graph = false;  // --no-cuda-graph was given
  bool print_precision = false;
};

// argv[0] is the command's own name ("train"). Throws ge::Error for a flag that is unknown,
// misspelt, missing its value or given a value it does not take. With --help, prints the help
// and returns nothing.
std::optional<TrainFlags> parse_train_flags(int argc, const char* const* argv);

}  // namespace ge::cli
