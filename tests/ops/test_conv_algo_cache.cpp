// The persisted cuDNN algorithm choices (conv_algo_cache.h): the file format, merging between
// processes, damaged files, unwritable places, and which file a process uses.
#include <fstream>
#include <sstream>
#include <string>

#include "core/conv_algo_cache.h"
#include "support/cli_runner.h"
#include "support/scoped_env.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

using namespace ge;
using namespace ge::test;

namespace {
std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
int count_lines(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n;
}
}  // namespace

TEST_CASE("conv algorithm cache: a stored choice is found by the next process and counted") {
  TempDir tmp;
  const std::string path = (tmp.dir / "sub" / "algos.txt").string();  // the directory is made
  const ConvAlgoChoice fwd{1, 2, 4096, ""}, wgrad{7, 0, 0, "e65,2=1,28=8"};
  {
    ConvAlgoCache first(path);
    CHECK_FALSE(first.find("gpu|fwd|64"));
    first.store("gpu|fwd|64", fwd);
    first.store("gpu|wgrad|64", wgrad);
    CHECK(first.searches() == 2);
    CHECK(first.hits() == 0);
  }
  ConvAlgoCache next(path);
  CHECK(next.find("gpu|fwd|64") == fwd);
  CHECK(next.find("gpu|wgrad|64") == wgrad);
  CHECK_FALSE(next.find("gpu|fwd|128"));
  CHECK(next.hits() == 2);
  CHECK(next.searches() == 0);
  const std::string text = read_all(path);
  CHECK(text.rfind("# ganengine cuDNN algorithm cache 1", 0) == 0);
  CHECK(text.find("gpu|fwd|64 1 2 4096\n") != std::string::npos);
  CHECK(text.find("gpu|wgrad|64 7 0 0 e65,2=1,28=8\n") != std::string::npos);
  CHECK_THROWS_WITH_AS(next.store("has blank", fwd), doctest::Contains("blanks"), Error);
}

TEST_CASE("conv algorithm cache: choices two processes store at once all reach the file") {
  TempDir tmp;
  const std::string path = (tmp.dir / "algos.txt").string();
  ConvAlgoCache a(path), b(path);
  CHECK_FALSE(a.find("k1"));  // both have read the (missing) file
  CHECK_FALSE(b.find("k1"));
  a.store("k1", {1, 1, 1, ""});
  b.store("k2", {2, 2, 2, ""});  // b never saw k1, but merges it from the file
  ConvAlgoCache c(path);
  CHECK(c.find("k1") == ConvAlgoChoice{1, 1, 1, ""});
  CHECK(c.find("k2") == ConvAlgoChoice{2, 2, 2, ""});
  CHECK(count_lines(read_all(path)) == 3);
}

TEST_CASE("conv algorithm cache: lines it cannot read are ignored and dropped at the next write") {
  TempDir tmp;
  const std::filesystem::path path = tmp.dir / "algos.txt";
  std::ofstream(path) << "# header\ngood 3 1 0\nbad\nworse 1 2\nnegative -1 0 0\ntrailing 1 1 1 x\n"
                         "engine 1 1 1 e3,2=0\nengine_trailing 1 1 1 e3 x\n";
  ConvAlgoCache cache(path.string());
  CHECK(cache.find("good") == ConvAlgoChoice{3, 1, 0, ""});
  CHECK(cache.find("engine") == ConvAlgoChoice{1, 1, 1, "e3,2=0"});
  CHECK_FALSE(cache.find("engine_trailing"));
  CHECK_FALSE(cache.find("bad"));
  CHECK_FALSE(cache.find("negative"));
  cache.store("new", {4, 0, 8, ""});
  const std::string text = read_all(path);
  CHECK(text.find("bad") == std::string::npos);
  CHECK(text.find("trailing") == std::string::npos);
  CHECK(text.find("good 3 1 0\n") != std::string::npos);
  CHECK(text.find("new 4 0 8\n") != std::string::npos);
}

TEST_CASE("conv algorithm cache: a place that cannot be written keeps choices in memory only") {
  TempDir tmp;
  std::ofstream(tmp.dir / "file") << "not a directory";
  ConvAlgoCache cache((tmp.dir / "file" / "algos.txt").string());
  CHECK_NOTHROW(cache.store("k", {5, 1, 0, ""}));  // a warning on stderr, no error
  CHECK(cache.find("k") == ConvAlgoChoice{5, 1, 0, ""});
  ConvAlgoCache memory_only("");
  memory_only.store("k", {6, 0, 0, ""});
  CHECK(memory_only.find("k") == ConvAlgoChoice{6, 0, 0, ""});
}

TEST_CASE("conv algorithm cache: the file comes from GANENGINE_CUDNN_CACHE or else XDG_CACHE_HOME or else HOME") {
  {
    ScopedEnv env{{"GANENGINE_CUDNN_CACHE", "/tmp/x/algos.txt"}, {"XDG_CACHE_HOME", "/xdg"}};
    CHECK(default_conv_algo_cache_path() == "/tmp/x/algos.txt");
  }
  {
    ScopedEnv env{{"GANENGINE_CUDNN_CACHE", "off"}, {"XDG_CACHE_HOME", "/xdg"}};
    CHECK(default_conv_algo_cache_path().empty());
  }
  {
    ScopedEnv env{{"GANENGINE_CUDNN_CACHE", nullptr}, {"XDG_CACHE_HOME", "/xdg"}, {"HOME", "/home/u"}};
    CHECK(default_conv_algo_cache_path() == "/xdg/ganengine/cudnn_algos.txt");
  }
  {
    ScopedEnv env{{"GANENGINE_CUDNN_CACHE", nullptr}, {"XDG_CACHE_HOME", nullptr}, {"HOME", "/home/u"}};
    CHECK(default_conv_algo_cache_path() == "/home/u/.cache/ganengine/cudnn_algos.txt");
  }
  {
    ScopedEnv env{{"GANENGINE_CUDNN_CACHE", nullptr}, {"XDG_CACHE_HOME", nullptr}, {"HOME", nullptr}};
    CHECK(default_conv_algo_cache_path().empty());
  }
}

TEST_CASE("gpu train cli: a second run takes its cuDNN algorithms from the cache file instead of searching") {
  GE_REQUIRE_GPU();
  TempDir tmp;
  const std::string file = (tmp.dir / "algos.txt").string();
  ScopedEnv env{{"GANENGINE_CUDNN_CACHE", file.c_str()}};
  const std::string args =
      "train --dataset fake --imageSize 16 --ngf 8 --ndf 8 --batchSize 16 --max-steps 4 "
      "--opt-level O2 --no-progress --outf ";
  const CommandResult first = run_ganengine(args + (tmp.dir / "a").string());
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  const size_t at = first.output.find("cuDNN algorithms: ");
  REQUIRE(at != std::string::npos);
  const int searched = std::stoi(first.output.substr(at + 18));
  // The cuDNN passes of G's and D's inner layers (8 at this size on compute capability 9.0; the
  // 8-channel and one-output layers run hand-written kernels and search nothing). Without any,
  // the second run's "0 searched, 0 from" below would prove nothing.
  CHECK(searched > 0);
  CHECK(first.output.find(" searched, 0 from " + file) != std::string::npos);
  CHECK(count_lines(read_all(file)) >= searched + 1);  // the header, and later shapes if any
  const CommandResult second = run_ganengine(args + (tmp.dir / "b").string());
  INFO(second.output);
  REQUIRE(second.exit_code == 0);
  CHECK(second.output.find("cuDNN algorithms: 0 searched, " + std::to_string(searched) + " from " + file) !=
        std::string::npos);
}
