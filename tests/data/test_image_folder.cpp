// ImageFolderDataset (--dataset imagenet | folder | lfw) on small trees of generated files in
// every format: torchvision's classes and file order (os.walk order included), the transforms
// applied to each item, thread-safe reads, the layout errors, bad files named, and
// skip_bad_images leaving bad files out or standing in for them.
#include <filesystem>
#include <map>
#include <thread>

#include "data/image_decode.h"
#include "data/image_transform.h"
#include "ganengine/data.h"
#include "ganengine/error.h"
#include "support/image_files.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

using namespace ge;
using namespace ge::test;
using doctest::Contains;
namespace fs = std::filesystem;

namespace {

void put(const TempDir& root, const std::string& relative, const std::string& bytes) {
  const fs::path path = root.dir / relative;
  fs::create_directories(path.parent_path());
  write_file_bytes(path.string(), bytes);
}

std::vector<uint8_t> read_item(const Dataset& ds, int64_t index) {
  std::vector<uint8_t> hwc(size_t(ds.image_size()) * ds.image_size() * 3);
  ds.read(index, hwc.data());
  return hwc;
}

std::vector<uint8_t> expected_item(const std::string& path, int size) {
  return center_crop(resize_shorter_side(decode_image(path), size), size).hwc;
}

std::string relative_path(const TempDir& root, const std::string& path) {
  return fs::path(path).lexically_relative(root.dir).string();
}

std::string construction_error(const std::string& root) {
  try {
    ImageFolderDataset ds(root, 16);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("image folder: classes and file order follow torchvision's ImageFolder") {
  TempDir root;
  const DecodedImage rgb = pattern_image(30, 20, 3);
  put(root, "b_dogs/2.png", png_bytes(rgb));
  put(root, "b_dogs/10.jpg", jpeg_bytes(rgb));
  put(root, "b_dogs/UPPER.JPEG", jpeg_bytes(rgb));
  put(root, "b_dogs/notes.txt", "not an image");
  put(root, "b_dogs/sub/1.webp", webp_bytes(rgb, true));
  put(root, "b_dogs/sub/deeper/4.png", png_bytes(rgb));  // sorted(os.walk): "sub-x" < "sub/deeper"
  put(root, "b_dogs/sub-x/3.ppm", pnm_bytes(rgb));
  put(root, "a_cats/y.PGM", pnm_bytes(pattern_image(30, 20, 1)));
  put(root, "a_cats/x.bmp", bmp_bytes(rgb));
  put(root, "a_cats/deep/er/z.tif", tiff_bytes(rgb));
  put(root, "stray.jpg", jpeg_bytes(rgb));                                   // not inside a class: ignored
  fs::create_directory_symlink(root.dir / "a_cats", root.dir / "c_linked");  // a linked class

  const ImageFolderDataset ds(root.dir.string(), 16);
  CHECK(ds.classes() == std::vector<std::string>{"a_cats", "b_dogs", "c_linked"});
  const std::vector<std::pair<std::string, int>> expected = {
      {"a_cats/x.bmp", 0},      {"a_cats/y.PGM", 0},       {"a_cats/deep/er/z.tif", 0},
      {"b_dogs/10.jpg", 1},     {"b_dogs/2.png", 1},       {"b_dogs/UPPER.JPEG", 1},
      {"b_dogs/sub/1.webp", 1}, {"b_dogs/sub-x/3.ppm", 1}, {"b_dogs/sub/deeper/4.png", 1},
      {"c_linked/x.bmp", 2},    {"c_linked/y.PGM", 2},     {"c_linked/deep/er/z.tif", 2}};
  REQUIRE(ds.size() == int64_t(expected.size()));
  for (int64_t i = 0; i < ds.size(); ++i) {
    CAPTURE(i);
    CHECK(relative_path(root, ds.path(i)) == expected[size_t(i)].first);
    CHECK(ds.target(i) == expected[size_t(i)].second);
  }
  CHECK(ds.channels() == 3);
  CHECK(ds.image_size() == 16);
  CHECK(ds.name() == "folder");
}

TEST_CASE("image folder: each item is decode then Resize then CenterCrop in RGB") {
  TempDir root;
  put(root, "c/wide.png", png_bytes(pattern_image(50, 30, 3)));
  put(root, "c/tall.jpg", jpeg_bytes(pattern_image(30, 70, 3)));
  put(root, "c/grey.pgm", pnm_bytes(pattern_image(40, 40, 1)));
  put(root, "c/small.webp", webp_bytes(pattern_image(9, 7, 3), false));  // upscaled
  DecodedImage flat{64, 48, 3, {}};
  for (int p = 0; p < 64 * 48; ++p) flat.hwc.insert(flat.hwc.end(), {200, 100, 50});
  put(root, "c/flat.bmp", bmp_bytes(flat));

  const ImageFolderDataset ds(root.dir.string(), 24);
  REQUIRE(ds.size() == 5);
  for (int64_t i = 0; i < ds.size(); ++i) {
    CAPTURE(ds.path(i));
    CHECK(read_item(ds, i) == expected_item(ds.path(i), 24));
  }
  const std::vector<uint8_t> flat_item = read_item(ds, 0);  // c/flat.bmp sorts first
  bool all_flat = true;
  for (size_t p = 0; p < flat_item.size(); p += 3)
    all_flat &= flat_item[p] == 200 && flat_item[p + 1] == 100 && flat_item[p + 2] == 50;
  CHECK(all_flat);
  const std::vector<uint8_t> grey_item = read_item(ds, 1);  // c/grey.pgm
  bool replicated = true;
  for (size_t p = 0; p < grey_item.size(); p += 3)
    replicated &= grey_item[p] == grey_item[p + 1] && grey_item[p] == grey_item[p + 2];
  CHECK(replicated);
}

TEST_CASE("image folder: reads from several threads give the same bytes") {
  TempDir root;
  for (int i = 0; i < 24; ++i)
    put(root, "k" + std::to_string(i % 3) + "/" + std::to_string(i) + ".jpg", jpeg_bytes(pattern_image(40 + i, 30, 3)));
  const ImageFolderDataset ds(root.dir.string(), 16);
  std::vector<std::vector<uint8_t>> sequential;
  for (int64_t i = 0; i < ds.size(); ++i) sequential.push_back(read_item(ds, i));
  std::vector<std::vector<std::vector<uint8_t>>> per_thread(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round)
        for (int64_t i = 0; i < ds.size(); ++i) per_thread[size_t(t)].push_back(read_item(ds, (i * 7 + t) % ds.size()));
    });
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < 4; ++t)
    for (size_t k = 0; k < per_thread[size_t(t)].size(); ++k)
      CHECK(per_thread[size_t(t)][k] == sequential[size_t((int64_t(k % size_t(ds.size())) * 7 + t) % ds.size())]);
}

