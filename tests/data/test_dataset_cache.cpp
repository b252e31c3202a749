// CachedDataset (the on-disk cache of decoded images) around a test dataset that counts its
// reads and whose fingerprint the test sets: built once with the source's exact bytes, reused
// without touching the source, rebuilt when the source changed or the file is truncated or
// damaged, safe to read from many threads; and the fingerprints of the file-backed datasets
// changing when their files do.
#include <lmdb.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "data/dataset_cache.h"
#include "data/md5.h"
#include "ganengine/data.h"
#include "ganengine/error.h"
#include "ganengine/lsun_dataset.h"
#include "support/image_files.h"
#include "support/lmdb_fixture.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

using namespace ge;
namespace fs = std::filesystem;

namespace {

doctest::Contains has(const std::string& text) { return doctest::Contains(text.c_str()); }

constexpr int64_t kImages = 37;
constexpr int kSide = 8;

// FakeDataset's images under a fingerprint the test chooses, counting every read(); image
// `fail_at` throws, as an undecodable file would.
class ProbeDataset : public Dataset {
 public:
  ProbeDataset(std::atomic<int64_t>& reads, std::string fingerprint, int64_t fail_at = -1)
      : reads_(reads), fingerprint_(std::move(fingerprint)), fail_at_(fail_at), images_(kImages, kSide, 3, 11) {}
  int64_t size() const override { return images_.size(); }
  int channels() const override { return 3; }
  int image_size() const override { return kSide; }
  std::string name() const override { return "probe"; }
  std::string fingerprint() const override { return fingerprint_; }
  void read(int64_t index, uint8_t* hwc_out) const override {
    ++reads_;
    if (index == fail_at_) fail("probe: image ", index, " does not decode");
    images_.read(index, hwc_out);
  }

