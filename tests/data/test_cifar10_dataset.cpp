// Cifar10Dataset on both official layouts, built here at their real sizes (sparse files: only
// the images a test looks at are written): planar-to-HWC order across the five batches, the
// python version's pickle as Python 2's cPickle writes it, upscaling to --imageSize, and
// every bad-file case named with what was expected.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "data/image_transform.h"
#include "ganengine/cifar10_dataset.h"
#include "ganengine/data.h"
#include "ganengine/error.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

using namespace ge;

namespace {

// The error message contains this text.
doctest::Contains has(const std::string& text) { return doctest::Contains(text.c_str()); }

constexpr int64_t kImages = Cifar10Dataset::kImagesPerBatch;
constexpr int64_t kImageBytes = 3072;
constexpr int64_t kRecordBytes = 1 + kImageBytes;

// The images the tests write and check, in every batch; the others stay zero (file holes).
const std::vector<int64_t> kWrittenImages = {0, 1, 4321, kImages - 1};

// Planar image bytes (R plane, G plane, B plane) that differ per batch, image, channel, pixel.
std::string planar_image(int batch, int64_t image) {
  std::string bytes(kImageBytes, '\0');
  for (int c = 0; c < 3; ++c)
    for (int p = 0; p < 1024; ++p)
      bytes[size_t(c * 1024 + p)] = static_cast<char>((batch * 7 + image * 3 + c * 50 + p) % 256);
  return bytes;
}

// What read() must give at --imageSize 32: the same bytes as HWC.
std::vector<uint8_t> expected_hwc(int batch, int64_t image) {
  const std::string planar = planar_image(batch, image);
  std::vector<uint8_t> hwc(kImageBytes);
  for (int p = 0; p < 1024; ++p)
    for (int c = 0; c < 3; ++c) hwc[size_t(p * 3 + c)] = static_cast<uint8_t>(planar[size_t(c * 1024 + p)]);
  return hwc;
}

// A file of `size` bytes holding `pieces` (offset, bytes) and zeros elsewhere.
void write_sparse(const std::string& path, int64_t size, const std::vector<std::pair<int64_t, std::string>>& pieces) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f);
  for (const auto& [offset, bytes] : pieces) {
    REQUIRE(std::fseek(f, static_cast<long>(offset), SEEK_SET) == 0);
    REQUIRE(std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size());
  }
  REQUIRE(std::fclose(f) == 0);
  REQUIRE(::truncate(path.c_str(), size) == 0);
}

std::string bin_dir(const test::TempDir& root) { return root.file("cifar-10-batches-bin"); }
std::string py_dir(const test::TempDir& root) { return root.file("cifar-10-batches-py"); }

void write_bin_batch(const std::string& path, int batch, int64_t size = kImages * kRecordBytes) {
  std::vector<std::pair<int64_t, std::string>> pieces;
  for (int64_t i : kWrittenImages)
    pieces.push_back({i * kRecordBytes, std::string(1, char(i % 10)) + planar_image(batch, i)});
  write_sparse(path, size, pieces);
}

void write_bin_batches(const test::TempDir& root) {
  std::filesystem::create_directories(bin_dir(root));
  for (int b = 0; b < 5; ++b) write_bin_batch(bin_dir(root) + "/data_batch_" + std::to_string(b + 1) + ".bin", b);
}

// ---- the python version: the opcodes Python 2's cPickle.dump(batch, f, 2) writes.

