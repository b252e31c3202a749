// LsunDataset on LMDB databases the tests write with liblmdb: classes concatenated in
// --classes order, keys in LMDB order, WebP/PNG/JPEG values decoded and fitted with
// Resize + CenterCrop, and undecodable values either named (database and key) or skipped
// and counted.
#include <lmdb.h>
#include <stb/stb_image_write.h>
#include <webp/encode.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "data/image_decode.h"
#include "data/image_transform.h"
#include "ganengine/data.h"
#include "ganengine/error.h"
#include "ganengine/lsun_dataset.h"
#include "support/lmdb_fixture.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

using namespace ge;

namespace {

// The error message contains this text.
doctest::Contains has(const std::string& text) { return doctest::Contains(text.c_str()); }

using Items = std::vector<std::pair<std::string, std::string>>;  // key, value

DecodedImage pattern_image(int width, int height, int seed) {
  DecodedImage im;
  im.width = width;
  im.height = height;
  im.channels = 3;
  im.hwc.resize(size_t(width) * height * 3);
  for (size_t i = 0; i < im.hwc.size(); ++i) im.hwc[i] = static_cast<uint8_t>((i * 13 + size_t(seed) * 71) % 256);
  return im;
}

void append_bytes(void* context, void* data, int size) {
  static_cast<std::string*>(context)->append(static_cast<const char*>(data), size_t(size));
}

std::string png_of(const DecodedImage& im) {
  std::string png;
  REQUIRE(stbi_write_png_to_func(append_bytes, &png, im.width, im.height, 3, im.hwc.data(), im.width * 3) != 0);
  return png;
}

std::string jpeg_of(const DecodedImage& im) {
  std::string jpeg;
  REQUIRE(stbi_write_jpg_to_func(append_bytes, &jpeg, im.width, im.height, 3, im.hwc.data(), 90) != 0);
  return jpeg;
}

std::string lossless_webp_of(const DecodedImage& im) {
  uint8_t* out = nullptr;
  const size_t size = WebPEncodeLosslessRGB(im.hwc.data(), im.width, im.height, im.width * 3, &out);
  REQUIRE(size > 0);
  std::string webp(reinterpret_cast<const char*>(out), size);
  WebPFree(out);
  return webp;
}

// What the example's transform gives for an image: Resize(size) then CenterCrop(size).
std::vector<uint8_t> fitted(const DecodedImage& im, int size) {
  return center_crop(resize_shorter_side(im, size), size).hwc;
}

std::vector<uint8_t> read_image(const Dataset& ds, int64_t index) {
  std::vector<uint8_t> hwc(size_t(ds.image_size()) * ds.image_size() * ds.channels());
  ds.read(index, hwc.data());
  return hwc;
}

}  // namespace

TEST_CASE("lsun: classes in order and keys in LMDB order with WebP PNG and JPEG values") {
  test::TempDir root("ge_lsun");
  const DecodedImage wide = pattern_image(40, 24, 1), tall = pattern_image(30, 50, 2),
                     square = pattern_image(20, 20, 3);
  const std::string jpeg = jpeg_of(pattern_image(33, 17, 4));
  // Inserted out of order: LMDB keeps keys sorted, and so does the dataset.
  ge::test::write_lmdb(root.file("bedroom_train_lmdb"),
                       {{"c-jpeg", jpeg}, {"a-webp", lossless_webp_of(tall)}, {"b-png", png_of(wide)}});
  ge::test::write_lmdb(root.file("tower_train_lmdb"), {{"z", png_of(square)}});

  const LsunDataset ds(root.dir.string(), "bedroom,tower", 16);
  CHECK(ds.size() == 4);
  CHECK(ds.channels() == 3);
  CHECK(ds.image_size() == 16);
  CHECK(ds.name() == "lsun");
  CHECK(read_image(ds, 0) == fitted(tall, 16));  // lossless: the very pixels encoded
  CHECK(read_image(ds, 1) == fitted(wide, 16));
  CHECK(read_image(ds, 2) ==
        fitted(decode_image_bytes(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(), "jpeg"), 16));
  CHECK(read_image(ds, 3) == fitted(square, 16));
  CHECK(ds.bad_images_skipped() == 0);
  CHECK_THROWS_AS(read_image(ds, 4), Error);

  // Read from several worker threads at once (one read transaction each): the same batch.
  Loader serial(ds, 4, 7, 1), threaded(ds, 4, 7, 4);
  const Tensor a = serial.batch(0, 0), b = threaded.batch(0, 0);
  CHECK(std::memcmp(a.data(), b.data(), a.nbytes()) == 0);

  // The same through open_dataset, one class only.
  const auto tower = open_dataset("lsun", root.dir.string(), 20, "tower", 0);
  CHECK(tower->size() == 1);
  CHECK(read_image(*tower, 0) == square.hwc);  // already 20 x 20: unchanged
}

