// What the CLI says about input it cannot use or that does something a user might not expect:
// each message names the flag or file and what was expected, never an internal check's source
// path, and nothing that was silently accepted before goes by without an error or a note.
#include <cmath>
#include <filesystem>

#include "cli/error_text.h"
#include "core/backend.h"
#include "ganengine/safetensors.h"
#include "support/cli_runner.h"
#include "support/image_files.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

using namespace ge;
using namespace ge::test;

namespace {

const std::string kTiny = "--dataset fake --device cpu --imageSize 16 --ngf 4 --ndf 4 --nz 8 --no-progress ";

void expect_clear_error(const CommandResult& r, const std::string& expect) {
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK(r.output.find(expect) != std::string::npos);
  CHECK(r.output.find(".cpp:") == std::string::npos);
  CHECK(r.output.size() < 2000);
}

}  // namespace

TEST_CASE("cli messages: train flags that overflow or mean nothing are refused naming the flag") {
  TempDir tmp("ge_msg_flags");
  struct Case {
    std::string args;
    std::string expect;
  };
  const Case cases[] = {
      {"--batchSize 2305843009213693953 --nz 8", "--batchSize x --nz (noise values per step): 2305843009213693953 x 8"},
      {"--batchSize 4611686018427387904 --nz 1", "--batchSize x --nz is too large (4611686018427387904 noise values"},
      {"--max-steps -5", "--max-steps -5 (expected a number of steps >= 0, or -1 for no limit)"},
      {"--lr nan", "--lr 'nan' is not a valid value (expected a number"},
      {"--imageSize 99999999999", "--imageSize '99999999999' is out of range"},
      {"--imageSize=99999999999", "--imageSize '99999999999' is out of range"},
      {"--checkpoint-every 5x", "--checkpoint-every '5x' (expected N steps, or a time such as 90s, 10m or 2h"},
      {"--checkpoint-every -3", "--checkpoint-every '-3'"},
  };
  for (const Case& c : cases) {
    INFO(c.args);
    expect_clear_error(run_ganengine("train " + kTiny + "--outf " + tmp.file("out") + " " + c.args), c.expect);
  }
  CHECK_FALSE(std::filesystem::exists(tmp.file("out/training_state.safetensors")));
}

TEST_CASE("cli messages: --ngpu on a machine without GPUs does not blame a --device the user never gave") {
  if (cuda_available()) {
    MESSAGE("a GPU is present: --ngpu 2 is not refused for want of one here");
    return;
  }
  const CommandResult r = run_ganengine("train --dataset fake --imageSize 16 --ngpu 2 --max-steps 1 --outf /tmp/x");
  expect_clear_error(r, "--ngpu 2 trains on 2 GPUs, but there is no usable GPU here");
  CHECK(r.output.find("drop --device cpu") == std::string::npos);
  // Given explicitly, --device cpu is what to drop.
  expect_clear_error(run_ganengine("train --dataset fake --device cpu --ngpu 2 --max-steps 1 --outf /tmp/x"),
                     "drop --device cpu");
}

TEST_CASE("cli messages: a batch larger than the dataset is announced as one partial batch") {
  TempDir tmp("ge_msg_batch");
  // FakeData's 1000 images in batches of 2000: one step of 1000 per epoch.
  const CommandResult r = run_ganengine("train " + kTiny + "--batchSize 2000 --max-steps 1 --outf " + tmp.dir.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("(1000 images, 1 batches of 2000 per epoch)") != std::string::npos);
  CHECK(r.output.find("note: --batchSize 2000 is larger than the dataset: each epoch is one partial batch of 1000 "
                      "images") != std::string::npos);
  const CommandResult fits = run_ganengine("train " + kTiny + "--batchSize 8 --max-steps 1 --outf " + tmp.file("b"));
  CHECK(fits.output.find("note: --batchSize") == std::string::npos);
}

TEST_CASE("cli messages: --skip-bad-images says how many images it left out and names them") {
  TempDir tmp("ge_msg_skip");
  std::filesystem::create_directories(tmp.dir / "data" / "cats");
  for (int i = 0; i < 6; ++i)
    write_file_bytes(tmp.file("data/cats/" + std::to_string(i) + ".jpg"), jpeg_bytes(pattern_image(40, 30, 3)));
  write_file_bytes(tmp.file("data/cats/broken.jpg"), "\xff\xd8\xff this is not a JPEG");
  write_file_bytes(tmp.file("data/cats/empty.png"), "");
  const std::string common = "train --dataset folder --dataroot " + tmp.file("data") +
                             " --device cpu --imageSize 16 --ngf 4 --ndf 4 --nz 8 --batchSize 2 --no-progress " +
                             "--max-steps 1 --skip-bad-images ";
  for (const char* cache : {"", "--cache-dir "}) {
    INFO(cache);
    const std::string extra = *cache ? std::string(cache) + tmp.file("cache") : "";
    const CommandResult r = run_ganengine(common + extra + " --outf " + tmp.file(*cache ? "b" : "a"));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find("--skip-bad-images: 2 images left out of 8 because they do not decode:") != std::string::npos);
    CHECK(r.output.find("broken.jpg") != std::string::npos);
    CHECK(r.output.find("empty.png") != std::string::npos);
  }
  // Nothing skipped, nothing said.
  std::filesystem::remove(tmp.file("data/cats/broken.jpg"));
  std::filesystem::remove(tmp.file("data/cats/empty.png"));
  const CommandResult clean = run_ganengine(common + "--outf " + tmp.file("c"));
  CHECK(clean.exit_code == 0);
  CHECK(clean.output.find("left out") == std::string::npos);
}

