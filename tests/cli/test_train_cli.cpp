// `ganengine train` and `generate` end to end on the CPU, at tiny sizes: the files a user gets,
// exact resume, continuing from saved weights, --print-precision, and clean failures.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>

#include "core/backend.h"
#include "ganengine/amp.h"
#include "ganengine/image_grid.h"
#include "ganengine/safetensors.h"
#include "ganengine/state_dict.h"
#include "support/cli_runner.h"
#include "support/image_files.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

using namespace ge;
using namespace ge::test;

namespace {

// Tiny networks: 16x16 images, widths 4; FakeData has 1000 images.
const std::string kTiny = "--dataset fake --device cpu --imageSize 16 --ngf 4 --ndf 4 --nz 8 --no-progress ";

bool exists(const std::string& p) { return std::filesystem::exists(p); }

void expect_ok(const CommandResult& r) {
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
}

// The saved weights carry exactly the PyTorch state_dict keys and shapes of our network.
void expect_state_dict_file(const std::string& path, bool generator, OptLevel level) {
  const auto file = load_safetensors(path);
  nn::NetConfig cfg;
  cfg.image_size = 16;
  cfg.ngf = cfg.ndf = 4;
  cfg.nz = 8;
  const PrecisionPolicy policy = resolve_policy(level);
  auto net = generator ? nn::make_generator(cfg, policy, nn::Placement{})
                       : nn::make_discriminator(cfg, policy, nn::Placement{});
  const nn::StateDict want = nn::state_dict(*net);
  REQUIRE(file.tensors.size() == want.size());
  for (const auto& entry : want) {
    const std::string& k = entry.first;
    const Tensor& t = entry.second;
    INFO(path, " key ", k);
    auto it = file.tensors.find(k);
    REQUIRE(it != file.tensors.end());
    CHECK(it->second.shape() == t.shape());
    CHECK(it->second.dtype() == (k.find("num_batches_tracked") != std::string::npos ? DType::I64 : DType::F32));
  }
}

std::map<std::string, Tensor> tensors_of(const std::string& path) { return load_safetensors(path).tensors; }

void expect_bitwise_equal(const std::string& a, const std::string& b) {
  auto ta = tensors_of(a), tb = tensors_of(b);
  REQUIRE(ta.size() == tb.size());
  for (const auto& entry : ta) {
    const std::string& k = entry.first;
    const Tensor& t = entry.second;
    INFO(a, " vs ", b, " key ", k);
    REQUIRE(tb.count(k));
    REQUIRE(tb.at(k).nbytes() == t.nbytes());
    CHECK(std::memcmp(t.data(), tb.at(k).data(), t.nbytes()) == 0);
  }
}

}  // namespace

TEST_CASE("train cli: every opt level writes the example's files on the CPU") {
  for (const char* level : {"O0", "O1", "O2", "O3"}) {
    TempDir tmp("ge_train");
    const auto r = run_ganengine("train " + kTiny + "--batchSize 8 --niter 2 --max-steps 3 --sample-interval 2 " +
                                 "--opt-level " + level + " --outf " + tmp.dir.string());
    expect_ok(r);
    INFO(level, r.output);
    // The example's console line, once per step, with the three loss scales.
    CHECK(r.output.find("[0/2][0/125] Loss_D: ") != std::string::npos);
    CHECK(r.output.find("[0/2][2/125] Loss_D: ") != std::string::npos);
    CHECK(r.output.find(" D(x): ") != std::string::npos);
    CHECK(r.output.find(" D(G(z)): ") != std::string::npos);
    for (const char* f : {"real_samples.png", "fake_samples_epoch_000.png", "netG_epoch_0.safetensors",
                          "netD_epoch_0.safetensors", "training_state.safetensors", "metrics.jsonl"})
      CHECK(exists(tmp.file(f)));
    CHECK_FALSE(exists(tmp.file("netG_epoch_1.safetensors")));  // --max-steps stopped inside epoch 0
    // Nothing half-written is left behind.
    for (const auto& name : tmp.entries()) CHECK(name.find(".tmp.") == std::string::npos);
    // 8 images of 16x16 in an 8-wide grid with padding 2: 8*18+2 by 18+2.
    const Tensor grid = load_png_as_tensor(tmp.file("fake_samples_epoch_000.png"));
    CHECK(grid.shape() == Shape{1, 3, 20, 146});
    expect_state_dict_file(tmp.file("netG_epoch_0.safetensors"), true, parse_opt_level(level));
    expect_state_dict_file(tmp.file("netD_epoch_0.safetensors"), false, parse_opt_level(level));
    // metrics.jsonl: one record per step, with the fields the console shows.
    const std::string metrics = read_file_bytes(tmp.file("metrics.jsonl"));
    CHECK(std::count(metrics.begin(), metrics.end(), '\n') == 3);
    for (const char* field : {"\"step\": 2", "\"loss_D\"", "\"loss_G\"", "\"D_x\"", "\"loss_scale\"", "\"overflow\""})
      CHECK(metrics.find(field) != std::string::npos);
  }
}

