// `ganengine bench` end to end: its flag errors anywhere, its refusal without a GPU, and on a
// GPU a tiny run whose JSON holds every configuration asked for, and with --dataset train's own
// steps.
#include "io/json.h"
#include "support/cli_runner.h"
#include "support/scoped_env.h"
#include "support/temp_dir.h"
#include "support/test_util.h"
#include "train/step_flops.h"

using namespace ge;
using namespace ge::test;

namespace {
void expect_error(const std::string& args, const std::string& message) {
  const CommandResult r = run_ganengine("bench " + args);
  INFO(args, "\n", r.output);
  CHECK(r.exit_code == 1);
  CHECK(r.output.find(message) != std::string::npos);
}

// A tiny network's bench run with `args`, which must succeed: its output and its JSON document.
struct TinyRun {
  std::string output;
  json::Value doc;
};
TinyRun tiny_bench(const std::string& args) {
  TempDir tmp("ge_bench");
  const std::string path = tmp.file("bench.json");
  const CommandResult r =
      run_ganengine("bench --imageSize 16 --ngf 8 --ndf 8 --nz 10 --warmup 6 " + args + " --json " + path);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return {r.output, json::parse(read_file_bytes(path))};
}
}  // namespace

TEST_CASE("bench cli: bad lists and counts are named before the GPU is touched") {
  expect_error("--opt-level O0,O5", "unknown opt level 'O5'");
  expect_error("--opt-level O1,", "has an empty item");
  expect_error("--batch-sizes 64,abc", "'abc' is not a batch size");
  expect_error("--batch-sizes 0", "'0' is not a batch size");
  expect_error("--steps 0", "--steps 0 (expected at least 1)");
  expect_error("--imageSize 48", "--imageSize 48 is not supported");
  expect_error("--cuda-graph sometimes", "--cuda-graph 'sometimes'");
  expect_error("--cuda-graph on --warmup 2", "--warmup 2 is too short");
  expect_error("--loss-scale -3", "--loss-scale '-3' (expected 'dynamic' or a positive number");
  expect_error("--device cuda:0 --ngpu 0", "--ngpu 0 (expected 1..64)");
  // The CPU's bench (--device cpu) times the step alone: the GPU-only flags are refused.
  expect_error("--device cpu --ngpu 2", "--device cpu times the step alone");
}

// The input pipeline's flags, and the dataset itself, are checked before the GPU is asked for.
TEST_CASE("bench cli: --dataset and its flags are checked before the GPU is touched") {
  TempDir tmp("ge_bench_flags");
  expect_error("--dataset imagenette", "--dataset 'imagenette' is not a dataset ganengine knows");
  expect_error("--dataroot " + tmp.dir.string(), "--dataroot goes with --dataset");
  expect_error("--data-on gpu", "--data-on goes with --dataset");
  expect_error("--dataset fake --workers 999", "--workers 999 (expected 0..256)");
  expect_error("--dataset fake --data-on sky", "--data-on 'sky' (expected auto, host or gpu)");
  expect_error("--dataset cifar10 --dataroot " + tmp.file("absent"), "is not a directory (cifar10 reads its files");
  // The dataset is opened here already: an empty folder is named, with the files it should hold.
  expect_error("--dataset cifar10 --dataroot " + tmp.dir.string(), "cifar10: no CIFAR-10 under --dataroot");
  expect_error("--dataset lsun --download --dataroot " + tmp.dir.string(), "--download works for cifar10, mnist");
}

// Runs on every host: where there is a GPU, the child process is shown none (CUDA_VISIBLE_DEVICES
// -1: CUDA sees only the devices listed before the first invalid index, so none here).
TEST_CASE("bench cli: without a GPU it says so") {
  // This process's CUDA starts (and counts its devices) before the variable is set, so that the
  // later GPU cases keep their GPUs.
  static_cast<void>(cuda_available());
  const ScopedEnv no_gpu{{"CUDA_VISIBLE_DEVICES", "-1"}};
  const std::string hint = "; --device cpu times the CPU step";
  expect_error("", built_with_cuda()
                       ? "ganengine bench needs a CUDA GPU: none is usable here (no driver or no device)" + hint
                       : "ganengine bench needs a CUDA GPU: this build has no CUDA" + hint);
}

