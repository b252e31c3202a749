// The readers as fuzz targets: each takes a file's bytes, saves them where that reader looks
// and reads them the way training would. A ge::Error is a clean rejection; a crash, a hang,
// a sanitizer report or any other exception is a finding. fuzz/fuzz_<name>.cpp runs one
// target under libFuzzer (tools/fuzz.sh); tests/fuzz/test_fuzz_regressions.cpp replays the
// inputs kept in tests/fuzz_regressions/<name>/ and every target's seeds in the normal build.
// One target reads no file format: cli_flags parses the train command's flags from its input
// (cli_flags_input below), and a ge::Error is the flag refused.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ganengine/trainer.h"
#include "ganengine/training_state.h"

namespace ge::fuzz {

struct Target {
  const char* name;       // fuzz_<name>, tests/fuzz_regressions/<name>/
  const char* file_name;  // what the input is saved as, inside the scratch directory
  void (*read)(const std::string& dir, const std::string& path);
};

const std::vector<Target>& targets();
const Target& target(const std::string& name);  // throws ge::Error for an unknown name

// A fresh directory for one process's inputs (removed by the caller or left in $TMPDIR).
std::string make_scratch_dir();

// Saves the bytes as the target's file in dir and reads it. Returns "" when it was read
// whole, else the ge::Error's message; every other exception passes through.
std::string run_target(const Target& target, const std::string& dir, const uint8_t* data, size_t size);

// The trainer and run settings the training_state target restores into: CPU, 16 x 16
// images, nz 4, two filters a layer (a state file of a few kilobytes).
DcganTrainer& fuzz_trainer();
RunIdentity fuzz_run_identity();

// The cli_flags target's input for these (flag, value) pairs, each flag one of
// cli_numeric_flags() without its dashes (as "--flag=value" when equals, else as two words).
// The input is words split at '\n' and '\0': the first chooses, a byte per later word, which
// numeric flag of `ganengine train` the word is the value of and how it is written; so every
// numeric flag is reached whatever the values.
const std::vector<std::string>& cli_numeric_flags();
std::string cli_flags_input(const std::vector<std::pair<std::string, std::string>>& flags, bool equals);

// Small valid files of the target's format (and a few near misses), for seed corpora.
std::vector<std::string> seed_files(const Target& target);

}  // namespace ge::fuzz
