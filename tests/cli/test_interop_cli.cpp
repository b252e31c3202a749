// Interoperability end to end: PyTorch's .pth files given to train, generate, export and
// convert; files of other kinds where safetensors is expected named for what they are;
// generate's -o by extension; bench's --no-cuda-graph alone; info without a CUDA driver.
#include <filesystem>

#include "core/cuda_version_text.h"
#include "ganengine/safetensors.h"
#include "support/cli_runner.h"
#include "support/temp_dir.h"
#include "support/test_util.h"
#include "support/trainer_compare.h"

using namespace ge;
using namespace ge::test;

namespace {

const std::string kTiny = "--dataset fake --device cpu --imageSize 16 --ngf 4 --ndf 4 --nz 8 --no-progress ";

void expect_ok(const CommandResult& r) {
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
}

void expect_error(const std::string& args, const std::string& message) {
  const CommandResult r = run_ganengine(args);
  INFO(args, "\n", r.output);
  CHECK(r.exit_code == 1);
  CHECK(r.output.find(message) != std::string::npos);
}

std::string head(const std::string& path, size_t n) { return read_file_bytes(path).substr(0, n); }

}  // namespace

TEST_CASE("interop cli: generate reads a .pth and makes what its safetensors twin makes") {
  TempDir tmp("ge_interop_generate");
  for (const auto& files : {std::pair<std::string, std::string>{"pth_netG_nc1.pth", "pth_netG_nc1.safetensors"},
                            {"pth_netG_nc1_dataparallel.pth", "pth_netG_nc1.safetensors"},
                            {"pth_netG_nc3_legacy.pth", "pth_netG_nc3.safetensors"}}) {
    const std::string& pth = files.first;
    const std::string& twin = files.second;
    INFO(pth);
    const std::string common = " --device cpu -n 5 -o " + tmp.file("grid.png") + " --save-tensor ";
    expect_ok(run_ganengine("generate --netG " + data_path(pth) + common + tmp.file("a.safetensors")));
    expect_ok(run_ganengine("generate --netG " + data_path(twin) + common + tmp.file("b.safetensors")));
    const auto a = load_safetensors(tmp.file("a.safetensors")).tensors;
    const auto b = load_safetensors(tmp.file("b.safetensors")).tensors;
    expect_same_tensors(a, b);
    CHECK(a.at("images").shape() == Shape{5, pth.find("nc3") != std::string::npos ? 3 : 1, 16, 16});
  }
}

TEST_CASE("interop cli: train continues from .pth weights of both networks") {
  TempDir tmp("ge_interop_train");
  expect_ok(run_ganengine("train " + kTiny + "--batchSize 4 --max-steps 1 --netG " +
                          data_path("pth_netG_nc3_legacy.pth") + " --netD " + data_path("pth_netD_nc3.pth") +
                          " --outf " + tmp.dir.string()));
  // A generator's .pth given as the discriminator is refused with the names that do not fit.
  expect_error("train " + kTiny + "--batchSize 4 --max-steps 1 --netD " + data_path("pth_netG_nc3_legacy.pth") +
                   " --outf " + tmp.file("refused"),
               "does not fit this network");
}

TEST_CASE("interop cli: convert writes the safetensors twin of each .pth") {
  TempDir tmp("ge_interop_convert");
  for (const auto& files : {std::pair<std::string, std::string>{"pth_netG_nc1.pth", "pth_netG_nc1.safetensors"},
                            {"pth_netG_nc1_dataparallel.pth", "pth_netG_nc1.safetensors"},
                            {"pth_netG_nc3_legacy.pth", "pth_netG_nc3.safetensors"},
                            {"pth_netD_nc3.pth", "pth_netD_nc3.safetensors"}}) {
    const std::string& pth = files.first;
    const std::string& twin = files.second;
    INFO(pth);
    const CommandResult r = run_ganengine("convert " + data_path(pth) + " " + tmp.file("out.safetensors"));
    expect_ok(r);
    CHECK(r.output.find("wrote ") != std::string::npos);
    const SafeTensorsFile out = load_safetensors(tmp.file("out.safetensors"));
    expect_same_tensors(out.tensors, load_safetensors(data_path(twin)).tensors);
    CHECK(out.metadata.at("converted_from") == data_path(pth));
  }
  expect_error("convert " + data_path("pth_netG_nc1.pth"),
               "expected two files: ganengine convert IN.pth OUT.safetensors");
  expect_error("convert " + tmp.file("x.pth") + " " + tmp.file("x.pth"), "onto itself");
  expect_error("convert " + tmp.file("absent.pth") + " " + tmp.file("y.safetensors"),
               "absent.pth: cannot open weights (.safetensors or .pth): No such file or directory");
  expect_error("convert " + data_path("golden_grey16.png") + " " + tmp.file("y.safetensors"),
               "golden_grey16.png is a PNG image, not a safetensors file");
  write_file_bytes(tmp.file("garbage.pth"), "not a state_dict at all\n");
  expect_error("convert " + tmp.file("garbage.pth") + " " + tmp.file("y.safetensors"),
               "garbage.pth: neither a PyTorch .pth (torch.save's ZIP or legacy format) nor a safetensors file");
  CHECK(!std::filesystem::exists(tmp.file("y.safetensors")));
}