TEST_CASE("image folder: a tree without classes or images explains the expected layout") {
  TempDir root;
  const std::string empty = construction_error(root.dir.string());
  CHECK(empty.find("no class directories") != std::string::npos);
  CHECK(empty.find("/<class>/<image>.jpg") != std::string::npos);
  CHECK(empty.find("found 0 files") != std::string::npos);

  put(root, "a.jpg", jpeg_bytes(pattern_image(8, 8, 3)));
  put(root, "b.png", png_bytes(pattern_image(8, 8, 3)));
  put(root, "readme.txt", "hello");
  const std::string flat = construction_error(root.dir.string());
  CHECK(flat.find("found 3 files, 2 of them images, and 0 subdirectories") != std::string::npos);

  put(root, "cats/readme.txt", "no images here");
  put(root, "dogs/d.png", png_bytes(pattern_image(8, 8, 3)));
  const std::string empty_class = construction_error(root.dir.string());
  CHECK(empty_class.find("found no image in the class directories cats") != std::string::npos);
  CHECK(empty_class.find(".webp") != std::string::npos);  // lists the extensions

  CHECK(construction_error(root.file("missing")).find("does not exist") != std::string::npos);
  CHECK(construction_error(root.file("a.jpg")).find("is not a directory") != std::string::npos);
  CHECK_THROWS_WITH_AS(open_dataset("lfw", "", 64, "", 0), Contains("needs --dataroot"), Error);
}