 private:
  std::atomic<int64_t>& reads_;
  std::string fingerprint_;
  int64_t fail_at_;
  FakeDataset images_;
};

std::vector<uint8_t> image(const Dataset& ds, int64_t index) {
  std::vector<uint8_t> hwc(size_t(ds.image_size()) * ds.image_size() * ds.channels());
  ds.read(index, hwc.data());
  return hwc;
}

// Opens the cache of a fresh probe; *reads counts what that probe decoded.
std::unique_ptr<CachedDataset> open_cache(const std::string& dir, const std::string& fingerprint,
                                          std::atomic<int64_t>* reads, int workers = 3) {
  *reads = 0;
  return std::make_unique<CachedDataset>(std::make_unique<ProbeDataset>(*reads, fingerprint), dir, workers);
}

// Every image equals the uncached source's.
void check_all_images(const Dataset& cached) {
  const FakeDataset truth(kImages, kSide, 3, 11);
  REQUIRE(cached.size() == kImages);
  for (int64_t i = 0; i < kImages; ++i) CHECK(image(cached, i) == image(truth, i));
}

std::vector<std::string> gecache_files(const test::TempDir& root, const std::string& sub) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(root.dir / sub)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("dataset cache: the first open decodes each image once into the named file") {
  test::TempDir root("ge_cache");
  const std::string dir = root.file("caches/deeper");  // created on demand
  std::atomic<int64_t> reads{0};
  const auto cached = open_cache(dir, "version 1", &reads);

  const std::string name = "probe-8px-" + md5_hex("version 1").substr(0, 16) + ".gecache";
  CHECK(cached->path() == dir + "/" + name);
  CHECK(gecache_files(root, "caches/deeper") == std::vector<std::string>{name});  // no temporary left
  CHECK(fs::file_size(cached->path()) > uint64_t(kImages) * kSide * kSide * 3);
  CHECK(reads == kImages);
  CHECK_FALSE(cached->reused());
  CHECK(cached->rebuild_reason() == "missing");
  CHECK(cached->name() == "probe");
  CHECK(cached->channels() == 3);
  CHECK(cached->image_size() == kSide);
  CHECK(cached->fingerprint() == "version 1");
  check_all_images(*cached);
  CHECK(reads == kImages);  // reads come from the file
  CHECK_THROWS_AS(image(*cached, kImages), Error);
}

TEST_CASE("dataset cache: a second open reuses the file and never reads the source") {
  test::TempDir root("ge_cache");
  std::atomic<int64_t> reads{0};
  open_cache(root.dir.string(), "version 1", &reads, 0);
  const auto again = open_cache(root.dir.string(), "version 1", &reads, 1);
  CHECK(again->reused());
  CHECK(again->rebuild_reason().empty());
  check_all_images(*again);
  CHECK(reads == 0);
}

TEST_CASE("dataset cache: a changed fingerprint builds a new file and leaves the old one") {
  test::TempDir root("ge_cache");
  std::atomic<int64_t> reads{0};
  const std::string old_path = open_cache(root.dir.string(), "version 1", &reads)->path();
  const std::string old_bytes = test::read_file_bytes(old_path);

  const auto changed = open_cache(root.dir.string(), "version 2", &reads);
  CHECK(changed->path() != old_path);
  CHECK(reads == kImages);
  CHECK_FALSE(changed->reused());
  check_all_images(*changed);
  CHECK(root.entries().size() == 2);
  CHECK(test::read_file_bytes(old_path) == old_bytes);  // never deleted nor touched

  // A header written for another source under this source's file name: rebuilt.
  fs::copy_file(old_path, changed->path(), fs::copy_options::overwrite_existing);
  const auto rebuilt = open_cache(root.dir.string(), "version 2", &reads);
  CHECK(rebuilt->rebuild_reason() == "source changed");
  CHECK(reads == kImages);
  check_all_images(*rebuilt);
  CHECK(open_cache(root.dir.string(), "version 2", &reads)->reused());
}

TEST_CASE("dataset cache: a truncated file is rebuilt") {
  test::TempDir root("ge_cache");
  std::atomic<int64_t> reads{0};
  const std::string path = open_cache(root.dir.string(), "v", &reads)->path();
  const uint64_t full = fs::file_size(path);
  for (uint64_t keep : {full - 1, full / 2, uint64_t(40), uint64_t(5), uint64_t(0)}) {
    CAPTURE(keep);
    fs::resize_file(path, keep);
    const auto rebuilt = open_cache(root.dir.string(), "v", &reads);
    CHECK(rebuilt->rebuild_reason() == "truncated");
    CHECK(reads == kImages);
    CHECK(fs::file_size(path) == full);
    check_all_images(*rebuilt);
  }
  CHECK(open_cache(root.dir.string(), "v", &reads)->reused());
}

TEST_CASE("dataset cache: a corrupt header or trailing bytes are rebuilt") {
  test::TempDir root("ge_cache");
  std::atomic<int64_t> reads{0};
  const std::string path = open_cache(root.dir.string(), "v", &reads)->path();
  const std::string good = test::read_file_bytes(path);
  // Offsets: 0 magic, 8 version, 12 header size, 16 count, 32 fingerprint MD5, 68 name.
  for (size_t offset : {size_t(0), size_t(12), size_t(16), size_t(24), size_t(40), size_t(69)}) {
    CAPTURE(offset);
    std::string bad = good;
    bad[offset] = static_cast<char>(bad[offset] ^ 0x5a);
    test::write_file_bytes(path, bad);
    const auto rebuilt = open_cache(root.dir.string(), "v", &reads);
    CHECK(rebuilt->rebuild_reason().rfind("corrupt header", 0) == 0);
    CHECK(reads == kImages);
    CHECK(test::read_file_bytes(path) == good);
  }
  test::write_file_bytes(path, good.substr(0, 8) + std::string("\x07\0\0\0", 4) + good.substr(12));
  CHECK(open_cache(root.dir.string(), "v", &reads)->rebuild_reason() == "cache format version 7, this build uses 2");

  test::write_file_bytes(path, good + "extra");
  CHECK(open_cache(root.dir.string(), "v", &reads)->rebuild_reason() ==
        "corrupt (5 bytes longer than its header says)");
  CHECK(test::read_file_bytes(path) == good);
}

TEST_CASE("dataset cache: a damaged pixel fails the read of its image naming the file and the image") {
  test::TempDir root("ge_cache");
  std::atomic<int64_t> reads{0};
  const std::string path = open_cache(root.dir.string(), "v", &reads)->path();
  const std::string good = test::read_file_bytes(path);
  const size_t image_bytes = size_t(kSide) * kSide * 3;
  const size_t checksums_at = good.size() - size_t(kImages) * 4;
  const size_t images_at = checksums_at - size_t(kImages) * image_bytes;
  const int64_t damaged = 5;
  std::string bad = good;
  bad[images_at + size_t(damaged) * image_bytes + 7] ^= 0x10;  // a pixel: the header stays valid
  test::write_file_bytes(path, bad);
  const auto cached = open_cache(root.dir.string(), "v", &reads);
  CHECK(cached->reused());
  CHECK_THROWS_WITH_AS(image(*cached, damaged), has(path + ": image 5 does not match its checksum"), Error);
  CHECK(image(*cached, damaged - 1) == image(FakeDataset(kImages, kSide, 3, 11), damaged - 1));

  bad = good;
  bad[checksums_at + 4 * size_t(damaged + 1)] ^= 0x01;  // a stored checksum
  test::write_file_bytes(path, bad);
  const auto again = open_cache(root.dir.string(), "v", &reads);
  CHECK_THROWS_WITH_AS(image(*again, damaged + 1), has("image 6 does not match its checksum"), Error);
}

TEST_CASE("dataset cache: many threads reading at once get the source's bytes") {
  test::TempDir root("ge_cache");
  std::atomic<int64_t> reads{0};
  open_cache(root.dir.string(), "v", &reads);
  const auto cached = open_cache(root.dir.string(), "v", &reads);
  REQUIRE(cached->reused());
  const FakeDataset truth(kImages, kSide, 3, 11);
  std::atomic<int64_t> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round)
        for (int64_t k = 0; k < kImages; ++k) {
          const int64_t i = (k * 7 + t * 5 + round) % kImages;  // each thread its own order
          if (image(*cached, i) != image(truth, i)) ++mismatches;
        }
    });
  for (std::thread& t : threads) t.join();
  CHECK(mismatches == 0);
  CHECK(reads == 0);
}

