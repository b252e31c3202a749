// The GPU-host scripts (tools/gpu_env.sh and what sources it) find the binaries a user has:
// staged in .carry/ by tools/stage_gpu.sh, or built on the host by tools/build.sh. These cases
// need no GPU: they stop before anything touches one.
#include <filesystem>

#include "support/cli_runner.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

using namespace ge::test;

namespace {
std::string repository_root() {
  return std::filesystem::weakly_canonical(std::filesystem::path(data_path("")) / ".." / "..").string();
}

void make_executable(const std::string& path) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  write_file_bytes(path, "#!/bin/sh\nexit 0\n");
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
}

// The folder tools/gpu_env.sh picks when sourced in `dir` with GE_BIN_DIR unset.
std::string chosen_bin_dir(const TempDir& dir) {
  const CommandResult r = run_command("cd " + dir.dir.string() + " && env -u GE_BIN_DIR bash -c \"source " +
                                      repository_root() + "/tools/gpu_env.sh && echo \\$GE_BIN_DIR\"");
  REQUIRE(r.exit_code == 0);
  return r.output.substr(0, r.output.find('\n'));
}
}  // namespace

TEST_CASE("gpu host scripts: staged binaries first and the host build after them") {
  TempDir dir("ge_scripts");
  make_executable(dir.file("build/ganengine"));
  CHECK(chosen_bin_dir(dir) == dir.file("build"));
  make_executable(dir.file(".carry/ganengine"));
  CHECK(chosen_bin_dir(dir) == dir.file(".carry"));
}

TEST_CASE("gpu host scripts: without the binaries they say where to get them and stop") {
  TempDir dir("ge_scripts");
  // GE_BINARY (which gpu_suite.sh exports for the scripts it runs) would name the binary itself.
  // The timeout: were the check gone, the suite would run itself from here.
  const std::string env =
      "env -u GE_BINARY GE_BIN_DIR=" + dir.file("empty") + " OUT=" + dir.file("logs") + " timeout 60 ";
  for (const std::string script : {"gpu_suite.sh", "gpu_train_check.sh"}) {
    const CommandResult r = run_command(env + repository_root() + "/tools/" + script + " </dev/null 2>&1");
    INFO(script, "\n", r.output);
    CHECK(r.exit_code == 2);
    CHECK(r.output.find(dir.file("empty") + "/ganengine not found: build it here with tools/build.sh") !=
          std::string::npos);
  }
}