TEST_CASE("bench cli: a tiny run on the GPU writes one row per configuration") {
  GE_REQUIRE_GPU();
  const TinyRun run = tiny_bench("--opt-level O0,O2 --batch-sizes 8,16 --steps 3 --windows 3 --cuda-graph off,on");
  CHECK(run.output.find("GEMM peak") != std::string::npos);
  const json::Value& doc = run.doc;
  CHECK(doc.find("complete")->as_bool());
  CHECK(doc.find("gemm_peak_tflops")->as_number() > 1.0);
  CHECK(!doc.find("gpu")->find("name")->as_string().empty());
  nn::NetConfig net;
  net.image_size = 16;
  net.ngf = net.ndf = 8;
  net.nz = 10;
  const auto& rows = doc.find("rows")->as_array();
  REQUIRE(rows.size() == 8);  // 2 opt levels x 2 batch sizes x eager and graph
  for (const json::Value& row : rows) {
    INFO(json::write(row));
    CHECK(row.find("ok")->as_bool());
    const int64_t batch = row.find("batch")->as_integer();
    CHECK(row.find("step_flops")->as_integer() == dcgan_step_flops(net, batch));
    CHECK(row.find("ms_per_step")->as_number() > 0);
    CHECK(row.find("window_ms_per_step")->as_array().size() == 3);
    CHECK(row.find("peak_alloc_bytes")->as_integer() > 0);
    CHECK(row.find("device_used_bytes")->as_integer() >= row.find("peak_alloc_bytes")->as_integer());
    // The workspace is counted, as PyTorch's max_memory_allocated counts its own.
    CHECK(row.find("peak_mem_bytes")->as_integer() ==
          row.find("peak_alloc_bytes")->as_integer() + row.find("workspace_bytes")->as_integer());
    CHECK(row.find("workspace_bytes")->as_integer() < (int64_t{256} << 20));
    CHECK(row.find("losses_finite")->as_bool());
    // Each opt level's own scales: O0 static 1, O2 dynamic from 2^16 (halved on an overflow).
    const auto& scales = row.find("loss_scales")->as_array();
    REQUIRE(scales.size() == 3);
    if (row.find("opt_level")->as_string() == "O0")
      for (const json::Value& s : scales) CHECK(s.as_number() == 1.0);
  }
  CHECK(doc.find("loss_scale")->as_string() == "opt level default");
  CHECK(run.output.find("O0: true fp32, no TF32") != std::string::npos);
  CHECK_FALSE(doc.find("tf32")->as_bool());
}

// O4 rows come with cuBLASLt's FP8 GEMM peak measured in the same run, and their fraction of it;
// the FP8 peak is measured only when an O4 row is asked for.
TEST_CASE("bench cli: O4 rows are held against an FP8 GEMM peak measured in the same run") {
  GE_REQUIRE_GPU();
  const TinyRun run = tiny_bench("--opt-level O2,O4 --batch-sizes 8 --steps 3 --windows 3");
  INFO(run.output);
  CHECK(run.output.find("cuBLASLt FP8 GEMM peak") != std::string::npos);
  const double fp8_peak = run.doc.find("fp8_gemm_peak_tflops")->as_number();
  // FP8 Tensor Cores have twice the rate of half ones: the peak lies well above the half peak.
  CHECK(fp8_peak > 1.3 * run.doc.find("gemm_peak_tflops")->as_number());
  for (const json::Value& row : run.doc.find("rows")->as_array()) {
    INFO(json::write(row));
    CHECK(row.find("ok")->as_bool());
    const bool o4 = row.find("opt_level")->as_string() == "O4";
    CHECK((row.find("fraction_of_fp8_gemm_peak") != nullptr) == o4);
    if (o4)
      CHECK(row.find("fraction_of_fp8_gemm_peak")->as_number() ==
            doctest::Approx(row.find("tflops")->as_number() / fp8_peak));
  }
  const TinyRun half_only = tiny_bench("--opt-level O2 --batch-sizes 8 --steps 3 --windows 3");
  CHECK(half_only.doc.find("fp8_gemm_peak_tflops") == nullptr);
  CHECK(half_only.output.find("FP8 GEMM peak") == std::string::npos);
}

// --tf32 is an opt-in: said in the header and the JSON, and O0 still runs.
TEST_CASE("bench cli: --tf32 lets O0's convolutions use TF32 and says so") {
  GE_REQUIRE_GPU();
  const TinyRun run = tiny_bench("--opt-level O0 --batch-sizes 8 --steps 2 --windows 1 --tf32");
  CHECK(run.output.find("O0: fp32 with TF32 convolutions (--tf32)") != std::string::npos);
  CHECK(run.doc.find("tf32")->as_bool());
  const auto& rows = run.doc.find("rows")->as_array();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].find("ok")->as_bool());
}

