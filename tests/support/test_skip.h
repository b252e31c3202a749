// Skipped test cases, told apart from passed ones.
//
// A case that cannot run here (no GPU, too few GPUs, an older GPU, a GPU present where the case
// checks the refusal without one) calls GE_SKIP_TEST(reason) and returns. A listener counts the
// skips by reason, and the test binary's main (support/main.cpp) reports them:
//   - a run of exactly one case that skipped exits with kSkipExitCode, which CTest reads as
//     "skipped" (SKIP_RETURN_CODE in CMakeLists.txt);
//   - every run ends with one line "ganengine tests: N ran, P passed, F failed, S skipped" and a
//     line per skip reason (tools/gpu_suite.sh prints them).
// A skip after an assertion of the same case has run is a failure of that case: a skip never hides
// a check that ran (or failed) before it. A case with a part that runs everywhere and a part that
// needs a GPU is two cases.
#pragma once
#include <string>

#include <doctest/doctest.h>

namespace ge::test {

constexpr int kSkipExitCode = 77;

// Records the current case as skipped for `reason` (the reason names what is missing).
void skip_current_case(const std::string& reason);

// The test binary's exit status after a run whose doctest result was `doctest_status`, and the
// summary lines on stdout.
int finish_run(int doctest_status);

}  // namespace ge::test

// Skips the rest of the current case; the reason is a std::string.
#define GE_SKIP_TEST(reason)               \
  do {                                     \
    ::ge::test::skip_current_case(reason); \
    return;                                \
  } while (0)