TEST_CASE("lsun class names get the torchvision train suffix") {
  using V = std::vector<std::string>;
  CHECK(LsunDataset::database_names("bedroom") == V{"bedroom_train_lmdb"});
  CHECK(LsunDataset::database_names("bedroom,church_outdoor") == V{"bedroom_train_lmdb", "church_outdoor_train_lmdb"});
  CHECK(LsunDataset::database_names(" tower , bridge_val") == V{"tower_train_lmdb", "bridge_val_lmdb"});
  CHECK(LsunDataset::database_names("kitchen_train") == V{"kitchen_train_lmdb"});
  CHECK_THROWS_WITH_AS(LsunDataset::database_names("bedroom,,tower"), has("expected comma-separated"), Error);
  CHECK_THROWS_WITH_AS(LsunDataset::database_names(""), has("expected comma-separated"), Error);
}

TEST_CASE("lsun missing or broken databases name the expected directory") {
  test::TempDir root("ge_lsun");
  ge::test::write_lmdb(root.file("bedroom_train_lmdb"), {{"k", png_of(pattern_image(8, 8, 0))}});
  CHECK_THROWS_WITH_AS(LsunDataset(root.dir.string(), "bedroom,kitchen", 8), has(root.file("kitchen_train_lmdb")),
                       Error);
  CHECK_THROWS_WITH_AS(LsunDataset(root.dir.string(), "bedroom,kitchen", 8), has("no such file or directory"), Error);

  std::filesystem::create_directories(root.dir / "garbage_train_lmdb");
  test::write_file_bytes(root.file("garbage_train_lmdb/data.mdb"), std::string(20000, 'x'));
  CHECK_THROWS_WITH_AS(LsunDataset(root.dir.string(), "garbage", 8),
                       has("cannot open LMDB database " + root.file("garbage_train_lmdb")), Error);

  ge::test::write_lmdb(root.file("empty_train_lmdb"), {});
  CHECK_THROWS_WITH_AS(LsunDataset(root.dir.string(), "empty", 8), has("hold no images"), Error);
}

TEST_CASE("lsun undecodable values: an error naming database and key or skipped and counted") {
  test::TempDir root("ge_lsun");
  const DecodedImage good0 = pattern_image(12, 12, 5), good3 = pattern_image(12, 12, 6);
  const std::string png = png_of(good0);
  ge::test::write_lmdb(root.file("bedroom_train_lmdb"), {{"0-good", png},
                                                         {"1-text", "this is not an image"},
                                                         {"2-cut", png.substr(0, png.size() / 2)},
                                                         {"3-good", png_of(good3)}});
  const std::string db = root.file("bedroom_train_lmdb");

  const LsunDataset strict(root.dir.string(), "bedroom", 12);
  CHECK(read_image(strict, 0) == good0.hwc);
  CHECK_THROWS_WITH_AS(read_image(strict, 1), has(db + " key '1-text'"), Error);
  CHECK_THROWS_WITH_AS(read_image(strict, 1), has("expected an encoded image: WebP"), Error);
  CHECK_THROWS_WITH_AS(read_image(strict, 2), has(db + " key '2-cut'"), Error);
  CHECK_THROWS_WITH_AS(read_image(strict, 2), has("--skip-bad-images"), Error);

  const LsunDataset lenient(root.dir.string(), "bedroom", 12, true);
  CHECK(read_image(lenient, 1) == good3.hwc);  // 1 and 2 are bad: 3 stands in
  CHECK(lenient.bad_images_skipped() == 2);
  CHECK(read_image(lenient, 2) == good3.hwc);
  CHECK(lenient.bad_images_skipped() == 3);
  CHECK(read_image(lenient, 3) == good3.hwc);
  CHECK(lenient.bad_images_skipped() == 3);

  ge::test::write_lmdb(root.file("junk_train_lmdb"), {{"a", "x"}, {"b", "y"}, {"c", "z"}});
  const LsunDataset all_bad(root.dir.string(), "junk", 12, true);
  CHECK_THROWS_WITH_AS(read_image(all_bad, 0), has("do not decode either"), Error);
}
