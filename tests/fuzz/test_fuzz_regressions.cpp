// The fuzz targets in the normal build: every target reads its own seeds whole (so the fuzzer
// starts inside each format), and every input kept under tests/fuzz_regressions/<target>/ (a
// crash, hang or sanitizer report once, or one of the known hostile files) ends in a
// ge::Error naming the file or in a clean read. Under the debug-asan preset these replays
// are sanitizer checks too.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/fuzz_readers.h"
#include "ganengine/error.h"

using namespace ge;
namespace fs = std::filesystem;

namespace {

struct ScratchDir {
  std::string dir = fuzz::make_scratch_dir();
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

std::string bytes_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string run(const fuzz::Target& t, const std::string& dir, const std::string& bytes) {
  return fuzz::run_target(t, dir, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

// JSON documents are parsed from memory; their errors give a byte position instead of a file.
// Command-line flags are no file: their errors name the flag.
bool is_cli_flags(const fuzz::Target& t) { return std::string(t.name) == "cli_flags"; }
bool names_its_file(const fuzz::Target& t) { return std::string(t.name) != "json" && !is_cli_flags(t); }

// libFuzzer names what it finds crash-<sha1>, timeout-..., oom-..., leak-...; such an input
// may be a valid file once the bug is fixed. Every other file here was made to be refused.
bool found_by_fuzzer(const fs::path& file) {
  const std::string name = file.filename().string();
  for (const char* prefix : {"crash-", "timeout-", "oom-", "leak-", "slow-unit-"})
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

}  // namespace

TEST_CASE("fuzz targets: every target reads its own seeds whole") {
  ScratchDir scratch;
  for (const fuzz::Target& t : fuzz::targets()) {
    CAPTURE(t.name);
    const std::vector<std::string> seeds = fuzz::seed_files(t);
    CHECK(!seeds.empty());
    for (const std::string& seed : seeds) {
      const std::string message = run(t, scratch.dir, seed);
      if (std::string(t.name) == "cifar10_binary")  // a whole batch is 30 MB: the seed is one record
        CHECK(message.find("has 3073 bytes, expected 30730000") != std::string::npos);
      else
        CHECK(message == "");
    }
  }
}

TEST_CASE("fuzz regressions: every kept input ends in a ge::Error naming the file or a clean read") {
  const fs::path root = fs::path(GE_TEST_DATA_DIR) / ".." / "fuzz_regressions";
  REQUIRE(fs::is_directory(root));
  ScratchDir scratch;
  int inputs = 0;
  for (const auto& folder : fs::directory_iterator(root)) {
    if (!folder.is_directory()) continue;
    const fuzz::Target& t = fuzz::target(folder.path().filename().string());  // a folder per target
    std::vector<fs::path> files;
    for (const auto& f : fs::directory_iterator(folder.path())) files.push_back(f.path());
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      CAPTURE(file.string());
      const std::string message = run(t, scratch.dir, bytes_of(file));
      if (!message.empty() && names_its_file(t)) CHECK(message.find(scratch.dir) != std::string::npos);
      if (!message.empty() && is_cli_flags(t)) CHECK(message.find("--") != std::string::npos);
      if (!found_by_fuzzer(file)) CHECK(message != "");  // the known hostile files are all refused
      ++inputs;
    }
  }
  CHECK(inputs > 0);
}