std::string le32(uint32_t v) {
  std::string s;
  for (int i = 0; i < 4; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}
std::string short_string(const std::string& s) { return "U" + std::string(1, char(s.size())) + s; }
std::string put(int memo) { return "q" + std::string(1, char(memo)); }

struct PickleOptions {
  int64_t rows = kImages;
  int64_t cols = kImageBytes;
  std::string dtype = "u1";
  int64_t raw_bytes = kImages * kImageBytes;  // the length the raw string announces
  std::string data_key = "data";
};

// The pickle's bytes before and after the raw image buffer (which the caller places between).
std::pair<std::string, std::string> pickle_around_data(const PickleOptions& o) {
  auto bin_int = [](int64_t v) {
    if (v < 256) return "K" + std::string(1, char(v));
    if (v < 65536) return "M" + std::string(1, char(v & 0xff)) + std::string(1, char(v >> 8));
    return "J" + le32(static_cast<uint32_t>(v));
  };
  std::string head = "\x80\x02}" + put(1) + "(";
  head += short_string("batch_label") + put(2) + short_string("training batch 1 of 5") + put(3);
  head += short_string("labels") + put(4) + "]" + put(5) + "(K\x06K\x09K\x09K\x04K\x01" + "e";
  head += short_string(o.data_key) + put(6);
  head += "cnumpy.core.multiarray\n_reconstruct\n" + put(7) + "cnumpy\nndarray\n" + put(8);
  head += std::string("K\x00\x85", 3) + short_string("b") + "\x87R" + put(9);
  head += "(K\x01" + bin_int(o.rows) + bin_int(o.cols) + "\x86";
  head += "cnumpy\ndtype\n" + put(10) + short_string(o.dtype) + std::string("K\x00K\x01\x87R", 6) + put(11);
  head +=
      "(K\x03" + short_string("|") + "NNNJ" + le32(0xffffffffu) + "J" + le32(0xffffffffu) + std::string("K\x00tb", 4);
  head += "\x89T" + le32(static_cast<uint32_t>(o.raw_bytes));
  std::string tail = "tb";
  tail += short_string("filenames") + put(12) + "]" + put(13) + "(" +
          short_string("leptodactylus_pentadactylus_s_000004.png") + "e";
  tail += "u.";
  return {head, tail};
}

void write_py_batch(const std::string& path, int batch, const PickleOptions& o = {}) {
  const auto [head, tail] = pickle_around_data(o);
  std::vector<std::pair<int64_t, std::string>> pieces = {{0, head}};
  for (int64_t i : kWrittenImages)
    if (i < o.rows) pieces.push_back({int64_t(head.size()) + i * kImageBytes, planar_image(batch, i)});
  const int64_t tail_at = int64_t(head.size()) + o.rows * o.cols;
  pieces.push_back({tail_at, tail});
  write_sparse(path, tail_at + int64_t(tail.size()), pieces);
}

void write_py_batches(const test::TempDir& root) {
  std::filesystem::create_directories(py_dir(root));
  for (int b = 0; b < 5; ++b) write_py_batch(py_dir(root) + "/data_batch_" + std::to_string(b + 1), b);
}

std::vector<uint8_t> read_image(const Dataset& ds, int64_t index) {
  std::vector<uint8_t> hwc(size_t(ds.image_size()) * ds.image_size() * ds.channels());
  ds.read(index, hwc.data());
  return hwc;
}

void check_all_written_images(const Dataset& ds) {
  for (int b = 0; b < 5; ++b)
    for (int64_t i : kWrittenImages) {
      CAPTURE(b);
      CAPTURE(i);
      CHECK(read_image(ds, b * kImages + i) == expected_hwc(b, i));
    }
  CHECK(read_image(ds, 2) == std::vector<uint8_t>(kImageBytes, 0));  // an image never written
}

}  // namespace

TEST_CASE("cifar10 binary batches: five files in order and planar records to HWC") {
  test::TempDir root("ge_cifar");
  write_bin_batches(root);
  const Cifar10Dataset ds(root.dir.string(), 32);
  CHECK(ds.size() == 50000);
  CHECK(ds.channels() == 3);
  CHECK(ds.image_size() == 32);
  CHECK(ds.name() == "cifar10");
  check_all_written_images(ds);
  CHECK_THROWS_AS(read_image(ds, 50000), Error);
}

TEST_CASE("cifar10 python batches: the pickled numpy array is found and read") {
  test::TempDir root("ge_cifar");
  write_py_batches(root);
  const Cifar10Dataset ds(root.dir.string(), 32);
  CHECK(ds.size() == 50000);
  check_all_written_images(ds);
}

TEST_CASE("cifar10 at imageSize 64: each image is Resize(64) of the 32 x 32 original") {
  test::TempDir root("ge_cifar");
  write_bin_batches(root);
  const auto ds = open_dataset("cifar10", root.dir.string(), 64, "", 0);
  CHECK(ds->image_size() == 64);
  DecodedImage original;
  original.width = original.height = 32;
  original.channels = 3;
  original.hwc = expected_hwc(3, 4321);
  const DecodedImage resized = resize_shorter_side(original, 64);
  CHECK(read_image(*ds, 3 * kImages + 4321) == resized.hwc);
}

TEST_CASE("cifar10 missing files: the error lists the expected files and --download") {
  test::TempDir root("ge_cifar");
  CHECK_THROWS_WITH_AS(Cifar10Dataset(root.dir.string(), 64), has("cifar-10-batches-bin/data_batch_1.bin"), Error);
  CHECK_THROWS_WITH_AS(Cifar10Dataset(root.dir.string(), 64), has("cifar-10-batches-py/data_batch_1"), Error);
  CHECK_THROWS_WITH_AS(Cifar10Dataset(root.dir.string(), 64), has("--download"), Error);

  write_bin_batches(root);
  std::filesystem::remove(bin_dir(root) + "/data_batch_4.bin");
  CHECK_THROWS_WITH_AS(Cifar10Dataset(root.dir.string(), 64), has("missing " + bin_dir(root) + "/data_batch_4.bin"),
                       Error);
  CHECK_THROWS_WITH_AS(Cifar10Dataset(root.dir.string(), 64), has("--download"), Error);
}

