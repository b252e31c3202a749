// `ganengine bench` end to end: its flag errors anywhere, its refusal without a GPU, and on a
// GPU a tiny run whose JSON holds every configuration asked for.
#include "../src/io/json.h"
#include "cli_runner.h"
#include "ganengine/step_flops.h"
#include "temp_dir.h"
#include "test_util.h"

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
  expect_error("--opt-level O0,O4", "unknown opt level 'O4'");
  expect_error("--opt-level O1,", "has an empty item");
  expect_error("--batch-sizes 64,abc", "'abc' is not a batch size");
  expect_error("--batch-sizes 0", "'0' is not a batch size");
  expect_error("--steps 0", "--steps 0 (expected at least 1)");
  expect_error("--imageSize 48", "--imageSize 48 is not supported");
  expect_error("--cuda-graph sometimes", "--cuda-graph 'sometimes'");
  expect_error("--cuda-graph on --warmup 2", "--warmup 2 is too short");
  expect_error("--loss-scale -3", "--loss-scale '-3' (expected 'dynamic' or a positive number");
  expect_error("--device cpu", "ganengine bench needs a CUDA GPU");
}

TEST_CASE("bench cli: without a GPU it says so") {
  if (cuda_available()) return;
  expect_error("", "ganengine bench needs a CUDA GPU");
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
