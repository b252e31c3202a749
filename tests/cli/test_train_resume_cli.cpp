// Runs that survive, end to end on the CPU at tiny sizes: SIGTERM saves and exits 143,
// --checkpoint-every saves inside epochs, a killed run's temporaries are removed at the next
// start, --resume FILE alone restores the run's settings, a mixed checkpoint set is refused,
// and damaged training states are refused with messages that name the file.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>

#include "core/backend.h"
#include "ganengine/safetensors.h"
#include "support/cli_runner.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

using namespace ge;
using namespace ge::test;

namespace {

// Tiny networks: 16x16 images, widths 4; FakeData has 1000 images.
const std::string kTiny = "--dataset fake --device cpu --imageSize 16 --ngf 4 --ndf 4 --nz 8 --no-progress ";
const char* const kState = "training_state.safetensors";

bool exists(const std::string& p) { return std::filesystem::exists(p); }

void expect_ok(const CommandResult& r) {
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
}

// Every tensor of both files bitwise equal (metadata such as the checkpoint id may differ).
void expect_same_tensors(const std::string& a, const std::string& b) {
  const auto ta = load_safetensors(a).tensors, tb = load_safetensors(b).tensors;
  REQUIRE(ta.size() == tb.size());
  for (const auto& entry : ta) {
    const std::string& key = entry.first;
    const Tensor& t = entry.second;
    INFO(a, " vs ", b, " key ", key);
    REQUIRE(tb.count(key));
    REQUIRE(tb.at(key).nbytes() == t.nbytes());
    CHECK(std::memcmp(t.data(), tb.at(key).data(), t.nbytes()) == 0);
  }
}

int64_t metadata_int(const std::string& path, const std::string& key) {
  return std::stoll(load_safetensors(path).metadata.at(key));
}

// `ganengine <args>` in the background; once the shell test `ready` holds (checked every 50 ms,
// for at most 60 s), `signal` is sent. exit_code is the program's as the shell reports it
// (128 + N for a process that signal N ended), output its stdout and stderr.
CommandResult run_then_signal(const std::string& args, const std::string& log, const std::string& ready,
                              const char* signal) {
  const std::string script = ganengine_binary() + " " + args + " >" + log + " 2>&1 </dev/null & pid=$!; i=0; " +
                             "while [ $i -lt 1200 ] && ! { " + ready + "; }; do sleep 0.05; i=$((i+1)); done; " +
                             "{ kill -" + signal + " $pid; wait $pid; echo \"exit=$?\"; } 2>/dev/null";
  const CommandResult shell = run_command(script);
  CommandResult r;
  r.output = read_file_bytes(log);
  const size_t at = shell.output.rfind("exit=");
  r.exit_code = at == std::string::npos ? -1 : std::stoi(shell.output.substr(at + 5));
  return r;
}

// A pid no process has: a shell that has exited and been waited for.
std::string dead_pid() {
  const CommandResult r = run_command("sh -c 'echo $$'");
  return std::to_string(std::stol(r.output));
}

}  // namespace

TEST_CASE("train resume cli: SIGTERM finishes the step - saves the set - exits 143 - and the run resumes exactly") {
  TempDir parts("ge_term"), whole("ge_term_whole");
  const std::string flags = kTiny + "--batchSize 8 --niter 1000 --opt-level O0 ";
  const CommandResult r = run_then_signal("train " + flags + "--outf " + parts.dir.string(), parts.file("log.txt"),
                                          "grep -q '^\\[0/1000\\]\\[3/' " + parts.file("log.txt"), "TERM");
  INFO(r.output);
  REQUIRE(r.exit_code == 143);
  CHECK(r.output.find("stopped by SIGTERM") != std::string::npos);
  CHECK(r.output.find("interrupted: state saved to") != std::string::npos);
  REQUIRE(exists(parts.file(kState)));
  for (const auto& name : parts.entries()) CHECK(name.find(".tmp.") == std::string::npos);
  const int64_t done = metadata_int(parts.file(kState), "global_step");
  const int64_t epoch = metadata_int(parts.file(kState), "epoch");
  CHECK(done >= 4);
  // The set of the epoch the run stopped in carries the state's checkpoint id.
  const std::string netG = "netG_epoch_" + std::to_string(epoch) + ".safetensors";
  CHECK(load_safetensors(parts.file(netG)).metadata.at("checkpoint_id") ==
        load_safetensors(parts.file(kState)).metadata.at("checkpoint_id"));

  // The state alone continues it; bitwise the run that was never stopped.
  const std::string until = std::to_string(done + 3);
  const CommandResult resumed =
      run_ganengine("train --resume " + parts.file(kState) + " --outf " + parts.dir.string() + " --max-steps " + until);
  expect_ok(resumed);
  CHECK(resumed.output.find("done: 3 steps") != std::string::npos);
  expect_ok(run_ganengine("train " + flags + "--max-steps " + until + " --outf " + whole.dir.string()));
  expect_same_tensors(whole.file(kState), parts.file(kState));
  const std::string final_epoch_file =
      "netG_epoch_" + std::to_string((done + 3 - 1) / 125) + ".safetensors";  // the epoch of the last step
  expect_same_tensors(whole.file(final_epoch_file), parts.file(final_epoch_file));
}

