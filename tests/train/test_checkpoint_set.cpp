// The checkpoint set (train/checkpoint_set.h) and the removal of stale temporaries
// (io/atomic_file.h): a set whose writing fails leaves the previous set whole, a mixed set is
// named at resume, and only the temporaries of processes that no longer run are removed.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>

#include "core/stop_signal.h"
#include "ganengine/error.h"
#include "ganengine/safetensors.h"
#include "io/atomic_file.h"
#include "support/temp_dir.h"
#include "support/test_util.h"
#include "train/checkpoint_set.h"
#include "train/run_flags.h"

using namespace ge;
using namespace ge::test;

namespace {

CheckpointFile file_of(const std::string& path, double value) {
  return {path, {{"w", Tensor::from_doubles({value, value}, {2}, DType::F32)}}, {}};
}

double value_in(const std::string& path) { return load_safetensors(path).tensors.at("w").to_doubles()[0]; }

// A pid that no process has any more: a child that has exited and been reaped.
pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

}  // namespace

TEST_CASE("checkpoint set: every file carries the id - the state lists the others - a failed write keeps the old set") {
  TempDir tmp("ge_set");
  const std::string g = tmp.file("netG_epoch_0.safetensors"), d = tmp.file("netD_epoch_0.safetensors"),
                    state = tmp.file("training_state.safetensors");
  write_checkpoint_set({file_of(g, 1), file_of(d, 1), file_of(state, 1)}, "first");
  for (const std::string& p : {g, d, state}) CHECK(load_safetensors(p).metadata.at(kCheckpointIdKey) == "first");
  const auto meta = load_safetensors(state).metadata;
  CHECK(meta.at(kCheckpointFilesKey) == "netG_epoch_0.safetensors,netD_epoch_0.safetensors");
  CHECK_NOTHROW(verify_checkpoint_set(state, meta));

  // The state cannot be written (its place is taken by a directory): nothing of the new set
  // replaces the old one, and no temporary stays behind.
  std::filesystem::remove(state);
  std::filesystem::create_directories(state + ".tmp." + std::to_string(::getpid()));
  CHECK_THROWS_AS(write_checkpoint_set({file_of(g, 2), file_of(d, 2), file_of(state, 2)}, "second"), Error);
  CHECK(value_in(g) == 1);
  CHECK(value_in(d) == 1);
  std::filesystem::remove(state + ".tmp." + std::to_string(::getpid()));
  for (const auto& name : tmp.entries()) CHECK(name.find(".tmp.") == std::string::npos);
}

TEST_CASE("checkpoint set: a file of another save beside the state is named - a missing one is not an error") {
  TempDir tmp("ge_set_mixed");
  const std::string g = tmp.file("netG_epoch_3.safetensors"), d = tmp.file("netD_epoch_3.safetensors"),
                    state = tmp.file("training_state.safetensors");
  write_checkpoint_set({file_of(g, 1), file_of(d, 1), file_of(state, 1)}, "early");
  const auto meta = load_safetensors(state).metadata;
  write_checkpoint_set({file_of(d, 2)}, "late");  // netD alone from a later save
  try {
    verify_checkpoint_set(state, meta);
    FAIL("a mixed set passed");
  } catch (const Error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find(d + " belongs to save late but " + state + " to save early") != std::string::npos);
  }
  std::filesystem::remove(d);
  CHECK_NOTHROW(verify_checkpoint_set(state, meta));
  // A state written alone (mid-epoch) lists no files.
  write_checkpoint_set({file_of(state, 3)}, "alone");
  const auto alone = load_safetensors(state).metadata;
  CHECK(alone.at(kCheckpointFilesKey).empty());
  CHECK_NOTHROW(verify_checkpoint_set(state, alone));
}

TEST_CASE("atomic files: stale temporaries of dead processes are removed - live ones and other names are kept") {
  TempDir tmp("ge_stale");
  const std::string dead = std::to_string(dead_pid());
  const std::string mine = std::to_string(::getpid());
  const std::string parent = std::to_string(::getppid());  // alive: it runs this test
  for (const std::string& name :
       std::vector<std::string>{"netG_epoch_1.safetensors.tmp." + dead, "metrics.jsonl.tmp." + dead,
                                "state.tmp." + mine, "state.tmp." + parent, "notes.tmp.txt", "x.tmp.", "plain"})
    write_file_bytes(tmp.file(name), "x");
  std::vector<std::string> removed = remove_stale_temporaries(tmp.dir.string());
  std::sort(removed.begin(), removed.end());
  CHECK(removed == std::vector<std::string>{"metrics.jsonl.tmp." + dead, "netG_epoch_1.safetensors.tmp." + dead});
  std::vector<std::string> kept = {"notes.tmp.txt", "plain", "state.tmp." + mine, "state.tmp." + parent, "x.tmp."};
  std::sort(kept.begin(), kept.end());
  CHECK(tmp.entries() == kept);
  CHECK(remove_stale_temporaries(tmp.file("missing")).empty());
}

TEST_CASE("stop signal: SIGTERM and SIGINT are recorded inside the scope - the previous handlers come back after") {
  struct sigaction before {};
  sigaction(SIGTERM, nullptr, &before);
  {
    const StopSignalScope scope;
    CHECK(stop_signal() == 0);
    std::raise(SIGTERM);
    CHECK(stop_signal() == SIGTERM);
    std::raise(SIGINT);  // a second, other signal does not replace the first
    CHECK(stop_signal() == SIGTERM);
    CHECK(std::string(stop_signal_name(SIGTERM)) == "SIGTERM");
  }
  {
    const StopSignalScope scope;  // each scope starts clear
    CHECK(stop_signal() == 0);
    std::raise(SIGINT);
    CHECK(stop_signal() == SIGINT);
    // The same request delivered twice at once (coreutils' timeout signals the child, then its
    // process group): the copy is ignored, the process lives on to save. Without that rule
    // this raise would end the test binary.
    std::raise(SIGINT);
    CHECK(stop_signal() == SIGINT);
  }
  struct sigaction now {};
  sigaction(SIGTERM, nullptr, &now);
  CHECK(reinterpret_cast<void*>(now.sa_handler) == reinterpret_cast<void*>(before.sa_handler));
}

TEST_CASE("run flags: recorded flags round-trip - per-invocation flags and line breaks are left out") {
  const FlagValues flags = {{"lr", "0.001"},           {"resume", "x.safetensors"}, {"outf", "a\nb"}, {"tf32", "true"},
                            {"netG", "g.safetensors"}, {"loss-scale", ""},          {"niter", "25"}};
  const FlagValues back = decode_run_flags(encode_run_flags(flags));
  CHECK(back == FlagValues{{"lr", "0.001"}, {"tf32", "true"}, {"loss-scale", ""}, {"niter", "25"}});
  CHECK(may_change_on_resume("max-steps"));
  CHECK_FALSE(may_change_on_resume("lr"));
  CHECK_FALSE(is_recorded_flag("overwrite"));
}
