// The body of every fuzz target: one scratch directory per process (removed at exit), and
// the named target of tests/fuzz/fuzz_readers.h run on each input. A ge::Error is the reader
// refusing the input, which is what it should do; anything else ends the run as a finding.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "fuzz/fuzz_readers.h"

namespace ge::fuzz {

inline int fuzz_one(const char* name, const uint8_t* data, size_t size) {
  struct Scratch {
    std::string dir = make_scratch_dir();
    ~Scratch() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  };
  static const Scratch scratch;
  static const Target& chosen = target(name);
  run_target(chosen, scratch.dir, data, size);
  return 0;
}

}  // namespace ge::fuzz