TEST_CASE("train cli: a run stopped and resumed is bitwise the uninterrupted run") {
  // Batch 300: 4 steps per epoch (the last of 100 images), so the run crosses an epoch boundary
  // and a partial batch.
  for (const char* level : {"O0", "O2", "O4"}) {
    INFO(level);
    TempDir whole("ge_whole"), parts("ge_parts");
    const std::string common = "train " + kTiny + "--batchSize 300 --niter 3 --opt-level " + level + " ";
    expect_ok(run_ganengine(common + "--max-steps 7 --outf " + whole.dir.string()));
    expect_ok(run_ganengine(common + "--max-steps 3 --outf " + parts.dir.string()));
    const auto resumed = run_ganengine(common + "--max-steps 7 --outf " + parts.dir.string() + " --resume " +
                                       parts.file("training_state.safetensors"));
    expect_ok(resumed);
    CHECK(resumed.output.find("resumed from") != std::string::npos);
    expect_bitwise_equal(whole.file("netG_epoch_1.safetensors"), parts.file("netG_epoch_1.safetensors"));
    expect_bitwise_equal(whole.file("netD_epoch_1.safetensors"), parts.file("netD_epoch_1.safetensors"));
    expect_bitwise_equal(whole.file("training_state.safetensors"), parts.file("training_state.safetensors"));
    CHECK(read_file_bytes(whole.file("metrics.jsonl")).size() > 0);
  }
}

TEST_CASE("train cli: --netG and --netD continue from saved weights") {
  TempDir first("ge_first"), second("ge_second");
  expect_ok(
      run_ganengine("train " + kTiny + "--batchSize 8 --max-steps 2 --opt-level O0 --outf " + first.dir.string()));
  // With lr 0 a step leaves the weights where they were loaded, so the new run's saved weights
  // must be the loaded ones bit for bit (BatchNorm's running statistics do move).
  expect_ok(run_ganengine("train " + kTiny + "--batchSize 8 --max-steps 1 --lr 0 --opt-level O0 --outf " +
                          second.dir.string() + " --netG " + first.file("netG_epoch_0.safetensors") + " --netD " +
                          first.file("netD_epoch_0.safetensors")));
  for (const char* net : {"netG_epoch_0.safetensors", "netD_epoch_0.safetensors"}) {
    auto a = tensors_of(first.file(net)), b = tensors_of(second.file(net));
    int weights = 0;
    for (const auto& entry : a) {
      const std::string& k = entry.first;
      const Tensor& t = entry.second;
      if (k.find(".weight") == std::string::npos && k.find(".bias") == std::string::npos) continue;
      INFO(net, " ", k);
      CHECK(std::memcmp(t.data(), b.at(k).data(), t.nbytes()) == 0);
      ++weights;
    }
    CHECK(weights >= 5);
  }
  // A fresh run starts elsewhere: the continuation really used the files.
  TempDir fresh("ge_fresh");
  expect_ok(run_ganengine("train " + kTiny +
                          "--batchSize 8 --max-steps 1 --lr 0 --manualSeed 5 --opt-level O0 --outf " +
                          fresh.dir.string()));
  auto a = tensors_of(first.file("netG_epoch_0.safetensors")), c = tensors_of(fresh.file("netG_epoch_0.safetensors"));
  CHECK(std::memcmp(a.at("main.0.weight").data(), c.at("main.0.weight").data(), a.at("main.0.weight").nbytes()) != 0);
}