TEST_CASE("image folder: a bad image makes read throw an error naming the file") {
  TempDir root;
  const std::string jpeg = jpeg_bytes(pattern_image(64, 48, 3));
  put(root, "c/0_good.jpg", jpeg);
  put(root, "c/1_cut.jpg", jpeg.substr(0, jpeg.size() / 2));
  put(root, "c/2_text.png", "this is not a PNG");
  const ImageFolderDataset ds(root.dir.string(), 16);
  REQUIRE(ds.size() == 3);  // without skip_bad_images nothing is checked up front
  read_item(ds, 0);
  const std::string cut = root.file("c/1_cut.jpg") + ": truncated JPEG";
  const std::string text = root.file("c/2_text.png") + ": not an image";
  CHECK_THROWS_WITH_AS(read_item(ds, 1), Contains(cut.c_str()), Error);
  CHECK_THROWS_WITH_AS(read_item(ds, 2), Contains(text.c_str()), Error);
}

TEST_CASE("image folder: skip_bad_images leaves out bad headers and stands in for bad data") {
  TempDir root;
  const std::string jpeg = jpeg_bytes(pattern_image(64, 48, 3));
  put(root, "c/0_good.jpg", jpeg);
  put(root, "c/1_cut.jpg", jpeg.substr(0, jpeg.size() / 2));  // header fine, data cut: found by read
  put(root, "c/2_text.png", "this is not a PNG");             // found at construction
  put(root, "c/3_empty.webp", "");                            // found at construction
  put(root, "c/4_good.png", png_bytes(pattern_image(20, 30, 3)));
  const ImageFolderDataset ds(root.dir.string(), 16, /*skip_bad_images=*/true);
  REQUIRE(ds.size() == 3);
  REQUIRE(ds.excluded_at_scan().size() == 2);
  CHECK(ds.excluded_at_scan()[0].find("c/2_text.png") != std::string::npos);
  CHECK(ds.excluded_at_scan()[1].find("c/3_empty.webp") != std::string::npos);
  CHECK(relative_path(root, ds.path(1)) == "c/1_cut.jpg");

  CHECK(ds.failed_at_read() == 0);
  const auto stand_in = read_item(ds, 1);  // cut: replaced by the next good item, 4_good.png
  CHECK(stand_in == read_item(ds, 2));
  CHECK(stand_in == expected_item(root.file("c/4_good.png"), 16));
  CHECK(read_item(ds, 1) == stand_in);
  CHECK(ds.failed_at_read() == 1);  // counted once however often it is read

  // Nothing readable at all: refused at construction, with a reason.
  TempDir bad;
  put(bad, "c/a.jpg", "junk");
  CHECK_THROWS_WITH_AS(ImageFolderDataset(bad.dir.string(), 16, true), Contains("none of the 1 image files"), Error);
}

TEST_CASE("image folder: open_dataset serves imagenet folder and lfw from an ImageFolder tree") {
  TempDir root;
  put(root, "person_a/1.jpg", jpeg_bytes(pattern_image(40, 40, 3)));
  put(root, "person_b/1.png", png_bytes(pattern_image(40, 40, 3)));
  for (const char* name : {"imagenet", "folder", "lfw"}) {
    CAPTURE(name);
    const auto ds = open_dataset(name, root.dir.string(), 32, "", 0);
    CHECK(ds->name() == name);
    CHECK(ds->size() == 2);
    CHECK(ds->channels() == 3);
    CHECK(ds->image_size() == 32);
    CHECK(dataset_channels(name) == 3);
    CHECK(read_item(*ds, 1) == expected_item(root.file("person_b/1.png"), 32));
  }
}
