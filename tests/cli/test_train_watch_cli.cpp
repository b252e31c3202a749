// Watching a `ganengine train` run end to end on the CPU: metrics.jsonl's times and learning
// rates, run.json, the TensorBoard event files against metrics.jsonl and the sample grids, the
// moving average of G's weights (--ema-decay) with its exact resume, and the progress line on a
// terminal (through script(1)'s pseudo-terminal) and off one.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "ganengine/safetensors.h"
#include "io/json.h"
#include "io/test_tensorboard_reader.h"
#include "support/cli_runner.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

using namespace ge;
using namespace ge::test;

namespace {

const std::string kTiny = "--dataset fake --device cpu --imageSize 16 --ngf 4 --ndf 4 --nz 8 ";

bool exists(const std::string& p) { return std::filesystem::exists(p); }

void expect_ok(const CommandResult& r) {
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
}

std::vector<json::Value> metrics_of(const std::string& path) {
  std::vector<json::Value> records;
  std::istringstream in(read_file_bytes(path));
  for (std::string line; std::getline(in, line);) records.push_back(json::parse(line));
  return records;
}

// The TensorBoard tag of each metrics.jsonl number (key, index in an array or -1), as
// tools/check_tensorboard.py pairs them.
const std::map<std::string, std::pair<std::string, int>> kTagKeys = {
    {"Loss_D", {"loss_D", -1}},
    {"Loss_G", {"loss_G", -1}},
    {"errD_real", {"errD_real", -1}},
    {"errD_fake", {"errD_fake", -1}},
    {"D_x", {"D_x", -1}},
    {"D_G_z1", {"D_G_z1", -1}},
    {"D_G_z2", {"D_G_z2", -1}},
    {"loss_scale/errD_real", {"loss_scale", 0}},
    {"loss_scale/errD_fake", {"loss_scale", 1}},
    {"loss_scale/errG", {"loss_scale", 2}},
    {"overflow/errD_real", {"overflow", 0}},
    {"overflow/errD_fake", {"overflow", 1}},
    {"overflow/errG", {"overflow", 2}},
    {"images_per_s", {"images_per_s", -1}},
    {"lr/G", {"lr_G", -1}},
    {"lr/D", {"lr_D", -1}},
};

double metric(const json::Value& record, const std::pair<std::string, int>& key) {
  const json::Value* v = record.find(key.first);
  REQUIRE(v != nullptr);
  return key.second < 0 ? v->as_number() : v->as_array().at(static_cast<size_t>(key.second)).as_number();
}

std::vector<std::string> event_files(const TempDir& run) {
  std::vector<std::string> files;
  if (!exists(run.file("tb"))) return files;
  for (const auto& e : std::filesystem::directory_iterator(run.dir / "tb")) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

std::map<std::string, Tensor> tensors_of(const std::string& path) { return load_safetensors(path).tensors; }

bool same_tensor_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

}  // namespace

TEST_CASE("train watch cli: metrics records carry times and learning rates and run.json the configuration") {
  TempDir tmp("ge_watch");
  const double before = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  expect_ok(run_ganengine("train " + kTiny + "--no-progress --batchSize 8 --max-steps 3 --lr 0.0003 --outf " +
                          tmp.dir.string()));
  const double after = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const std::vector<json::Value> records = metrics_of(tmp.file("metrics.jsonl"));
  REQUIRE(records.size() == 3);
  double last_elapsed = -1;
  for (const json::Value& r : records) {
    CHECK(r.find("time")->as_number() >= before - 1);
    CHECK(r.find("time")->as_number() <= after + 1);
    const double elapsed = r.find("elapsed_s")->as_number();
    CHECK(elapsed >= last_elapsed);
    CHECK(elapsed <= after - before + 1);
    last_elapsed = elapsed;
    CHECK(r.find("lr_G")->as_number() == 0.0003);
    CHECK(r.find("lr_D")->as_number() == 0.0003);
  }

  REQUIRE(exists(tmp.file("run.json")));
  const json::Value run = json::parse(read_file_bytes(tmp.file("run.json")));
  const std::string version_line = run_ganengine("--version").output;
  CHECK(version_line.find(run.find("version")->as_string()) != std::string::npos);
  CHECK(!run.find("version")->as_string().empty());
  const std::string commit = run.find("git_commit")->as_string();
  CHECK((commit == "unknown" || commit.size() == 40));
  const json::Value& flags = *run.find("flags");
  CHECK(flags.find("lr")->as_string() == "0.0003");
  CHECK(flags.find("batchSize")->as_string() == "8");
  CHECK(flags.find("max-steps")->as_string() == "3");
  CHECK(flags.find("niter")->as_string() == "25");  // defaults too
  CHECK(flags.find("no-tensorboard")->as_string() == "false");
  CHECK(flags.find("no-progress")->as_string() == "true");
  CHECK(flags.find("ema-decay")->as_string() == "0");
  // Every flag of --help, nothing else.
  const std::string help = run_ganengine("train --help").output;
  size_t listed = 0;
  for (const json::Member& m : flags.as_object()) {
    INFO(m.key);
    CHECK(help.find("--" + m.key) != std::string::npos);
    ++listed;
  }
  // Options are listed 6 spaces in (descriptions wrap further in); "-h, --help" is no setting.
  size_t in_help = 0;
  std::istringstream help_lines(help);
  for (std::string line; std::getline(help_lines, line);) in_help += line.rfind("      --", 0) == 0;
  CHECK(listed == in_help);
  const json::Value& resolved = *run.find("resolved");
  CHECK(resolved.find("device")->as_string() == "cpu");
  CHECK(resolved.find("batches_per_epoch")->as_integer() == 125);
  CHECK(resolved.find("stop_step")->as_integer() == 3);
  CHECK(resolved.find("lr_G")->as_number() == 0.0003);
  const json::Value& policy = *run.find("precision_policy");
  CHECK(policy.find("opt_level")->as_string() == "O1");
  CHECK(policy.find("compute_dtype")->as_string() == "f16");
  CHECK(policy.find("dynamic_loss_scale")->as_bool());
  CHECK(run.find("gpu")->is_null());  // trained on the CPU
  CHECK(!run.find("system")->as_array().empty());
}

TEST_CASE("train watch cli: tensorboard events match metrics.jsonl and the sample grids") {
  for (int log_interval : {1, 3}) {
    CAPTURE(log_interval);
    TempDir tmp("ge_watch");
    // 1000 images in batches of 300: 4 steps an epoch, the last a partial batch.
    expect_ok(run_ganengine("train " + kTiny + "--no-progress --batchSize 300 --niter 2 --sample-interval 2 " +
                            "--log-interval " + std::to_string(log_interval) + " --outf " + tmp.dir.string()));
    const std::vector<std::string> files = event_files(tmp);
    REQUIRE(files.size() == 1);
    CHECK(std::filesystem::path(files[0]).filename().string().rfind("events.out.tfevents.", 0) == 0);
    const std::vector<TbEvent> events = read_tb_events(read_file_bytes(files[0]));
    REQUIRE(!events.empty());
    CHECK(events[0].file_version == "brain.Event:2");

    std::map<int64_t, json::Value> by_step;
    for (const json::Value& r : metrics_of(tmp.file("metrics.jsonl"))) by_step[r.find("step")->as_integer()] = r;
    std::map<int64_t, int> scalar_steps;
    std::vector<std::pair<int64_t, std::string>> images;
    for (size_t k = 1; k < events.size(); ++k) {
      const TbEvent& e = events[k];
      REQUIRE(!e.values.empty());
      if (e.values[0].has_image) {
        images.emplace_back(e.step, e.values[0].encoded_image);
        CHECK(e.values[0].tag == "fake_samples");
        continue;
      }
      ++scalar_steps[e.step];
      INFO("step ", e.step);
      REQUIRE(by_step.count(e.step));
      const json::Value& record = by_step.at(e.step);
      CHECK(std::abs(e.wall_time - record.find("time")->as_number()) < 1e-5);
      std::set<std::string> tags;
      for (const TbValue& v : e.values) {
        INFO(v.tag);
        REQUIRE(kTagKeys.count(v.tag));
        tags.insert(v.tag);
        CHECK(v.simple_value == static_cast<float>(metric(record, kTagKeys.at(v.tag))));
      }
      CHECK(tags.size() == kTagKeys.size());
    }
    // Every logged step, once.
    CHECK(scalar_steps.size() == by_step.size());
    for (const auto& [step, count] : scalar_steps) CHECK(count == 1);
    // Grids at batches 0 and 2 and the epoch's last (3) of each epoch; the last of each epoch is
    // its PNG file, byte for byte.
    std::vector<int64_t> image_steps;
    for (const auto& im : images) image_steps.push_back(im.first);
    CHECK(image_steps == std::vector<int64_t>{0, 2, 3, 4, 6, 7});
    CHECK(images[2].second == read_file_bytes(tmp.file("fake_samples_epoch_000.png")));
    CHECK(images[5].second == read_file_bytes(tmp.file("fake_samples_epoch_001.png")));
  }
}

TEST_CASE("train watch cli: no-tensorboard writes no event files") {
  TempDir tmp("ge_watch");
  expect_ok(run_ganengine("train " + kTiny + "--no-progress --batchSize 8 --max-steps 2 --no-tensorboard --outf " +
                          tmp.dir.string()));
  CHECK(exists(tmp.file("metrics.jsonl")));
  CHECK_FALSE(exists(tmp.file("tb")));
}

TEST_CASE("train watch cli: a resumed run's event file restarts at the resumed step") {
  TempDir tmp("ge_watch");
  const std::string common = "train " + kTiny + "--no-progress --batchSize 300 --niter 2 --outf " + tmp.dir.string();
  expect_ok(run_ganengine(common + " --max-steps 3"));
  expect_ok(run_ganengine(common + " --max-steps 6 --resume " + tmp.file("training_state.safetensors")));
  const std::vector<std::string> files = event_files(tmp);
  REQUIRE(files.size() == 2);
  std::vector<TbEvent> first = read_tb_events(read_file_bytes(files[0]));
  std::vector<TbEvent> second = read_tb_events(read_file_bytes(files[1]));
  if (first.size() > 1 && first[1].log_status == 1) std::swap(first, second);
  REQUIRE(second.size() > 2);
  CHECK(second[1].log_status == 1);
  CHECK(second[1].step == 3);
  CHECK(second[2].step == 3);  // the first step this run logs
}

TEST_CASE("train watch cli: ema-decay writes the average under G's names and draws the grids with it") {
  TempDir plain("ge_plain"), ema("ge_ema");
  const std::string common = "train " + kTiny + "--no-progress --batchSize 8 --max-steps 4 --opt-level O2 --outf ";
  expect_ok(run_ganengine(common + plain.dir.string()));
  expect_ok(run_ganengine(common + ema.dir.string() + " --ema-decay 0.9"));
  CHECK_FALSE(exists(plain.file("netG_ema_epoch_0.safetensors")));
  REQUIRE(exists(ema.file("netG_ema_epoch_0.safetensors")));
  // The average leaves training alone: the same weights either way.
  const auto g_plain = tensors_of(plain.file("netG_epoch_0.safetensors"));
  const auto g = tensors_of(ema.file("netG_epoch_0.safetensors"));
  const auto g_ema = tensors_of(ema.file("netG_ema_epoch_0.safetensors"));
  REQUIRE(g.size() == g_plain.size());
  REQUIRE(g_ema.size() == g.size());
  int averaged = 0;
  for (const auto& entry : g) {
    const std::string& key = entry.first;
    const Tensor& t = entry.second;
    INFO(key);
    CHECK(same_tensor_bytes(g_plain.at(key), t));
    REQUIRE(g_ema.count(key));
    const Tensor& a = g_ema.at(key);
    CHECK(a.shape() == t.shape());
    CHECK(a.dtype() == t.dtype());
    const bool buffer = key.find("running_") != std::string::npos || key.find("num_batches") != std::string::npos;
    if (buffer) {
      CHECK(same_tensor_bytes(a, t));  // BatchNorm buffers copied as they are
    } else {
      CHECK_FALSE(same_tensor_bytes(a, t));
      ++averaged;
    }
  }
  CHECK(averaged == 7);  // G at 16x16: 3 convolutions, and 2 BatchNorms' weight and bias
  // The grid is drawn with the average.
  CHECK(read_file_bytes(plain.file("fake_samples_epoch_000.png")) !=
        read_file_bytes(ema.file("fake_samples_epoch_000.png")));
  CHECK(read_file_bytes(plain.file("real_samples.png")) == read_file_bytes(ema.file("real_samples.png")));
  const auto bad = run_ganengine(common + ema.dir.string() + " --ema-decay 1.5");
  CHECK(bad.exit_code != 0);
  CHECK(bad.output.find("--ema-decay 1.5") != std::string::npos);
}

TEST_CASE("train watch cli: an ema run stopped and resumed is bitwise the uninterrupted run") {
  for (const std::string level : {"O0", "O2"}) {
    INFO(level);
    TempDir whole("ge_whole"), parts("ge_parts");
    const std::string common =
        "train " + kTiny + "--no-progress --batchSize 300 --niter 3 --ema-decay 0.8 --opt-level " + level + " ";
    expect_ok(run_ganengine(common + "--max-steps 7 --outf " + whole.dir.string()));
    expect_ok(run_ganengine(common + "--max-steps 3 --outf " + parts.dir.string()));
    expect_ok(run_ganengine(common + "--max-steps 7 --outf " + parts.dir.string() + " --resume " +
                            parts.file("training_state.safetensors")));
    for (const char* file : {"netG_ema_epoch_1.safetensors", "training_state.safetensors"}) {
      INFO(file);
      const auto a = tensors_of(whole.file(file)), b = tensors_of(parts.file(file));
      REQUIRE(a.size() == b.size());
      int ema_tensors = 0;
      for (const auto& entry : a) {
        const std::string& key = entry.first;
        const Tensor& t = entry.second;
        INFO(key);
        REQUIRE(b.count(key));
        CHECK(same_tensor_bytes(t, b.at(key)));
        ema_tensors += key.rfind("G_ema.", 0) == 0;
      }
      if (std::string(file) == "training_state.safetensors") CHECK(ema_tensors == 7);
    }
    CHECK(read_file_bytes(whole.file("fake_samples_epoch_001.png")) ==
          read_file_bytes(parts.file("fake_samples_epoch_001.png")));
  }
}

TEST_CASE("train watch cli: the progress line redraws on a terminal apart from the log lines") {
  TempDir tmp("ge_watch");
  // A run of a second or more (a grid every 5 steps slows it), a log line every 100 batches, so
  // most redraws come from the progress line's own clock (tests/train/test_progress_line.cpp
  // times them).
  const std::string args = "train " + kTiny + "--batchSize 8 --max-steps 300 --log-interval 100 " +
                           "--sample-interval 5 --outf " + tmp.dir.string();
  const CommandResult tty = run_command("script -q -e -c '" + ganengine_binary() + " " + args + "' /dev/null");
  INFO(tty.output);
  REQUIRE(tty.exit_code == 0);
  const std::string erase = "\r\033[K";
  size_t draws = 0;
  for (size_t at = tty.output.find(erase + "epoch "); at != std::string::npos;
       at = tty.output.find(erase + "epoch ", at + 1))
    ++draws;
  CHECK(draws >= 1);
  CHECK(tty.output.find("/300  ") != std::string::npos);  // step k of the run's 300
  CHECK(tty.output.find("ETA epoch ") != std::string::npos);
  // Every log line begins at a line's start, or right after the progress line was erased.
  std::istringstream lines(tty.output);
  int log_lines = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("] Loss_D: ") == std::string::npos) continue;
    ++log_lines;
    const size_t erased = line.rfind(erase);
    const std::string shown = erased == std::string::npos ? line : line.substr(erased + erase.size());
    INFO(line);
    CHECK(shown.rfind('[', 0) == 0);
    CHECK(shown.find("] Loss_D: ") != std::string::npos);
  }
  CHECK(log_lines == 8);  // batches 0, 100 and 124 of epochs 0 and 1; 0 and 49 of epoch 2
  // The line is erased at the end: the last thing on the terminal is the summary.
  CHECK(tty.output.find("done: 300 steps") > tty.output.rfind(erase + "epoch "));

  // Off a terminal: the same run prints no escape codes and no progress line.
  TempDir plain("ge_watch");
  const CommandResult piped = run_ganengine("train " + kTiny + "--batchSize 8 --max-steps 300 --log-interval 100 " +
                                            "--sample-interval 5 --outf " + plain.dir.string());
  expect_ok(piped);
  CHECK(piped.output.find('\033') == std::string::npos);
  CHECK(piped.output.find("ETA") == std::string::npos);
}