TEST_CASE("train cli: --print-precision shows the opt-level table") {
  struct Row {
    const char* args;
    const char* weights;
    const char* compute;
    const char* bn;
    const char* master;
    const char* scale;
  };
  const Row rows[] = {
      {"--opt-level O0", "f32", "f32", "f32", "none (weights are f32)", "1 static"},
      {"--opt-level O1", "f32", "f16", "f32", "none (weights are f32)", "dynamic"},
      {"--opt-level O2", "f16", "f16", "f32", "f32 copies in the optimizer", "dynamic"},
      {"--opt-level O3", "f16", "f16", "f16", "none", "1 static"},
      {"--opt-level O3 --keep-batchnorm-fp32 True", "f16", "f16", "f32", "none", "1 static"},
      {"--opt-level O2 --keep-batchnorm-fp32 False", "f16", "f16", "f16", "f32 copies in the optimizer", "dynamic"},
      {"--opt-level O2 --half bf16", "bf16", "bf16", "f32", "f32 copies in the optimizer", "1 static"},
      {"--opt-level O1 --loss-scale 128", "f32", "f16", "f32", "none (weights are f32)", "128 static"},
      {"--opt-level O4", "f16", "f16", "f32", "f32 copies in the optimizer", "dynamic"},
  };
  for (const Row& row : rows) {
    const auto r =
        run_ganengine("train --device cpu --imageSize 16 --ngf 4 --ndf 4 --print-precision " + std::string(row.args));
    INFO(row.args, "\n", r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(r.output.find(std::string("conv weights stored as: ") + row.weights + "\n") != std::string::npos);
    CHECK(r.output.find(std::string("conv compute / activations: ") + row.compute + "\n") != std::string::npos);
    CHECK(r.output.find(std::string("batchnorm params: ") + row.bn + "\n") != std::string::npos);
    CHECK(r.output.find(std::string("master weights: ") + row.master + "\n") != std::string::npos);
    CHECK(r.output.find(std::string("loss scale: ") + row.scale) != std::string::npos);
    // and per layer: the generator's first layer and a BatchNorm
    CHECK(r.output.find("main.0   ConvTranspose2d(100, 8, 4, 1, 0, bias=False)") != std::string::npos);
    CHECK(r.output.find(std::string("BatchNorm2d(8, eps=1e-05, momentum=0.1)")) != std::string::npos);
    // O4's FP8 line, and its layers: G's first (100 -> 8) reads FP8, the 4-channel ones stay in half.
    const bool o4 = std::string(row.args) == "--opt-level O4";
    CHECK((r.output.find("fp8 convolutions: E4M3 activations and weights, E5M2 output gradients") !=
           std::string::npos) == o4);
    const size_t g_first = r.output.find("main.0   ConvTranspose2d(100, 8, 4, 1, 0, bias=False)");
    REQUIRE(g_first != std::string::npos);
    const std::string g_first_line = r.output.substr(g_first, r.output.find('\n', g_first) - g_first);
    CHECK((g_first_line.find("computes in f16 from FP8 operands") != std::string::npos) == o4);
    CHECK((r.output.find("not FP8 (fewer than 8 channels on a side)") != std::string::npos) == o4);
  }
}

TEST_CASE("train cli: bad flags fail with one clear line and a non-zero exit") {
  TempDir tmp("ge_bad");
  write_file_bytes(tmp.file("not_weights.safetensors"), "this is not a safetensors file at all");
  struct Case {
    std::string args;
    std::string expect;
  };
  const Case cases[] = {
      {"--opt-level O5", "unknown opt level 'O5' (expected O0, O1, O2, O3 or O4"},
      {"--opt-level 02", "the letter O, not zero"},
      {"--imageSize 48", "--imageSize 48 is not supported (expected a power of two from 16 to 512"},
      {"--imageSize 1024", "--imageSize 1024 is not supported"},
      {"--dataset cifar10 --dataroot " + tmp.file("missing"), "is not a directory"},
      {"--dataset imagenette", "expected one of"},
      {"--netG " + tmp.file("nope.safetensors"), "--netG '" + tmp.file("nope.safetensors") + "': cannot open it"},
      {"--netD " + tmp.file("not_weights.safetensors"), "not_weights.safetensors"},
      {"--resume " + tmp.file("not_weights.safetensors"), "not_weights.safetensors"},
      {"--loss-scale lots", "--loss-scale 'lots' (expected 'dynamic' or a positive number"},
      {"--half fp8", "--half 'fp8' (expected fp16 or bf16)"},
      {"--ngpu 2", "--ngpu 2"},
      {"--batchSize 0", "--batchSize 0"},
      {"--no-such-flag", "no-such-flag"},
      {"--keep-batchnorm-fp32 Maybe", "(expected True or False)"},
  };
  for (const Case& c : cases) {
    const auto r = run_ganengine("train " + kTiny + "--max-steps 1 --outf " + tmp.file("out") + " " + c.args);
    INFO(c.args, "\n", r.output);
    CHECK(r.exit_code != 0);
    CHECK(r.output.find(c.expect) != std::string::npos);
    CHECK(r.output.find("error") != std::string::npos);
    CHECK(r.output.size() < 2000);  // a clear line, not a dump
  }
  // A network whose shape does not fit the saved weights says which keys differ.
  expect_ok(run_ganengine("train " + kTiny + "--batchSize 8 --max-steps 1 --outf " + tmp.file("a")));
  const auto r = run_ganengine("train " + kTiny + "--batchSize 8 --max-steps 1 --ngf 8 --outf " + tmp.file("b") +
                               " --netG " + tmp.file("a/netG_epoch_0.safetensors"));
  INFO(r.output);
  CHECK(r.exit_code != 0);
  CHECK(r.output.find("does not fit this network") != std::string::npos);
  CHECK(r.output.find("main.0.weight") != std::string::npos);
}

TEST_CASE("generate cli: grids - one PNG per image - tensors - eval and batch statistics") {
  TempDir tmp("ge_gen");
  expect_ok(run_ganengine("train " + kTiny + "--batchSize 8 --max-steps 2 --outf " + tmp.dir.string()));
  const std::string netG = tmp.file("netG_epoch_0.safetensors");
  expect_ok(run_ganengine("generate --device cpu --netG " + netG + " -n 10 -o " + tmp.file("grid.png") +
                          " --save-tensor " + tmp.file("eval.safetensors")));
  CHECK(load_png_as_tensor(tmp.file("grid.png")).shape() == Shape{1, 3, 2 * 18 + 2, 8 * 18 + 2});
  expect_ok(run_ganengine("generate --device cpu --netG " + netG + " -n 3 -o " + tmp.file("images")));
  for (const char* f : {"images/000000.png", "images/000001.png", "images/000002.png"})
    CHECK(load_png_as_tensor(tmp.file(f)).shape() == Shape{1, 3, 16, 16});
  // The same noise through batch statistics gives other images than through running statistics.
  expect_ok(run_ganengine("generate --device cpu --netG " + netG + " --noise " + tmp.file("eval.safetensors") +
                          " --bn-batch-stats -o " + tmp.file("grid2.png") + " --save-tensor " +
                          tmp.file("batch.safetensors")));
  const auto eval = tensors_of(tmp.file("eval.safetensors")), batch = tensors_of(tmp.file("batch.safetensors"));
  CHECK(eval.at("images").shape() == Shape{10, 3, 16, 16});
  CHECK(rel_error(eval.at("noise").to_doubles(), batch.at("noise").to_doubles()) == 0);
  CHECK(rel_error(eval.at("images").to_doubles(), batch.at("images").to_doubles()) > 1e-3);
  const auto bad = run_ganengine("generate --device cpu --netG " + tmp.file("missing.safetensors") + " -o x.png");
  CHECK(bad.exit_code != 0);
  CHECK(bad.output.find("missing.safetensors") != std::string::npos);
}

TEST_CASE("train cli: overflows are summarised and a loss scale at its floor stops with a diagnosis") {
  TempDir tmp("ge_floor");
  // Forced overflows of errD_fake at steps 0 and 1: the summary names the loss, never one line
  // per step, and training goes on.
  const auto r = run_ganengine("train " + kTiny + "--batchSize 8 --max-steps 4 --opt-level O1 --outf " + tmp.file("a") +
                               " --debug-force-overflow 0:1,1:1");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("[amp] gradient overflow") != std::string::npos);
  CHECK(r.output.find("errD_fake") != std::string::npos);
  // A floor of 2^15 is reached by the first halving of errD_real's scale.
  const auto f = run_ganengine("train " + kTiny + "--batchSize 8 --max-steps 4 --opt-level O1 --min-loss-scale 32768 " +
                               "--outf " + tmp.file("b") + " --debug-force-overflow 0:0");
  INFO(f.output);
  CHECK(f.exit_code == 3);
  CHECK(f.output.find("reached its floor") != std::string::npos);
  CHECK(f.output.find("Try a lower --lr") != std::string::npos);
}

