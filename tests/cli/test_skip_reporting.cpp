// How the test binary reports skipped cases (support/test_skip.h), run as CTest and
// tools/gpu_suite.sh run it: a child process of this same binary on the fixture cases
// (support/test_skip_fixtures.cpp).
#include <unistd.h>

#include <string>

#include "support/cli_runner.h"
#include "support/test_skip.h"
#include "support/test_util.h"

namespace {

ge::test::CommandResult run_fixtures(const std::string& filter) {
  return ge::test::run_command("/proc/" + std::to_string(::getpid()) + "/exe --no-skip -tc='skip fixture: " + filter +
                               "' 2>&1");
}

}  // namespace

TEST_CASE("test skips: one case that skips first exits with the code CTest reads as skipped") {
  const auto r = run_fixtures("a skip before any assertion");
  INFO(r.output);
  CHECK(r.exit_code == ge::test::kSkipExitCode);
  CHECK(r.output.find("ganengine tests: 1 ran, 0 passed, 0 failed, 1 skipped") != std::string::npos);
  CHECK(r.output.find("ganengine tests: skipped 1: the fixture's reason") != std::string::npos);
}

TEST_CASE("test skips: a skip after an assertion is a failure - passing or failing") {
  for (const char* fixture : {"a skip after a passing assertion", "a skip after a failing assertion"}) {
    const auto r = run_fixtures(fixture);
    INFO(fixture, "\n", r.output);
    CHECK(r.exit_code == 1);
    CHECK(r.output.find("a skip must come first") != std::string::npos);
    CHECK(r.output.find("ganengine tests: 1 ran, 0 passed, 1 failed, 0 skipped") != std::string::npos);
  }
}

TEST_CASE("test skips: a run of several cases counts ran passed failed and skipped and exits 0 when none failed") {
  const auto r = run_fixtures("a skip before any assertion,skip fixture: a passing case");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("ganengine tests: 2 ran, 1 passed, 0 failed, 1 skipped") != std::string::npos);
}