TEST_CASE("cifar10 binary batch of the wrong size: truncated or too long") {
  test::TempDir root("ge_cifar");
  write_bin_batches(root);
  const std::string batch2 = bin_dir(root) + "/data_batch_2.bin";
  for (int64_t size : {kImages * kRecordBytes - 1, kImages * kRecordBytes + kRecordBytes, int64_t(0)}) {
    CAPTURE(size);
    REQUIRE(::truncate(batch2.c_str(), size) == 0);
    CHECK_THROWS_WITH_AS(Cifar10Dataset(root.dir.string(), 32), has(batch2 + " has " + std::to_string(size) + " bytes"),
                         Error);
    CHECK_THROWS_WITH_AS(Cifar10Dataset(root.dir.string(), 32), has("expected 30730000"), Error);
  }
}

TEST_CASE("cifar10 python batch: truncated pickles and wrong contents name the file and the expectation") {
  test::TempDir root("ge_cifar");
  write_py_batches(root);
  const std::string batch1 = py_dir(root) + "/data_batch_1";
  const std::string full = test::read_file_bytes(batch1);

  SUBCASE("cut inside the image buffer") {
    test::write_file_bytes(batch1, full.substr(0, 5000000));
    CHECK_THROWS_WITH_AS(Cifar10Dataset(root.dir.string(), 32), has(batch1 + ": the pickle ends early"), Error);
  }
  SUBCASE("cut inside the header") {
    test::write_file_bytes(batch1, full.substr(0, 100));
    CHECK_THROWS_WITH_AS(Cifar10Dataset(root.dir.string(), 32), has("the pickle ends early"), Error);
  }
  SUBCASE("cut just before STOP") {
    test::write_file_bytes(batch1, full.substr(0, full.size() - 1));
    CHECK_THROWS_WITH_AS(Cifar10Dataset(root.dir.string(), 32), has("is the file truncated?"), Error);
  }
  SUBCASE("not a pickle at all") {
    test::write_file_bytes(batch1, std::string("PK\x03\x04 a zip file"));
    CHECK_THROWS_WITH_AS(Cifar10Dataset(root.dir.string(), 32), has(batch1 + ": not a CIFAR-10 python batch"), Error);
  }
  SUBCASE("a pickle protocol other than 2 to 5") {
    test::write_file_bytes(batch1, std::string("\x80\x01}.", 4));
    CHECK_THROWS_WITH_AS(Cifar10Dataset(root.dir.string(), 32), has("pickle protocol 1"), Error);
  }
  SUBCASE("the array has another shape") {
    PickleOptions o;
    o.rows = 9999;
    o.raw_bytes = o.rows * o.cols;
    write_py_batch(batch1, 0, o);
    CHECK_THROWS_WITH_AS(Cifar10Dataset(root.dir.string(), 32), has("b'data' has shape (9999, 3072)"), Error);
    CHECK_THROWS_WITH_AS(Cifar10Dataset(root.dir.string(), 32), has("shape (10000, 3072)"), Error);
  }
  SUBCASE("the array has another dtype") {
    PickleOptions o;
    o.dtype = "f4";
    write_py_batch(batch1, 0, o);
    CHECK_THROWS_WITH_AS(Cifar10Dataset(root.dir.string(), 32), has("another dtype than uint8"), Error);
  }
  SUBCASE("the raw string is shorter than the shape says") {
    PickleOptions o;
    o.raw_bytes = 1000;
    // The string then ends early and the pickle's structure breaks after it.
    const auto [head, tail] = pickle_around_data(o);
    test::write_file_bytes(batch1, head + std::string(1000, '\0') + tail);
    CHECK_THROWS_WITH_AS(Cifar10Dataset(root.dir.string(), 32), has("b'data' holds 1000 bytes, expected 30720000"),
                         Error);
  }
  SUBCASE("no b'data' key") {
    PickleOptions o;
    o.data_key = "pixels";
    write_py_batch(batch1, 0, o);
    CHECK_THROWS_WITH_AS(Cifar10Dataset(root.dir.string(), 32), has("has no key b'data'"), Error);
  }
}