// --loss-scale overrides every opt level's scale, as train's Apex override does.
TEST_CASE("bench cli: --loss-scale sets the scale of every opt level timed") {
  GE_REQUIRE_GPU();
  const TinyRun run = tiny_bench("--opt-level O2,O3 --batch-sizes 8 --steps 2 --windows 1 --loss-scale 128");
  CHECK(run.output.find("loss scale: 128 at every opt level") != std::string::npos);
  CHECK(run.doc.find("loss_scale")->as_string() == "128");
  const auto& rows = run.doc.find("rows")->as_array();
  REQUIRE(rows.size() == 2);
  for (const json::Value& row : rows)
    for (const json::Value& s : row.find("loss_scales")->as_array()) CHECK(s.as_number() == 128.0);
}

// With --dataset the bench runs train's steps: the same batches in the same order and the same
// noise, so its last step's losses are train's at that step, bit for bit. Both processes share
// one algorithm cache, so that they convolve with the same cuDNN algorithms.
TEST_CASE("bench cli: --dataset steps through the batches and noise train does") {
  GE_REQUIRE_GPU();
  TempDir tmp("ge_bench_data");
  const std::string cache = tmp.file("algos.txt");
  ScopedEnv env{{"GANENGINE_CUDNN_CACHE", cache.c_str()}};
  const std::string net = " --imageSize 16 --ngf 8 --ndf 8 --nz 10 --opt-level O2";
  // 6 warm-up steps and 2 windows of 4: 14 steps, inside fake's first epoch (15 full batches of
  // 64 and one of 40, which the bench leaves out).
  const CommandResult t = run_ganengine("train --dataset fake --batchSize 64 --max-steps 14 --no-progress --outf " +
                                        tmp.file("train") + net);
  INFO(t.output);
  REQUIRE(t.exit_code == 0);
  const std::string metrics = read_file_bytes(tmp.file("train/metrics.jsonl"));
  const size_t last_line = metrics.rfind('\n', metrics.size() - 2);
  const json::Value step13 = json::parse(metrics.substr(last_line == std::string::npos ? 0 : last_line + 1));
  REQUIRE(step13.find("step")->as_integer() == 13);
  for (const char* placement : {"host", "gpu"}) {
    const std::string path = tmp.file(std::string("bench_") + placement + ".json");
    const CommandResult b = run_ganengine("bench --dataset fake --data-on " + std::string(placement) +
                                          " --batch-sizes 64 --warmup 6 --steps 4 --windows 2 --json " + path + net);
    INFO(placement, "\n", b.output);
    REQUIRE(b.exit_code == 0);
    CHECK(b.output.find("input: --dataset fake: the input pipeline train uses") != std::string::npos);
    const json::Value doc = json::parse(read_file_bytes(path));
    const auto& rows = doc.find("rows")->as_array();
    REQUIRE(rows.size() == 1);
    const json::Value& row = rows[0];
    REQUIRE(row.find("ok")->as_bool());
    const std::string data = row.find("data")->as_string();
    CHECK(data.find("fake (1000 images, 15 full batches an epoch)") != std::string::npos);
    CHECK(data.find(std::string(placement) == "host" ? "host loader" : "GPU-resident") != std::string::npos);
    CHECK(row.find("graph_nodes")->as_integer() > 0);  // every timed step a replay (run_step_bench checks)
    const json::Value* losses = row.find("losses");
    for (const auto& names : {std::pair<const char*, const char*>{"errD_real", "errD_real"},
                              {"errD_fake", "errD_fake"},
                              {"errG", "loss_G"}}) {
      const char* bench_name = names.first;
      const char* train_name = names.second;
      INFO(bench_name);
      CHECK(static_cast<float>(losses->find(bench_name)->as_number()) ==
            static_cast<float>(step13.find(train_name)->as_number()));
    }
  }
  // A batch larger than the dataset fails its row by name; the other rows still run.
  const CommandResult big = run_ganengine(
      "bench --dataset fake --batch-sizes 64,2048 --warmup 6 --steps 1 "
      "--windows 1" +
      net);
  INFO(big.output);
  CHECK(big.exit_code == 1);
  CHECK(big.output.find("--dataset fake holds 1000 images, fewer than one batch of 2048") != std::string::npos);
  CHECK(big.output.find("batch 64 ") != std::string::npos);
}
