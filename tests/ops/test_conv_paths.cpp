// The convolution paths' table (kernels/cuda/conv/conv_paths.h) as `ganengine info` prints it:
// the order each pass tries them in. Which path runs a DCGAN layer, and that it computes what
// the CPU reference does, is the GPU tests' part (test_conv.cpp, test_fused_conv.cpp, ...).
#include <string>
#include <vector>

#include "core/backend.h"
#include "support/test_util.h"

using namespace ge;

namespace {

// The path names of one pass's lines ("  2. name: shapes"), in order.
std::vector<std::string> paths_of(const std::vector<std::string>& lines, const std::string& pass) {
  std::vector<std::string> names;
  bool in_pass = false;
  for (const std::string& line : lines) {
    if (line.rfind("  ", 0) != 0) {
      in_pass = line == pass + ":";
      continue;
    }
    if (!in_pass) continue;
    const size_t start = line.find(". ") + 2, end = line.find(" (");
    names.push_back(line.substr(start, end - start));
  }
  return names;
}

}  // namespace

TEST_CASE("conv paths: each pass tries the hand-written paths first and cuDNN last") {
  const std::vector<std::string> lines = gpu::describe_conv_paths();
  if (!built_with_cuda()) {
    CHECK(lines == std::vector<std::string>{"none: this build has no CUDA backend"});
    return;
  }
  CHECK(paths_of(lines, "forward") == std::vector<std::string>{"8-channel direct", "one output per image", "cuDNN"});
  CHECK(paths_of(lines, "backward-data") ==
        std::vector<std::string>{"8-channel direct", "phase-decomposed backward-data on warpgroup MMA",
                                 "one output per image", "one GEMM over the batch", "cuDNN"});
  CHECK(paths_of(lines, "backward-filter") ==
        std::vector<std::string>{"8-channel direct", "one output per image", "one GEMM over the batch", "cuDNN"});
}