TEST_CASE("train resume cli: --resume FILE alone restores every setting - safe flags may change - others are refused") {
  TempDir first("ge_alone"), whole("ge_alone_whole"), elsewhere("ge_alone_else");
  // Settings away from their defaults, so that falling back to a default would show.
  const std::string flags =
      "--dataset fake --device cpu --imageSize 16 --ngf 4 --ndf 8 --nz 6 --batchSize 6 "
      "--opt-level O0 --lr 0.001 --beta1 0.6 --manualSeed 7 --no-progress ";
  expect_ok(run_ganengine("train " + flags + "--max-steps 2 --outf " + first.dir.string()));
  const std::string state = first.file(kState);

  // Nothing but the file (and how long to run): the run continues with its own settings.
  const CommandResult resumed = run_ganengine("train --resume " + state + " --max-steps 5 --log-interval 2");
  expect_ok(resumed);
  INFO(resumed.output);
  CHECK(resumed.output.find("resumed from") != std::string::npos);
  CHECK(resumed.output.find("changed: --max-steps 5 --log-interval 2") != std::string::npos);
  CHECK(resumed.output.find("done: 3 steps") != std::string::npos);
  expect_ok(run_ganengine("train " + flags + "--max-steps 5 --outf " + whole.dir.string()));
  expect_same_tensors(whole.file(kState), state);
  expect_same_tensors(whole.file("netG_epoch_0.safetensors"), first.file("netG_epoch_0.safetensors"));

  // Flags given with the same values are fine; another --outf is a path that may change.
  expect_ok(run_ganengine("train --resume " + state + " --lr 1e-3 --opt-level O0 --max-steps 6 --outf " +
                          elsewhere.dir.string()));
  CHECK(metadata_int(elsewhere.file(kState), "global_step") == 6);

  // A setting that would make it another run is refused, every difference listed.
  const CommandResult refused = run_ganengine("train --resume " + state + " --lr 0.01 --batchSize 8 --max-steps 9");
  INFO(refused.output);
  CHECK(refused.exit_code == 1);
  CHECK(refused.output.find("--lr: the run has 0.001, this command gives 0.01") != std::string::npos);
  CHECK(refused.output.find("--batchSize: the run has 6, this command gives 8") != std::string::npos);
  CHECK(refused.output.find("--max-steps:") == std::string::npos);
  CHECK(metadata_int(state, "global_step") == 5);  // untouched

  // A relative --outf recorded from another working directory: the state's own folder is used.
  expect_ok(run_command("cd " + elsewhere.dir.string() + " && " + ganengine_binary() + " train " + kTiny +
                        "--batchSize 8 --max-steps 1 --outf relative </dev/null 2>&1"));
  expect_ok(
      run_ganengine("train --resume " + elsewhere.file("relative/training_state.safetensors") + " --max-steps 2"));
  CHECK(metadata_int(elsewhere.file("relative/training_state.safetensors"), "global_step") == 2);
}

