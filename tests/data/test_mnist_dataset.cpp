// MnistDataset: the real Fashion-MNIST of the Debian package dataset-fashion-mnist (the test
// command installs it; a missing package fails these tests rather than skipping them), the
// torchvision and flat layouts, gzip or not, and every bad-file case.
#include <filesystem>
#include <string>
#include <vector>

#include "data/image_transform.h"
#include "data/md5.h"
#include "ganengine/data.h"
#include "ganengine/error.h"
#include "ganengine/mnist_dataset.h"
#include "support/dataset_fixtures.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

using namespace ge;

namespace {

// The error message contains this text.
doctest::Contains has(const std::string& text) { return doctest::Contains(text.c_str()); }

// Where dataset-fashion-mnist installs the four official .gz files (dpkg -L dataset-fashion-mnist).
const std::string kDebianFashionMnist = "/usr/share/datasets/fashion-mnist";
const std::string kDebianTrainImages = kDebianFashionMnist + "/train-images-idx3-ubyte.gz";

void require_debian_fashion_mnist() {
  REQUIRE_MESSAGE(std::filesystem::exists(kDebianTrainImages), kDebianTrainImages,
                  " is missing: install the Debian package dataset-fashion-mnist "
                  "(tools/install_deps.sh does)");
}

std::vector<uint8_t> read_image(const Dataset& ds, int64_t index) {
  std::vector<uint8_t> hwc(size_t(ds.image_size()) * ds.image_size() * ds.channels());
  ds.read(index, hwc.data());
  return hwc;
}

// Three 4 x 5 (rows x cols) images whose pixels encode (image, position).
std::vector<uint8_t> small_pixels(int count = 3, int rows = 4, int cols = 5) {
  std::vector<uint8_t> p(size_t(count * rows * cols));
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>(i * 7 % 256);
  return p;
}

}  // namespace

TEST_CASE("fashion-mnist: the Debian package's real training images read exactly") {
  require_debian_fashion_mnist();
  const MnistDataset ds(kDebianFashionMnist, 28, MnistVariant::FashionMnist);
  CHECK(ds.size() == 60000);
  CHECK(ds.channels() == 1);
  CHECK(ds.name() == "fashion-mnist");
  CHECK(ds.path() == kDebianTrainImages);
  CHECK(ds.source_rows() == 28);
  CHECK(ds.source_cols() == 28);

  // Every pixel, in order, is the file's: the MD5 of all 47,040,000 pixel bytes as Python's
  // gzip module reads them (md5(gzip.open(f).read()[16:])).
  Md5 md5;
  for (int64_t i = 0; i < ds.size(); ++i) {
    const auto image = read_image(ds, i);
    md5.update(image.data(), image.size());
  }
  CHECK(md5.hex_digest() == "f209073e486d5113ebe2cc431d4df862");

  // Row 14 of image 0 (an ankle boot), as Python reads it.
  const auto first = read_image(ds, 0);
  const std::vector<uint8_t> row14 = {0,   0,   1,   4,   6,   7,   2,   0,   0,   0,   0,   0,   237, 226,
                                      217, 223, 222, 219, 222, 221, 216, 223, 229, 215, 218, 255, 77,  0};
  CHECK(std::vector<uint8_t>(first.begin() + 14 * 28, first.begin() + 15 * 28) == row14);
}

TEST_CASE("fashion-mnist at imageSize 64 through open_dataset: Resize(64) of each 28 x 28 image") {
  require_debian_fashion_mnist();
  const auto ds = open_dataset("fashion-mnist", kDebianFashionMnist, 64, "", 0);
  CHECK(ds->channels() == 1);
  CHECK(dataset_channels("fashion-mnist") == 1);
  CHECK(dataset_channels("mnist") == 1);
  CHECK(ds->image_size() == 64);
  const MnistDataset native(kDebianFashionMnist, 28, MnistVariant::FashionMnist);
  for (int64_t i : {int64_t(0), int64_t(59999)}) {
    DecodedImage original;
    original.width = original.height = 28;
    original.channels = 1;
    original.hwc = read_image(native, i);
    CHECK(read_image(*ds, i) == resize_shorter_side(original, 64).hwc);
  }
}

TEST_CASE("mnist layouts: torchvision raw folders and flat files gzipped or not") {
  const std::vector<uint8_t> pixels = small_pixels();
  const std::string idx = test::idx_images(3, 4, 5, pixels);
  struct Layout {
    std::string file;
    bool gzip;
    MnistVariant variant;
  };
  for (const Layout& layout : {Layout{"MNIST/raw/train-images-idx3-ubyte", false, MnistVariant::Mnist},
                               Layout{"MNIST/raw/train-images-idx3-ubyte.gz", true, MnistVariant::Mnist},
                               Layout{"FashionMNIST/raw/train-images-idx3-ubyte.gz", true, MnistVariant::FashionMnist},
                               Layout{"train-images-idx3-ubyte", false, MnistVariant::Mnist},
                               Layout{"train-images-idx3-ubyte.gz", true, MnistVariant::FashionMnist}}) {
    CAPTURE(layout.file);
    test::TempDir root("ge_mnist");
    std::filesystem::create_directories((root.dir / layout.file).parent_path());
    test::write_file_bytes(root.file(layout.file), layout.gzip ? test::gzip_bytes(idx) : idx);
    const MnistDataset ds(root.dir.string(), 5, layout.variant);  // non-square source images
    CHECK(ds.size() == 3);
    CHECK(ds.source_rows() == 4);
    CHECK(ds.source_cols() == 5);
    CHECK(ds.path() == root.file(layout.file));
    CHECK(ds.name() == (layout.variant == MnistVariant::Mnist ? "mnist" : "fashion-mnist"));
    // Resize(5) of a 5-wide, 4-high image is not square: refused rather than mis-shaped.
    CHECK_THROWS_WITH_AS(read_image(ds, 1), has("expected a square one"), Error);
  }
  // The other variant's folder is not looked in.
  test::TempDir root("ge_mnist");
  std::filesystem::create_directories(root.dir / "MNIST/raw");
  test::write_file_bytes(root.file("MNIST/raw/train-images-idx3-ubyte"), idx);
  CHECK_THROWS_WITH_AS(MnistDataset(root.dir.string(), 28, MnistVariant::FashionMnist),
                       has("FashionMNIST/raw/train-images-idx3-ubyte"), Error);
}

