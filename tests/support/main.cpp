#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cstdlib>

namespace {
// The tests, and the ganengine processes they start, never read or write the user's cuDNN
// algorithm cache (conv_algo_cache.h): every run searches, as on a fresh machine. The cache's
// own tests name their files.
const int kHermeticAlgoCache = ::setenv("GANENGINE_CUDNN_CACHE", "off", 1);
}  // namespace