TEST_CASE("cli messages: an --outf holding another run's state is refused unless --resume or --overwrite") {
  TempDir tmp("ge_msg_outf");
  const std::string run = "train " + kTiny + "--batchSize 8 --max-steps 2 --outf " + tmp.dir.string();
  REQUIRE(run_ganengine(run).exit_code == 0);
  const std::string state = tmp.file("training_state.safetensors");
  const std::string id = load_safetensors(state).metadata.at("checkpoint_id");
  const CommandResult again = run_ganengine(run);
  expect_clear_error(again, "--outf " + tmp.dir.string() + " already holds a run's training state");
  CHECK(again.output.find("--resume " + state) != std::string::npos);
  CHECK(again.output.find("--overwrite") != std::string::npos);
  CHECK(load_safetensors(state).metadata.at("checkpoint_id") == id);  // left alone
  const CommandResult overwritten = run_ganengine(run + " --overwrite");
  INFO(overwritten.output);
  CHECK(overwritten.exit_code == 0);
  CHECK(load_safetensors(state).metadata.at("checkpoint_id") != id);
}

TEST_CASE("cli messages: generate refuses empty or integer noise and warns of non-finite noise") {
  TempDir tmp("ge_msg_noise");
  REQUIRE(run_ganengine("train " + kTiny + "--batchSize 8 --max-steps 1 --outf " + tmp.dir.string()).exit_code == 0);
  const std::string gen = "generate --device cpu --netG " + tmp.file("netG_epoch_0.safetensors") + " ";

  save_safetensors(tmp.file("none.safetensors"), {{"noise", Tensor::zeros({0, 8, 1, 1}, DType::F32)}});
  expect_clear_error(run_ganengine(gen + "--noise " + tmp.file("none.safetensors") + " -o " + tmp.file("a.png")),
                     tmp.file("none.safetensors") + ": 'noise' holds no vectors");
  CHECK_FALSE(std::filesystem::exists(tmp.file("a.png")));

  save_safetensors(tmp.file("u8.safetensors"), {{"noise", Tensor::zeros({2, 8, 1, 1}, DType::U8)}});
  expect_clear_error(run_ganengine(gen + "--noise " + tmp.file("u8.safetensors") + " -o " + tmp.file("b.png")),
                     tmp.file("u8.safetensors") + ": 'noise' is u8");

  std::vector<double> values(16, 0.5);
  values[3] = std::nan("");
  values[9] = INFINITY;
  save_safetensors(tmp.file("nan.safetensors"), {{"noise", Tensor::from_doubles(values, {2, 8, 1, 1}, DType::F32)}});
  const CommandResult nan = run_ganengine(gen + "--noise " + tmp.file("nan.safetensors") + " -o " + tmp.file("c.png"));
  INFO(nan.output);
  CHECK(nan.exit_code == 0);
  CHECK(nan.output.find("warning: " + tmp.file("nan.safetensors") + ": 2 of the 16 noise values are NaN or infinite") !=
        std::string::npos);
}

TEST_CASE("cli messages: an internal check reaches the user without its source location") {
  const std::string internal = "/work/src/core/ops_dispatch.cpp:387: cast: u8[2, 8] to f32 [a.defined()]";
  const std::string shown = cli::error_text_for_user(internal);
  CHECK(shown.find("ops_dispatch.cpp") == std::string::npos);
  CHECK(shown.find("internal check failed: cast: u8[2, 8] to f32") == 0);
  CHECK(shown.find("please report it") != std::string::npos);
  // Errors about input pass unchanged, a file name with a colon in them included.
  for (const std::string& input :
       {std::string("--lr 2 (expected a learning rate in [0, 1])"), std::string("data.cpp: not a safetensors file"),
        std::string("run.safetensors: tensor 'x' is missing\n  more")})
    CHECK(cli::error_text_for_user(input) == input);
}

TEST_CASE(
    "cli messages: numeric flags of generate and bench and bench-data and export refuse bad values naming the flag") {
  // Each is refused before any file is read or any step runs.
  struct Case {
    std::string args;
    std::string expect;
  };
  const Case cases[] = {
      {"generate --netG missing.safetensors -o out.png -n 1x", "-n '1x' is not a valid value (expected a whole number"},
      {"generate --netG missing.safetensors -o out.png -n 0", "-n 0 (expected 1..100000)"},
      {"generate --netG missing.safetensors -o out.png --seed -1", "--seed '-1' is out of range"},
      {"bench --device cpu --imageSize 4294967360", "--imageSize '4294967360' is out of range"},
      {"bench --device cpu --nz 1e3", "--nz '1e3' is not a valid value (expected a whole number"},
      {"bench --device cpu --steps 1.5", "--steps '1.5' is not a valid value (expected a whole number"},
      {"bench --device cpu --ngpu=", "--ngpu '' is not a valid value"},
      {"bench-data --seconds nan", "--seconds 'nan' is not a valid value (expected a number"},
      {"bench-data --batchSize 64x", "--batchSize '64x' is not a valid value"},
      {"bench-data --workers 999", "--workers 999 (expected 0..256)"},
      {"export --netG missing.safetensors -o g.onnx --opset 17x", "--opset '17x' is not a valid value"},
  };
  for (const Case& c : cases) {
    INFO(c.args);
    expect_clear_error(run_ganengine(c.args), c.expect);
  }
}