TEST_CASE("interop cli: export writes an ONNX model of the generator") {
  TempDir tmp("ge_interop_export");
  const CommandResult r = run_ganengine("export --netG " + data_path("pth_netG_nc1.pth") + " -o " + tmp.file("g.onnx"));
  expect_ok(r);
  CHECK(r.output.find("image (N, 1, 16, 16), opset 17") != std::string::npos);
  CHECK(head(tmp.file("g.onnx"), 2) == std::string("\x08\x08", 2));  // ir_version 8
  expect_error("export --netG " + data_path("pth_netD_nc3.pth") + " -o " + tmp.file("d.onnx"),
               "a DCGAN generator has at least 3");
  expect_error("export --netG " + data_path("pth_netG_nc1.pth"), "-o FILE.onnx is required");
  expect_error("export --netG " + data_path("pth_netG_nc1.pth") + " -o " + tmp.file("g.onnx") + " --opset 13",
               "--opset 13 (expected 17..23)");
}

TEST_CASE("interop cli: a file of another kind where safetensors is expected is named") {
  TempDir tmp("ge_interop_kinds");
  const std::string gen = "generate --device cpu -o " + tmp.file("g.png") + " --netG ";
  expect_error(gen + data_path("golden_grey16.png"), "golden_grey16.png is a PNG image, not a safetensors file");
  expect_error(gen + data_path("golden_photo.jpg"), "golden_photo.jpg is a JPEG image, not a safetensors file");
  write_file_bytes(tmp.file("w.safetensors.gz"), std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", 10));
  expect_error(gen + tmp.file("w.safetensors.gz"), "is a gzip-compressed file, not a safetensors file: decompress it");
  // A .pth where only safetensors is read (--noise): named, with the way to convert it.
  expect_error(gen + data_path("pth_netG_nc1.pth") + " --noise " + data_path("pth_netG_nc1.pth"),
               "pth_netG_nc1.pth is a PyTorch .pth file (torch.save's ZIP format), not a safetensors file: --netG and "
               "--netD (train, generate, export) read a state_dict .pth as it is; elsewhere convert it first with "
               "'ganengine convert");
  expect_error(gen + data_path("pth_netG_nc1.pth") + " --noise " + data_path("pth_netG_nc3_legacy.pth"),
               "torch.save's legacy pickle format");
  expect_ok(run_ganengine("export --netG " + data_path("pth_netG_nc1.pth") + " -o " + tmp.file("g.onnx")));
  expect_error(gen + data_path("pth_netG_nc1.pth") + " --noise " + tmp.file("g.onnx"),
               "g.onnx is an ONNX model, not a safetensors file");
  // A file of no known kind: where a .pth is read too, both formats are named; where only
  // safetensors is, the safetensors reader says what is wrong with it.
  write_file_bytes(tmp.file("junk.safetensors"), std::string(64, '\x7f'));
  expect_error(gen + tmp.file("junk.safetensors"), "junk.safetensors: neither a PyTorch .pth");
  expect_error(gen + data_path("pth_netG_nc1.pth") + " --noise " + tmp.file("junk.safetensors"),
               "exceeds the 100000000-byte limit; expected a safetensors file");
}

TEST_CASE("interop cli: generate -o writes a grid by extension and a directory otherwise") {
  TempDir tmp("ge_interop_output");
  const std::string gen = "generate --device cpu -n 3 --netG " + data_path("pth_netG_nc1.pth") + " -o ";
  expect_ok(run_ganengine(gen + tmp.file("out.jpg")));
  REQUIRE(std::filesystem::is_regular_file(tmp.file("out.jpg")));
  CHECK(head(tmp.file("out.jpg"), 3) == "\xff\xd8\xff");
  expect_ok(run_ganengine(gen + tmp.file("OUT.JPEG")));
  CHECK(head(tmp.file("OUT.JPEG"), 3) == "\xff\xd8\xff");
  expect_ok(run_ganengine(gen + tmp.file("out.png")));
  CHECK(head(tmp.file("out.png"), 4) == "\x89PNG");
  expect_ok(run_ganengine(gen + tmp.file("images")));
  CHECK(std::filesystem::is_regular_file(tmp.file("images/000002.png")));

  std::filesystem::create_directories(tmp.file("taken.png"));
  expect_error(gen + tmp.file("taken.png"), "taken.png is an existing directory, but its .png extension asks for one");
  write_file_bytes(tmp.file("plain"), "x");
  expect_error(gen + tmp.file("plain"), "plain exists and is not a directory");
  expect_error(gen + tmp.file("out.bmp"), "generate writes a grid as .png or .jpg (or a directory of PNGs), not .bmp");
  CHECK(!std::filesystem::exists(tmp.file("out.bmp")));
}

// --steps 0 is refused after the --cuda-graph flags are read, on every host, GPU or not.
TEST_CASE("interop cli: bench --no-cuda-graph alone is no contradiction") {
  const CommandResult alone = run_ganengine("bench --no-cuda-graph --steps 0");
  INFO(alone.output);
  CHECK(alone.exit_code == 1);
  CHECK(alone.output.find("contradict") == std::string::npos);
  CHECK(alone.output.find("--steps 0 (expected at least 1)") != std::string::npos);
  expect_error("bench --cuda-graph off --no-cuda-graph --steps 0", "--steps 0 (expected at least 1)");
  expect_error("bench --cuda-graph on --no-cuda-graph --steps 0",
               "--cuda-graph on and --no-cuda-graph contradict each other");
  expect_error("bench --cuda-graph off,on --no-cuda-graph", "contradict each other");
}

TEST_CASE("interop cli: info says no CUDA driver instead of driver supports 0.0") {
  CHECK(cuda_versions_line(12040, 0) == "CUDA runtime 12.4, no CUDA driver");
  CHECK(cuda_versions_line(12040, 12080) == "CUDA runtime 12.4, driver supports 12.8");
  const CommandResult r = run_ganengine("info");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("driver supports 0.0") == std::string::npos);
  if (built_with_cuda() && r.output.find("CUDA runtime") != std::string::npos && !cuda_available())
    CHECK((r.output.find("no CUDA driver") != std::string::npos ||
           r.output.find("driver supports") != std::string::npos));
}