TEST_CASE("train cli: a folder dataset - a bad image stops with its name - skipped and cached on request") {
  TempDir tmp("ge_folder_cli");
  std::filesystem::create_directories(tmp.dir / "data" / "cats");
  for (int i = 0; i < 12; ++i)
    write_file_bytes(tmp.file("data/cats/" + std::to_string(i) + ".jpg"), jpeg_bytes(pattern_image(40, 30, 3)));
  write_file_bytes(tmp.file("data/cats/broken.jpg"), "\xff\xd8\xff this is not a JPEG");
  const std::string common = "train --dataset folder --dataroot " + tmp.file("data") +
                             " --device cpu --imageSize 16 --ngf 4 --ndf 4 --nz 8 --batchSize 4 --no-progress " +
                             "--max-steps 4 ";
  const auto bad = run_ganengine(common + "--outf " + tmp.file("a"));
  INFO(bad.output);
  CHECK(bad.exit_code != 0);
  CHECK(bad.output.find("broken.jpg") != std::string::npos);
  // Skipped: 12 good images, 3 steps per epoch; the decoded images land in the cache once.
  const std::string skip = common + "--skip-bad-images --cache-dir " + tmp.file("cache") + " --outf ";
  const auto ok = run_ganengine(skip + tmp.file("b"));
  INFO(ok.output);
  REQUIRE(ok.exit_code == 0);
  CHECK(ok.output.find("(12 images, 3 batches of 4 per epoch)") != std::string::npos);
  CHECK(exists(tmp.file("b/netG_epoch_1.safetensors")));
  REQUIRE(std::filesystem::exists(tmp.dir / "cache"));
  int cache_files = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp.dir / "cache"))
    cache_files += e.path().extension() == ".gecache";
  CHECK(cache_files == 1);
  // A second run reuses the cache and trains the same: identical weights.
  expect_ok(run_ganengine(skip + tmp.file("c")));
  expect_bitwise_equal(tmp.file("b/netG_epoch_1.safetensors"), tmp.file("c/netG_epoch_1.safetensors"));
}