TEST_CASE("dataset cache: a source that fails leaves no file and passes its error on") {
  test::TempDir root("ge_cache");
  std::atomic<int64_t> reads{0};
  CHECK_THROWS_WITH_AS(CachedDataset(std::make_unique<ProbeDataset>(reads, "v", 20), root.dir.string(), 4),
                       has("probe: image 20 does not decode"), Error);
  CHECK(root.entries().empty());
}

TEST_CASE("dataset cache: a cache dir that is a file is refused naming it") {
  test::TempDir root("ge_cache");
  const std::string file = root.file("not_a_dir");
  test::write_file_bytes(file, "x");
  std::atomic<int64_t> reads{0};
  CHECK_THROWS_WITH_AS(open_cache(file, "v", &reads), has("--cache-dir " + file + " exists and is not a directory"),
                       Error);
  CHECK_THROWS_WITH_AS(open_cache(file + "/below", "v", &reads),
                       has("--cache-dir " + file + "/below: a component of it exists and is not a directory"), Error);
  CHECK(reads == 0);
}

TEST_CASE("dataset cache: file names are safe and keyed by name size and fingerprint") {
  CHECK(CachedDataset::file_name("a/b c", 64, "x") == "a_b_c-64px-" + md5_hex("x").substr(0, 16) + ".gecache");
  CHECK(CachedDataset::file_name("lsun", 64, "x") != CachedDataset::file_name("lsun", 64, "y"));
}

TEST_CASE("dataset fingerprint: fake images differ by seed size and image size") {
  CHECK(FakeDataset(10, 8, 3, 1).fingerprint() == FakeDataset(10, 8, 3, 1).fingerprint());
  CHECK(FakeDataset(10, 8, 3, 1).fingerprint() != FakeDataset(10, 8, 3, 2).fingerprint());
  CHECK(FakeDataset(10, 8, 3, 1).fingerprint() != FakeDataset(11, 8, 3, 1).fingerprint());
  CHECK(FakeDataset(10, 8, 3, 1).fingerprint() != FakeDataset(10, 16, 3, 1).fingerprint());
}

namespace {}  // namespace

TEST_CASE("dataset fingerprint: an lsun database changes when a value is added") {
  test::TempDir root("ge_cache");
  // The fingerprint never decodes: any bytes will do as values.
  ge::test::write_lmdb(root.file("bedroom_train_lmdb"), {{"a", "first"}, {"b", "second"}});
  const std::string before = LsunDataset(root.dir.string(), "bedroom", 16).fingerprint();
  CHECK(LsunDataset(root.dir.string(), "bedroom", 16).fingerprint() == before);
  CHECK(LsunDataset(root.dir.string(), "bedroom", 32).fingerprint() != before);
  CHECK(before.find(root.file("bedroom_train_lmdb")) != std::string::npos);

  ge::test::write_lmdb(root.file("bedroom_train_lmdb"), {{"c", "third"}});
  const std::string after = LsunDataset(root.dir.string(), "bedroom", 16).fingerprint();
  CHECK(after != before);
  CHECK(after.find("entries=3") != std::string::npos);
}

TEST_CASE("dataset fingerprint: an image folder changes when a file changes or appears") {
  test::TempDir root("ge_cache");
  const std::string png = test::png_bytes(test::pattern_image(12, 10, 3));
  fs::create_directories(root.dir / "cats");
  test::write_file_bytes(root.file("cats/1.png"), png);
  test::write_file_bytes(root.file("cats/2.png"), png);
  const std::string before = ImageFolderDataset(root.dir.string(), 8).fingerprint();
  CHECK(ImageFolderDataset(root.dir.string(), 8).fingerprint() == before);
  CHECK(ImageFolderDataset(root.dir.string(), 16).fingerprint() != before);
  CHECK(before.size() < 200);  // a hash of the file list, not the list

  // Same size, another mtime: a file rewritten in place.
  const auto mtime = fs::last_write_time(root.file("cats/2.png"));
  fs::last_write_time(root.file("cats/2.png"), mtime + std::chrono::seconds(5));
  const std::string touched = ImageFolderDataset(root.dir.string(), 8).fingerprint();
  CHECK(touched != before);

  test::write_file_bytes(root.file("cats/3.png"), png);
  const std::string added = ImageFolderDataset(root.dir.string(), 8).fingerprint();
  CHECK(added != touched);
  CHECK(added != before);
}
