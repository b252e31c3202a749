// Writes each fuzz target's seed corpus: make_seeds OUT_DIR creates OUT_DIR/<target>/seed_<i>
// for every target of tests/fuzz/fuzz_readers.h (tools/fuzz.sh runs it before the fuzzers).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz/fuzz_readers.h"
#include "ganengine/error.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds OUT_DIR\n");
    return 2;
  }
  try {
    for (const ge::fuzz::Target& t : ge::fuzz::targets()) {
      const std::filesystem::path dir = std::filesystem::path(argv[1]) / t.name;
      std::filesystem::create_directories(dir);
      int i = 0;
      for (const std::string& seed : ge::fuzz::seed_files(t)) {
        std::ofstream out(dir / ("seed_" + std::to_string(i++)), std::ios::binary);
        out.write(seed.data(), static_cast<std::streamsize>(seed.size()));
        if (!out) ge::fail("cannot write a seed under ", dir.string());
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