TEST_CASE("train cli: Ctrl-C saves the state and the run resumes from it") {
  TempDir tmp("ge_sigint");
  // SIGINT after 3 s: the step in flight finishes, the epoch's files and the state are written.
  const auto r = run_ganengine_with_interrupt(
      "train " + kTiny + "--batchSize 8 --niter 1000 --log-interval 50 --outf " + tmp.dir.string(), 3);
  INFO(r.output);
  CHECK(r.exit_code == 130);
  CHECK(r.output.find("interrupted: state saved to") != std::string::npos);
  REQUIRE(exists(tmp.file("training_state.safetensors")));
  for (const auto& name : tmp.entries()) CHECK(name.find(".tmp.") == std::string::npos);
  const auto state = load_safetensors(tmp.file("training_state.safetensors"));
  const int64_t done = std::stoll(state.metadata.at("global_step"));
  CHECK(done > 0);
  const auto resumed = run_ganengine("train " + kTiny + "--batchSize 8 --niter 1000 --log-interval 50 --max-steps " +
                                     std::to_string(done + 2) + " --outf " + tmp.dir.string() + " --resume " +
                                     tmp.file("training_state.safetensors"));
  INFO(resumed.output);
  CHECK(resumed.exit_code == 0);
  CHECK(resumed.output.find("done: 2 steps") != std::string::npos);
}

TEST_CASE("cli: --device cuda without a usable GPU is a clear error in every command") {
  if (ge::cuda_available()) {
    MESSAGE("a GPU is present: --device cuda is valid here, nothing to refuse");
    CHECK(run_ganengine("train --device cuda:99 --dataset fake --print-precision").exit_code != 0);
    return;
  }
  for (const char* cmd : {"train --dataset fake --max-steps 1", "generate --netG x.safetensors -o x.png",
                          "bench-data --dataset fake --seconds 1"}) {
    const auto r = run_ganengine(std::string(cmd) + " --device cuda");
    INFO(cmd, "\n", r.output);
    CHECK(r.exit_code != 0);
    CHECK(r.output.find("--device cuda: no usable CUDA GPU here") != std::string::npos);
  }
}