TEST_CASE("train resume cli: a run started without --device resumes with --device naming the default - not another") {
  TempDir tmp("ge_default_device");
  const std::string tiny = "--dataset fake --imageSize 16 --ngf 4 --ndf 4 --nz 8 --batchSize 4 --no-progress ";
  expect_ok(run_ganengine("train " + tiny + "--max-steps 1 --outf " + tmp.dir.string()));
  const std::string state = tmp.file(kState);
  // The reference loops are another backend: refused, as any other setting.
  const CommandResult other = run_ganengine("train --resume " + state + " --device cpu-reference --max-steps 2");
  INFO(other.output);
  CHECK(other.exit_code == 1);
  CHECK(other.output.find("--device: the run has (none), this command gives cpu-reference") != std::string::npos);
  CHECK(metadata_int(state, "global_step") == 1);
  // Where the run went without --device: the GPU when there is one, else the CPU (whose warning
  // says to pass --device cpu).
  const std::string default_device = cuda_available() ? "cuda:0" : "cpu";
  expect_ok(run_ganengine("train --resume " + state + " --device " + default_device + " --max-steps 2"));
  CHECK(metadata_int(state, "global_step") == 2);
}

TEST_CASE("train resume cli: a mixed checkpoint set is refused naming the file - the state alone still resumes") {
  TempDir a("ge_mixed_a"), b("ge_mixed_b");
  const std::string flags = kTiny + "--batchSize 8 --opt-level O0 ";
  expect_ok(run_ganengine("train " + flags + "--max-steps 2 --outf " + a.dir.string()));
  expect_ok(run_ganengine("train " + flags + "--max-steps 3 --outf " + b.dir.string()));
  // netG of a later save beside the state of an earlier one: what a save that stopped between
  // its renames would leave.
  std::filesystem::copy_file(b.file("netG_epoch_0.safetensors"), a.file("netG_epoch_0.safetensors"),
                             std::filesystem::copy_options::overwrite_existing);
  const CommandResult mixed = run_ganengine("train --resume " + a.file(kState) + " --max-steps 4");
  INFO(mixed.output);
  CHECK(mixed.exit_code == 1);
  CHECK(mixed.output.find("is mixed: " + a.file("netG_epoch_0.safetensors") + " belongs to save step3-") !=
        std::string::npos);
  CHECK(mixed.output.find(".cpp:") == std::string::npos);
  // The state holds the weights itself: with the stray file moved away it resumes.
  std::filesystem::rename(a.file("netG_epoch_0.safetensors"), a.file("stray.safetensors"));
  expect_ok(run_ganengine("train --resume " + a.file(kState) + " --max-steps 4"));
  CHECK(metadata_int(a.file(kState), "global_step") == 4);
}

TEST_CASE("train resume cli: --checkpoint-every saves inside epochs - a killed run resumes from there exactly") {
  TempDir counted("ge_every");
  // Every 3 steps: after steps 3 and 6 inside epoch 0 (125 batches of 8), then the stop at 7.
  const CommandResult every = run_ganengine("train " + kTiny + "--batchSize 8 --max-steps 7 --checkpoint-every 3 " +
                                            "--outf " + counted.dir.string());
  expect_ok(every);
  CHECK(every.output.find("checkpoint: training state at step 3 (epoch 0, iteration 3)") != std::string::npos);
  CHECK(every.output.find("checkpoint: training state at step 6 (epoch 0, iteration 6)") != std::string::npos);
  CHECK(every.output.find("at step 7 (") == std::string::npos);

  // SIGKILL once the first mid-epoch state is on disk: nothing runs to save more.
  TempDir parts("ge_killed"), whole("ge_killed_whole");
  const std::string flags = kTiny + "--batchSize 4 --niter 1000 --opt-level O0 --checkpoint-every 20 ";
  const CommandResult killed = run_then_signal("train " + flags + "--outf " + parts.dir.string(), parts.file("log.txt"),
                                               "[ -e " + parts.file(kState) + " ]", "KILL");
  INFO(killed.output);
  REQUIRE(killed.exit_code == 137);
  const int64_t done = metadata_int(parts.file(kState), "global_step");
  CHECK(done % 20 == 0);
  CHECK(metadata_int(parts.file(kState), "iteration") == done % 250);  // inside epoch 0 or 1, not at its end
  CHECK(metadata_int(parts.file(kState), "iteration") != 0);
  // What a write cut short by SIGKILL leaves: a temporary of a process that no longer runs.
  const std::string stale = "netG_epoch_0.safetensors.tmp." + dead_pid();
  write_file_bytes(parts.file(stale), "half a file");
  write_file_bytes(parts.file("notes.tmp.txt"), "not a temporary of ours");

  const std::string until = std::to_string(done + 5);
  const CommandResult resumed =
      run_ganengine("train --resume " + parts.file(kState) + " --max-steps " + until + " --outf " + parts.dir.string());
  expect_ok(resumed);
  INFO(resumed.output);
  // (The killed run may have left a temporary of its own too.)
  CHECK(resumed.output.find("unfinished file") != std::string::npos);
  CHECK(resumed.output.find(stale) != std::string::npos);
  CHECK_FALSE(exists(parts.file(stale)));
  CHECK(exists(parts.file("notes.tmp.txt")));
  expect_ok(run_ganengine("train " + flags + "--max-steps " + until + " --outf " + whole.dir.string()));
  expect_same_tensors(whole.file(kState), parts.file(kState));
}

