// The CLI's CPU backends: --device cpu runs the fast backend (where built) and says so,
// --device cpu-reference the reference loops, --threads is checked, and `info` names both.
#include <doctest/doctest.h>

#include "core/cpu_backend.h"
#include "support/cli_runner.h"
#include "support/temp_dir.h"

using namespace ge;
using namespace ge::test;

namespace {
CommandResult train_on(const std::string& device, const TempDir& out) {
  return run_ganengine(
      "train --dataset fake --batchSize 8 --imageSize 16 --ngf 8 --ndf 8 --nz 10 --max-steps 2 "
      "--opt-level O0 --threads 1 --no-progress --no-tensorboard --device " +
      device + " --outf " + out.file("run"));
}
}  // namespace

TEST_CASE("cpu fast step cli: device cpu and cpu-reference say which backend trains") {
  TempDir fast_dir, ref_dir;
  const CommandResult fast = train_on("cpu", fast_dir);
  INFO(fast.output);
  REQUIRE(fast.exit_code == 0);
  CHECK(fast.output.find(cpu_fast_built() ? "cpu: oneDNN " : "cpu: reference loops") != std::string::npos);
  if (cpu_fast_built()) CHECK(fast.output.find(", 1 threads;") != std::string::npos);

  const CommandResult ref = train_on("cpu-reference", ref_dir);
  INFO(ref.output);
  REQUIRE(ref.exit_code == 0);
  // A build without oneDNN adds why the loops run.
  CHECK(ref.output.find(cpu_fast_built() ? "cpu: reference loops (kernels/cpu); fp32"
                                         : "cpu: reference loops (kernels/cpu): this build has no oneDNN; fp32") !=
        std::string::npos);
}

TEST_CASE("cpu fast step cli: a negative thread count is named and info lists the CPU backend") {
  TempDir out;
  const CommandResult bad = run_ganengine("train --dataset fake --device cpu --threads -2 --outf " + out.file("run"));
  INFO(bad.output);
  CHECK(bad.exit_code != 0);
  CHECK(bad.output.find("--threads -2") != std::string::npos);

  const CommandResult info = run_ganengine("info");
  INFO(info.output);
  REQUIRE(info.exit_code == 0);
  CHECK(info.output.find("cpu backend (--device cpu): ") != std::string::npos);
  CHECK(info.output.find("cpu features: ") != std::string::npos);
}

TEST_CASE("cpu fast step cli: bench on the cpu times each opt level") {
  const CommandResult r = run_ganengine(
      "bench --device cpu --threads 1 --opt-level O0,O2 --batch-sizes 4 --imageSize 16 --ngf 8 --ndf 8 --nz 10 "
      "--warmup 1 --steps 2 --windows 1");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  for (const char* row : {"O0 batch     4:", "O2 batch     4:"}) {
    const size_t at = r.output.find(row);
    REQUIRE(at != std::string::npos);
    const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
    CHECK(line.find(" ms/step ") != std::string::npos);
    CHECK(line.find(" images/s ") != std::string::npos);
    CHECK(line.find(" GFLOP/s ") != std::string::npos);
    CHECK(line.find("NON-FINITE") == std::string::npos);
  }
}
