#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdlib>

#include "core/cpu_backend.h"
#include "support/test_skip.h"

namespace {
// The tests, and the ganengine processes they start, never read or write the user's cuDNN
// algorithm cache (conv_algo_cache.h): every run searches, as on a fresh machine. The cache's
// own tests name their files.
const int kHermeticAlgoCache = ::setenv("GANENGINE_CUDNN_CACHE", "off", 1);
}  // namespace

int main(int argc, char** argv) {
  // The unit suite checks the CPU reference; the fast backend's tests switch to it with
  // ScopedCpuBackend (core/cpu_backend.h).
  ge::set_cpu_backend(ge::CpuBackend::Reference);
  doctest::Context context(argc, argv);
  const int status = context.run();
  if (context.shouldExit()) return status;  // --help, --list-test-cases and the like
  return ge::test::finish_run(status);
}