TEST_CASE("train resume cli: a damaged metrics.jsonl does not block a resume - it is named and its bad lines dropped") {
  TempDir tmp("ge_metrics");
  expect_ok(run_ganengine("train " + kTiny + "--batchSize 8 --max-steps 2 --outf " + tmp.dir.string()));
  std::string metrics = read_file_bytes(tmp.file("metrics.jsonl"));
  write_file_bytes(tmp.file("metrics.jsonl"), metrics + "{\"step\": 1x, \"epoch\"\ngarbage\n");
  const CommandResult r = run_ganengine("train --resume " + tmp.file(kState) + " --max-steps 3");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("warning: " + tmp.file("metrics.jsonl") + " line 3 is not a metrics record; dropped") !=
        std::string::npos);
  CHECK(r.output.find("2 damaged lines") != std::string::npos);
  metrics = read_file_bytes(tmp.file("metrics.jsonl"));
  CHECK(metrics.find("garbage") == std::string::npos);
  CHECK(std::count(metrics.begin(), metrics.end(), '\n') == 3);  // steps 0, 1 and the resumed 2
}

TEST_CASE("train resume cli: a damaged training state is refused with the file and the field named") {
  TempDir tmp("ge_damaged");
  expect_ok(run_ganengine("train " + kTiny + "--batchSize 8 --max-steps 2 --outf " + tmp.dir.string()));
  const SafeTensorsFile good = load_safetensors(tmp.file(kState));
  struct Case {
    const char* name;
    std::string key;    // metadata key to change, or "" for a tensor
    std::string value;  // its new value
    std::string expect;
  };
  const Case cases[] = {
      {"iteration past the epoch", "iteration", "125", "iteration 125 is beyond epoch 0's last batch (124"},
      {"trailing characters", "iteration", "1x", "metadata iteration is '1x' (expected a whole number >= 0"},
      {"INT64_MIN step", "global_step", "-9223372036854775808", "metadata global_step is '-9223372036854775808'"},
      {"negative epoch", "epoch", "-1", "metadata epoch is '-1'"},
      {"loss scale", "", "scaler1", "the loss scaler of errD_fake holds (nan"},
      {"u8 fixed noise", "", "fixed_noise", "fixed_noise is u8"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    SafeTensorsFile f = good;
    if (!c.key.empty()) {
      f.metadata[c.key] = c.value;
    } else if (c.value == "scaler1") {
      f.tensors["scaler1"] = Tensor::from_doubles({std::nan(""), 0.0}, {2}, DType::F32);
    } else {
      const Tensor& noise = good.tensors.at("fixed_noise");
      f.tensors["fixed_noise"] = Tensor::zeros(noise.shape(), DType::U8);
    }
    const std::string path = tmp.file(std::string("damaged_") + std::to_string(&c - cases) + ".safetensors");
    save_safetensors(path, f.tensors, f.metadata);
    const CommandResult r =
        run_ganengine("train --resume " + path + " --outf " + tmp.file("out") + " --overwrite --max-steps 3");
    INFO(r.output);
    CHECK(r.exit_code == 1);
    CHECK(r.output.find(path) != std::string::npos);
    CHECK(r.output.find(c.expect) != std::string::npos);
    CHECK(r.output.find(".cpp:") == std::string::npos);
  }
}
