// The dataset registry: every entry is found by its name and opens through its factory as the
// dataset it claims to be (name, channels), the downloadable ones have an official plan, and
// every command's --help lists exactly the registry's names.
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "data/dataset_registry.h"
#include "data/download.h"
#include "ganengine/error.h"
#include "support/cli_runner.h"
#include "support/dataset_fixtures.h"
#include "support/image_files.h"
#include "support/lmdb_fixture.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

using namespace ge;
using namespace ge::test;
namespace fs = std::filesystem;

namespace {

void put(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  write_file_bytes(path.string(), bytes);
}

// The --dataset choices one command's --help shows, in its order: the first "a | b | ..." run
// after "--dataset", the help's line wrapping undone.
std::vector<std::string> help_dataset_choices(const std::string& command) {
  const CommandResult r = run_ganengine(command + " --help");
  INFO(command, "\n", r.output);
  REQUIRE(r.exit_code == 0);
  const std::string help = std::regex_replace(r.output, std::regex("\\s+"), " ");
  const size_t flag = help.find("--dataset ");
  REQUIRE(flag != std::string::npos);
  std::smatch m;
  const std::string after = help.substr(flag);
  REQUIRE(std::regex_search(after, m, std::regex("[a-z0-9-]+( \\| [a-z0-9-]+)+")));
  std::vector<std::string> names;
  const std::string list = m.str();
  for (size_t pos = 0; pos <= list.size();) {
    const size_t bar = list.find(" | ", pos);
    names.push_back(list.substr(pos, bar == std::string::npos ? std::string::npos : bar - pos));
    pos = bar == std::string::npos ? list.size() + 1 : bar + 3;
  }
  return names;
}

}  // namespace

TEST_CASE("dataset registry: every entry is found by its name and has a factory") {
  const std::vector<DatasetEntry>& entries = dataset_registry();
  REQUIRE(!entries.empty());
  std::set<std::string> seen;
  for (const DatasetEntry& e : entries) {
    CAPTURE(e.name);
    CHECK(seen.insert(e.name).second);  // names are unique
    CHECK(find_dataset(e.name) == &e);
    CHECK(&dataset_entry(e.name) == &e);
    CHECK(static_cast<bool>(e.open));
    CHECK((e.channels == 1 || e.channels == 3));
    CHECK(dataset_channels(e.name) == e.channels);
    CHECK(dataset_has_download(e.name) == e.downloadable());
    if (e.downloadable()) {
      const DownloadPlan plan = official_download_plan(e.name);
      CHECK(plan.dataset == e.name);
      CHECK(!plan.files.empty());
      CHECK(!plan.mirrors.empty());
    } else {
      CHECK_THROWS_WITH_AS(official_download_plan(e.name), doctest::Contains("no download for --dataset"), Error);
    }
    // Without its files, a dataset that reads them says what is missing (its factory ran: the
    // name was not refused); one that reads none opens anywhere.
    if (e.reads_files) {
      try {
        (void)open_dataset(e.name, "/nonexistent/ge_registry", 16, "bedroom", 1);
        FAIL("opened without its files");
      } catch (const Error& err) {
        CHECK(std::string(err.what()).find("is not a dataset ganengine knows") == std::string::npos);
      }
    } else {
      const auto ds = open_dataset(e.name, "/nonexistent/ge_registry", 16, "bedroom", 1);
      CHECK(ds->name() == e.name);
      CHECK(ds->channels() == e.channels);
    }
  }
  std::vector<std::string> in_order;
  for (const DatasetEntry& e : entries) in_order.push_back(e.name);
  CHECK(dataset_names() == in_order);
}

TEST_CASE("dataset registry: each factory builds the dataset its entry describes") {
  TempDir tmp("ge_registry");
  // The smallest sources each reader accepts: a flat IDX file (mnist and fashion-mnist alike),
  // an ImageFolder tree of one class and one image, one LSUN database of one image.
  const DecodedImage image = pattern_image(8, 8, 3);
  const std::string png = png_bytes(image);
  put(tmp.dir / "idx" / "train-images-idx3-ubyte", idx_images(2, 8, 8, std::vector<uint8_t>(128, 7)));
  put(tmp.dir / "images" / "class" / "a.png", png);
  write_lmdb((tmp.dir / "lsun" / "tower_train_lmdb").string(), {{"0001", png}});
  const std::map<std::string, std::string> roots = {
      {"mnist", "idx"},  {"fashion-mnist", "idx"}, {"imagenet", "images"}, {"folder", "images"},
      {"lfw", "images"}, {"lsun", "lsun"},         {"fake", ""},
  };
  for (const DatasetEntry& e : dataset_registry()) {
    CAPTURE(e.name);
    const auto root = roots.find(e.name);
    if (root == roots.end()) continue;  // cifar10: five 30 MB batch files, test_cifar10_dataset's
    const auto ds = open_dataset(e.name, (tmp.dir / root->second).string(), 8, "tower", 1, false);
    CHECK(ds->name() == e.name);
    CHECK(ds->channels() == e.channels);
    CHECK(ds->image_size() == 8);
    CHECK(ds->size() >= 1);
  }
}

TEST_CASE("dataset registry: an unknown name is refused with the list of known ones") {
  CHECK(find_dataset("imagenette") == nullptr);
  CHECK(find_dataset("") == nullptr);
  const std::string expected =
      "--dataset 'imagenette' is not a dataset ganengine knows; expected one of " + join_names(dataset_names(), " | ");
  CHECK_THROWS_WITH_AS(dataset_entry("imagenette"), expected.c_str(), Error);
  CHECK_THROWS_WITH_AS(open_dataset("imagenette", "", 64, "", 0), expected.c_str(), Error);
  CHECK_THROWS_WITH_AS(dataset_channels("imagenette"), expected.c_str(), Error);
  CHECK_FALSE(dataset_has_download("imagenette"));
}

TEST_CASE("dataset registry: join_names") {
  CHECK(join_names({}, ", ", " and ") == "");
  CHECK(join_names({"a"}, ", ", " and ") == "a");
  CHECK(join_names({"a", "b"}, ", ", " and ") == "a and b");
  CHECK(join_names({"a", "b", "c"}, ", ", " and ") == "a, b and c");
  CHECK(join_names({"a", "b", "c"}, " | ") == "a | b | c");
}

TEST_CASE("dataset registry: every command's --help lists exactly the registry's names") {
  for (const char* command : {"train", "bench-data", "bench"}) {
    CAPTURE(command);
    CHECK(help_dataset_choices(command) == dataset_names());
  }
  // and --download names exactly the downloadable ones.
  const std::string downloadable = "(" + join_names(dataset_names(is_downloadable), ", ") + ")";
  for (const char* command : {"train", "bench"}) {
    CAPTURE(command);
    const CommandResult r = run_ganengine(std::string(command) + " --help");
    const std::string help = std::regex_replace(r.output, std::regex("\\s+"), " ");
    CHECK(help.find("--dataroot first " + downloadable) != std::string::npos);
  }
}