TEST_CASE("mnist square images at their own size are served unchanged") {
  test::TempDir root("ge_mnist");
  const std::vector<uint8_t> pixels = small_pixels(2, 6, 6);
  test::write_file_bytes(root.file("train-images-idx3-ubyte.gz"), test::gzip_bytes(test::idx_images(2, 6, 6, pixels)));
  const MnistDataset ds(root.dir.string(), 6, MnistVariant::Mnist);
  CHECK(read_image(ds, 1) == std::vector<uint8_t>(pixels.begin() + 36, pixels.end()));
  CHECK_THROWS_AS(read_image(ds, 2), Error);
}

TEST_CASE("mnist missing files: every place looked at and --download are named") {
  test::TempDir root("ge_mnist");
  for (const char* expected :
       {"MNIST/raw/train-images-idx3-ubyte", "MNIST/raw/train-images-idx3-ubyte.gz", "--download"})
    CHECK_THROWS_WITH_AS(MnistDataset(root.dir.string(), 64, MnistVariant::Mnist), has(expected), Error);
  CHECK_THROWS_WITH_AS(open_dataset("mnist", root.dir.string(), 64, "", 0), has("mnist: no training images"), Error);
}

TEST_CASE("mnist bad files: magic numbers and dimensions and truncation and trailing bytes") {
  test::TempDir root("ge_mnist");
  const std::string path = root.file("train-images-idx3-ubyte");
  const std::vector<uint8_t> pixels = small_pixels();
  auto open = [&] { return MnistDataset(root.dir.string(), 28, MnistVariant::Mnist); };

  SUBCASE("the labels file under the images name") {
    require_debian_fashion_mnist();
    test::write_file_bytes(path, test::read_file_bytes(kDebianFashionMnist + "/train-labels-idx1-ubyte.gz"));
    CHECK_THROWS_WITH_AS(open(), has(path + ": magic number 0x00000801, expected 0x00000803"), Error);
    CHECK_THROWS_WITH_AS(open(), has("this is a labels file"), Error);
  }
  SUBCASE("some other file") {
    test::write_file_bytes(path, "not an IDX file at all, just text");
    CHECK_THROWS_WITH_AS(open(), has("expected 0x00000803"), Error);
  }
  SUBCASE("shorter than a header") {
    test::write_file_bytes(path, test::idx_images(3, 4, 5, {}).substr(0, 10));
    CHECK_THROWS_WITH_AS(open(), has(path + ": 10 bytes, too short for an IDX header"), Error);
  }
  SUBCASE("zero images or zero rows") {
    test::write_file_bytes(path, test::idx_images(0, 4, 5, {}));
    CHECK_THROWS_WITH_AS(open(), has("header gives 0 images of 4 x 5"), Error);
    test::write_file_bytes(path, test::idx_images(3, 0, 5, {}));
    CHECK_THROWS_WITH_AS(open(), has("header gives 3 images of 0 x 5"), Error);
  }
  SUBCASE("pixels cut short, plain") {
    test::write_file_bytes(path, test::idx_images(3, 4, 5, pixels).substr(0, 16 + 59));
    CHECK_THROWS_WITH_AS(open(), has(path + ": the file ends after 59 pixel bytes, expected 60"), Error);
  }
  SUBCASE("a header announcing far more than the file holds") {
    test::write_file_bytes(path, test::idx_images(4000000, 16384, 16384, pixels));
    CHECK_THROWS_WITH_AS(open(), has("the file ends after 60 pixel bytes"), Error);
  }
  SUBCASE("bytes after the images") {
    std::vector<uint8_t> more = pixels;
    more.push_back(1);
    test::write_file_bytes(path, test::idx_images(3, 4, 5, more));
    CHECK_THROWS_WITH_AS(open(), has("more bytes follow the 3 images of 4 x 5"), Error);
  }
  SUBCASE("the real gzip file cut in half") {
    require_debian_fashion_mnist();
    const std::string gz = test::read_file_bytes(kDebianTrainImages);
    test::write_file_bytes(path + ".gz", gz.substr(0, gz.size() / 2));
    CHECK_THROWS_WITH_AS(open(), has(path + ".gz: "), Error);
    CHECK_THROWS_WITH_AS(open(), has("truncated"), Error);
  }
  SUBCASE("gzip data corrupted in the middle") {
    std::string gz = test::gzip_bytes(test::idx_images(3, 4, 5, pixels));
    for (size_t i = 12; i < gz.size() - 8; ++i) gz[i] = static_cast<char>(gz[i] ^ 0x5a);
    test::write_file_bytes(path + ".gz", gz);
    CHECK_THROWS_WITH_AS(open(), has(path + ".gz: "), Error);
  }
}
