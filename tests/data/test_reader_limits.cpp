// Inputs built to exhaust a reader rather than to be read: a pickle nested a million deep or
// containing itself, an IDX .gz whose header claims terabytes, truncated progressive JPEGs
// and GIFs that a lenient decoder would fill with zeros, and the checked size arithmetic
// they rely on. Each is a ge::Error naming the file, raised before the memory is spent.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/checked_size.h"
#include "data/cifar10_pickle.h"
#include "data/idx_images.h"
#include "data/image_decode.h"
#include "data/read_only_file.h"
#include "ganengine/error.h"
#include "support/dataset_fixtures.h"
#include "support/image_files.h"
#include "support/temp_dir.h"

using namespace ge;

namespace {

doctest::Contains has(const std::string& text) { return doctest::Contains(text.c_str()); }

std::string pickle_error(const std::string& path) {
  try {
    const ReadOnlyFile file(path);
    locate_pickled_cifar_data(file, 10000, 3072);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string decode_error(const test::TempDir& dir, const std::string& bytes) {
  const std::string path = dir.file("image");
  test::write_file_bytes(path, bytes);
  try {
    decode_image(path);
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find(path) != std::string::npos);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("checked sizes: products and sums that overflow or go negative name what overflowed") {
  CHECK(checked_mul(int64_t(1) << 31, int64_t(1) << 31, "x") == int64_t(1) << 62);
  CHECK(checked_add(5, 7, "x") == 12);
  CHECK(checked_product({4, 5, 6}, "x") == 120);
  CHECK_THROWS_WITH_AS(checked_mul(int64_t(1) << 32, int64_t(1) << 31, "image bytes"),
                       has("image bytes: 4294967296 x 2147483648 is not a valid size"), Error);
  CHECK_THROWS_WITH_AS(checked_add(std::numeric_limits<int64_t>::max(), 1, "file end"), has("file end: "), Error);
  CHECK_THROWS_WITH_AS(checked_mul(-1, 3, "count"), has("count: -1 x 3"), Error);
  CHECK_THROWS_WITH_AS(checked_product({4294967295, 16384, 16384, 1024}, "idx"), has("idx: "), Error);
}

TEST_CASE("cifar10 pickle: a million nested lists and a list containing itself are errors without a crash") {
  test::TempDir dir("ge_pickle");
  const std::string deep = dir.file("deep");
  const int depth = 1000000;  // 2 MB; the recursive destruction this once had overflowed at 600 KB
  test::write_file_bytes(deep, "\x80\x02" + std::string(depth, ']') + std::string(depth - 1, 'a') + ".");
  CHECK(pickle_error(deep).find(deep + ": the pickle holds no dict") != std::string::npos);  // ...to a list

  const std::string cycle = dir.file("cycle");
  test::write_file_bytes(cycle, std::string("\x80\x02]q\x00h\x00"
                                            "a.",
                                            9));  // l = []; l.append(l)
  CHECK(pickle_error(cycle).find(cycle + ": the pickle holds no dict") != std::string::npos);

  const std::string many = dir.file("many");
  test::write_file_bytes(many, "\x80\x02" + std::string(1100000, 'N') + ".");
  CHECK(pickle_error(many).find("more than 1048576 values") != std::string::npos);
}

TEST_CASE("idx images: a gzip header claiming more than its file can inflate to fails before inflating") {
  test::TempDir dir("ge_idx");
  const std::string path = dir.file("train-images-idx3-ubyte.gz");
  // 4 billion 16384 x 16384 images claimed; 64 MB of zeros inflated from about 64 KB.
  const std::string zeros(size_t(64) << 20, '\0');
  test::write_file_bytes(path, test::gzip_bytes(test::idx_images(4294967295u, 16384, 16384, {}) + zeros));
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS(read_idx_images(path), has(path + ": header gives 4294967295 images of 16384 x 16384"), Error);
  CHECK_THROWS_WITH_AS(read_idx_images(path), has("more than a gzip file of"), Error);
  // Nothing was inflated: far below the time to inflate 64 MB twice.
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));

  // A claim the file could hold but does not: read as far as the data goes, then an error.
  // Pixels that do not compress, so the claim of 47 MB stays within 1032 x the gzip size.
  std::vector<uint8_t> noise(100000);
  uint32_t state = 12345;
  for (uint8_t& v : noise) v = static_cast<uint8_t>((state = state * 1664525u + 1013904223u) >> 24);
  test::write_file_bytes(path, test::gzip_bytes(test::idx_images(60000, 28, 28, noise)));
  CHECK_THROWS_WITH_AS(read_idx_images(path), has("the file ends after 100000 pixel bytes"), Error);
}

TEST_CASE("image decoding: a truncated progressive JPEG is an error as in PIL and the whole file decodes") {
  test::TempDir dir("ge_trunc");
  const std::string jpeg = test::jpeg_bytes(test::pattern_image(64, 48, 3), 90, /*progressive=*/true);
  CHECK(decode_error(dir, jpeg).empty());
  int cuts = 0;
  for (size_t keep = jpeg.size() / 3; keep < jpeg.size(); keep += 37, ++cuts) {
    CAPTURE(keep);
    CHECK(decode_error(dir, jpeg.substr(0, keep)).find("truncated JPEG") != std::string::npos);
  }
  CHECK(decode_error(dir, jpeg.substr(0, jpeg.size() - 1)).find("truncated JPEG") != std::string::npos);
  CHECK(cuts > 10);
}

TEST_CASE("image decoding: a truncated GIF is an error as in PIL and the whole file decodes exactly") {
  test::TempDir dir("ge_trunc");
  const int width = 40, height = 30;
  const std::string gif = test::grey_gif_bytes(width, height);
  test::write_file_bytes(dir.file("a.gif"), gif);
  const DecodedImage image = decode_image(dir.file("a.gif"));
  REQUIRE(image.width == width);
  REQUIRE(image.height == height);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) CHECK(image.hwc[size_t(y * width + x) * 3] == (x + 3 * y) % 256);
  // Without the trailer the first frame is whole: PIL reads it, and so do we.
  CHECK(decode_error(dir, gif.substr(0, gif.size() - 1)).empty());
  for (size_t keep = 13; keep < gif.size() - 1; keep += keep < 800 ? 97 : 41) {
    CAPTURE(keep);
    CHECK(decode_error(dir, gif.substr(0, keep)).find("truncated GIF") != std::string::npos);
  }
}

TEST_CASE("image decoding: a TIFF whose strips do not cover its image is an error before it is decoded") {
  // 464 bytes claiming 12 x 5063177 pixels in 562576 strips, of which the file gives one:
  // libtiff alone invents the rest as blank rows (seconds and 400 MB under the sanitizers).
  const std::string path =
      std::string(GE_TEST_DATA_DIR) + "/../fuzz_regressions/tiff/timeout-2c2e21f5deea1a2c3389ab7ae5fbbd2050a0a7a3";
  const auto start = std::chrono::steady_clock::now();
  std::string message;
  try {
    decode_image(path);
  } catch (const Error& e) {
    message = e.what();
  }
  CHECK(message.find(path) != std::string::npos);
  const bool refused = message.find("does not lie inside the file's 464 bytes") != std::string::npos ||
                       message.find("corrupt TIFF") != std::string::npos ||
                       message.find("not supported by this build") != std::string::npos;
  CHECK(refused);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
}
