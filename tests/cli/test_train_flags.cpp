// `ganengine train`'s flag parsing (cli/train_flags.h) called directly: valid command lines give
// the values they always gave, and every bad value of a numeric flag is a ge::Error whose text
// begins with the flag. A host allocation that fails names the flags that sized it
// (cli/out_of_memory.h), in the parser's tests and end to end.
#include <doctest/doctest.h>

#include <algorithm>
#include <new>
#include <string>
#include <vector>

#include "cli/out_of_memory.h"
#include "cli/train_flags.h"
#include "ganengine/error.h"
#include "support/cli_runner.h"
#include "support/temp_dir.h"

using namespace ge;
using namespace ge::test;

namespace {

cli::TrainFlags parse(std::vector<std::string> words) {
  words.insert(words.begin(), "train");
  std::vector<const char*> argv;
  for (const std::string& w : words) argv.push_back(w.c_str());
  const std::optional<cli::TrainFlags> flags = cli::parse_train_flags(static_cast<int>(argv.size()), argv.data());
  REQUIRE(flags.has_value());
  return *flags;
}

// The message of the ge::Error that parsing these words ends in ("" when it parses).
std::string refusal(const std::vector<std::string>& words) {
  try {
    parse(words);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("cli train flags: defaults and valid spellings parse to the values they always gave") {
  const TrainOptions d = parse({}).options;
  CHECK(d.batch_size == 64);
  CHECK(d.image_size == 64);
  CHECK(d.nz == 100);
  CHECK(d.ngf == 64);
  CHECK(d.niter == 25);
  CHECK(d.lr == 0.0002);
  CHECK(d.beta1 == 0.5);
  CHECK(d.manual_seed == 2809);
  CHECK(d.amp.min_loss_scale == 1.52587890625e-05f);
  CHECK(d.max_steps == -1);
  CHECK(d.checkpoint_every_seconds == 600);

  const cli::TrainFlags f = parse({"--batch-size",
                                   "32",
                                   "--image-size=0x20",
                                   "--nz",
                                   "007",
                                   "--lr=1e-3",
                                   "--beta1",
                                   ".9",
                                   "--manual-seed",
                                   "18446744073709551615",
                                   "--max-steps=-1",
                                   "--checkpoint-every",
                                   "25",
                                   "--ema-decay",
                                   "0.999",
                                   "--min-loss-scale",
                                   "1",
                                   "--loss-scale",
                                   "128",
                                   "--threads",
                                   "3",
                                   "--debug-force-overflow",
                                   "3:0,5:2",
                                   "--profile-steps",
                                   "10:14",
                                   "--workers=0"});
  const TrainOptions& o = f.options;
  CHECK(o.batch_size == 32);
  CHECK(o.image_size == 32);  // cxxopts' hex spelling, which the flags have always taken
  CHECK(o.nz == 7);
  CHECK(o.lr == 1e-3);
  CHECK(o.beta1 == 0.9);
  CHECK(o.manual_seed == 18446744073709551615ULL);
  CHECK(o.checkpoint_every_steps == 25);
  CHECK(o.checkpoint_every_seconds == 0);
  CHECK(o.ema_decay == 0.999);
  CHECK(o.amp.min_loss_scale == 1.0f);
  CHECK(o.amp.loss_scale == std::optional<std::string>("128"));
  CHECK(f.threads == 3);
  CHECK(o.force_overflow == std::vector<std::pair<int64_t, int>>{{3, 0}, {5, 2}});
  CHECK(o.profile_steps == std::pair<int64_t, int64_t>{10, 14});
  CHECK(o.workers == 0);
  // run.json and the training state record the flags as given.
  bool recorded = false;
  for (const auto& [name, value] : o.flag_values)
    if (name == "imageSize") recorded = value == "0x20";
  CHECK(recorded);
}

TEST_CASE("cli train flags: every bad value of every numeric flag is refused naming the flag") {
  // Refused by every numeric flag, whatever it means: nothing, garbage after a number, no
  // number, NaN and infinities, a value beyond 64 bits, spaces, a lone sign.
  const std::vector<std::string> never = {"",   "1x", "x1", "nan", "inf", "-inf", "1e999",
                                          " 5", "5 ", "-",  "+",   "1e",  "0x",   "1..2"};
  // Refused by the flags that take whole numbers (all but those of reals).
  const std::vector<std::string> not_whole = {"99999999999999999999", "1.5", "1e3"};
  const std::vector<std::string> reals = {"--lr", "--beta1", "--loss-scale", "--min-loss-scale", "--ema-decay"};
  struct Flag {
    std::string given, named;               // as written, as the message names it
    std::vector<std::string> out_of_range;  // values that parse but mean nothing for this flag
  };
  const std::vector<Flag> flags = {
      {"--workers", "--workers", {"-1", "257", "2147483648"}},
      {"--batchSize", "--batchSize", {"0", "-64", "100000000", "9223372036854775807"}},
      {"--batch-size", "--batchSize", {"0"}},
      {"--imageSize", "--imageSize", {"0", "48", "1024", "1073741824", "2147483647", "4294967360"}},
      {"--image-size", "--imageSize", {"-64"}},
      {"--nz", "--nz", {"0", "-1", "100001"}},
      {"--ngf", "--ngf", {"0", "4097"}},
      {"--ndf", "--ndf", {"0", "-4096"}},
      {"--niter", "--niter", {"0", "-1", "2147483648"}},
      {"--lr", "--lr", {"-0.1", "1.5", "1e400"}},
      {"--beta1", "--beta1", {"1", "-1e-9"}},
      {"--ngpu", "--ngpu", {"0", "65"}},
      {"--manualSeed", "--manualSeed", {"-1", "18446744073709551616"}},
      {"--manual-seed", "--manualSeed", {"-0"}},
      {"--threads", "--threads", {"-2"}},
      {"--loss-scale", "--loss-scale", {"0", "-3", "1e39", "1e-50"}},
      {"--min-loss-scale", "--min-loss-scale", {"0", "-1", "1e-50", "1e39"}},
      {"--log-interval", "--log-interval", {"0", "-1"}},
      {"--sample-interval", "--sample-interval", {"0"}},
      {"--max-steps", "--max-steps", {"-2", "-9223372036854775808"}},
      {"--checkpoint-every", "--checkpoint-every", {"-3", "+5", "5x", "1099511627777", "5d"}},
      {"--ema-decay", "--ema-decay", {"1", "-0.5"}},
      {"--debug-force-overflow", "--debug-force-overflow", {"1", "1:3", "-1:0", "1:0,", ",1:0", "1:0,,2:1"}},
      {"--profile-steps", "--profile-steps", {"14:10", ":5", "5:", "-1:3", "1:2:3"}},
  };
  for (const Flag& flag : flags) {
    std::vector<std::string> bad = never;
    if (std::find(reals.begin(), reals.end(), flag.named) == reals.end())
      bad.insert(bad.end(), not_whole.begin(), not_whole.end());
    bad.insert(bad.end(), flag.out_of_range.begin(), flag.out_of_range.end());
    for (const std::string& value : bad)
      for (bool equals : {false, true}) {
        const std::vector<std::string> words =
            equals ? std::vector<std::string>{flag.given + "=" + value} : std::vector<std::string>{flag.given, value};
        CAPTURE(flag.given);
        CAPTURE(value);
        const std::string message = refusal(words);
        CHECK(message.rfind(flag.named, 0) == 0);
        CHECK(message.find(".cpp:") == std::string::npos);  // a user's error, not an internal check
      }
  }
}

TEST_CASE("cli train flags: the messages quote the value and say what the flag takes") {
  CHECK(refusal({"--batchSize", "1x"}) ==
        "--batchSize '1x' is not a valid value (expected a whole number: a positive number)");
  CHECK(refusal({"--imageSize", "4294967360"}) ==
        "--imageSize '4294967360' is out of range (expected a power of two from 16 to 512)");
  CHECK(refusal({"--lr", "nan"}) ==
        "--lr 'nan' is not a valid value (expected a number: a learning rate in [0, 1], the example's is 0.0002)");
  CHECK(refusal({"--nz="}) == "--nz '' is not a valid value (expected a whole number: 1..100000)");
  CHECK(refusal({"--batchSize", "100000000"}) ==
        "--batchSize x --nz is too large (10000000000 noise values per step, at most 16777216: with --nz 100, "
        "--batchSize at most 167772)");
  CHECK(refusal({"--batchSize", "2305843009213693953", "--nz", "8"})
            .rfind("--batchSize x --nz (noise values per step): 2305843009213693953 x 8 is not a valid size", 0) == 0);
}

TEST_CASE("cli train flags: a failed host allocation becomes an error naming the flags that sized it") {
  TrainOptions opt;
  opt.dataset = "fake";
  opt.batch_size = 100000;
  opt.image_size = 512;
  const auto throws = [](auto failure) { return [failure]() -> int { throw failure; }; };
  std::string message;
  try {
    cli::naming_sizes_when_out_of_memory(opt, throws(std::bad_alloc()));
  } catch (const Error& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(message.rfind("out of host memory (std::bad_alloc): ", 0) == 0);
  // 100000 x 3 x 512 x 512 x 4 bytes
  CHECK(message.find("--batchSize 100000 of 512 x 512 images (--imageSize) needs at least 293.0 GiB") !=
        std::string::npos);
  CHECK(message.find("lower --batchSize") != std::string::npos);

  message.clear();
  try {
    cli::naming_sizes_when_out_of_memory(opt, throws(Error("out of host memory allocating 8 bytes")));
  } catch (const Error& e) {
    message = e.what();
  }
  CHECK(message.rfind("out of host memory allocating 8 bytes: ", 0) == 0);
  CHECK(message.find("--batchSize 100000") != std::string::npos);
  // Other errors pass through as they are.
  CHECK_THROWS_WITH_AS(cli::naming_sizes_when_out_of_memory(opt, throws(Error("--dataroot"))), "--dataroot", Error);
  CHECK(cli::naming_sizes_when_out_of_memory(opt, [] { return 7; }) == 7);
}

TEST_CASE("cli train flags: sizes beyond memory end in an error naming the flag and not in an abort") {
  TempDir tmp("ge_train_flags_oom");
  // The batch's noise alone is beyond what a step draws: refused before anything is allocated.
  const CommandResult noise = run_ganengine(
      "train --dataset fake --batchSize 100000000 --imageSize 64 --device cpu-reference --max-steps 1 "
      "--no-progress --outf " +
      tmp.file("a"));
  INFO(noise.output);
  CHECK(noise.exit_code == 1);
  CHECK(noise.output.find("--batchSize at most 167772") != std::string::npos);
  // Terabytes of weights, beyond any machine's memory: refused before anything is allocated (an
  // allocation the kernel overcommits would have the process killed as it is written), naming --ngf.
  const CommandResult weights = run_ganengine(
      "train --dataset fake --imageSize 512 --ngf 4096 --ndf 4096 --device cpu-reference --max-steps 1 "
      "--no-progress --outf " +
      tmp.file("b"));
  INFO(weights.output);
  CHECK(weights.exit_code == 1);
  CHECK(weights.output.find("error: out of host memory") != std::string::npos);
  CHECK(weights.output.find("--ngf 4096, --ndf 4096 at least") != std::string::npos);
  CHECK(weights.output.find("lower --ngf and --ndf") != std::string::npos);
  CHECK(weights.output.find("terminate") == std::string::npos);
}
