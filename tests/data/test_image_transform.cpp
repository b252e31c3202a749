// Resize and CenterCrop against Pillow 13 (tools/make_resize_goldens.py): torchvision's
// Resize(size) + CenterCrop(size) on PIL images, byte for byte, for RGB and grey inputs,
// down- and upscaling, landscape and portrait; PIL's resize to arbitrary sizes (one axis
// only, both, a single pixel); Pillow <= 12's pass order where it differs; and the decoders
// against PIL's decode of the same files.
#include <string>

#include "data/image_decode.h"
#include "data/image_transform.h"
#include "support/golden.h"
#include "support/image_files.h"

using namespace ge;
using namespace ge::test;

namespace {

const SafeTensorsFile& goldens() { return golden("golden_resize.safetensors"); }

DecodedImage golden_image(const std::string& key) {
  const Tensor& t = golden_tensor(goldens(), key);
  REQUIRE(t.rank() == 3);
  DecodedImage img{int(t.dim(1)), int(t.dim(0)), int(t.dim(2)), {}};
  img.hwc.assign(t.data_as<uint8_t>(), t.data_as<uint8_t>() + t.numel());
  return img;
}

bool has_golden(const std::string& key) { return goldens().tensors.count(key) > 0; }

// Pixels that differ, for the failure message.
int count_differences(const DecodedImage& a, const DecodedImage& b) {
  int n = 0;
  for (size_t i = 0; i < a.hwc.size() && i < b.hwc.size(); ++i) n += a.hwc[i] != b.hwc[i];
  return n;
}

void check_identical(const DecodedImage& ours, const DecodedImage& pil, const std::string& what) {
  INFO(what, ": ours ", ours.width, "x", ours.height, "x", ours.channels, ", PIL's ", pil.width, "x", pil.height, "x",
       pil.channels, "; ", count_differences(ours, pil), " bytes differ, by up to ", max_abs_difference(ours, pil));
  CHECK(max_abs_difference(ours, pil) == 0);
}

struct Case {
  const char* name;
  int width, height, channels;
};
const Case kCases[] = {
    {"rgb37x23", 37, 23, 3}, {"grey64x48", 64, 48, 1}, {"rgb300x200", 300, 200, 3}, {"rgb17x91", 17, 91, 3}};

}  // namespace

TEST_CASE("image transforms: the test pattern is the goldens' input") {
  check_identical(pattern_image(37, 23, 3), golden_image("input/rgb37x23"), "pattern 37x23");
}

TEST_CASE("image transforms: resize_shorter_side and center_crop equal torchvision on PIL byte for byte") {
  for (const Case& c : kCases) {
    const DecodedImage input = pattern_image(c.width, c.height, c.channels);
    for (int size : {16, 32, 64}) {
      const std::string key = std::string(c.name) + "/";
      const DecodedImage resized = resize_shorter_side(input, size);
      if (has_golden(key + "resize" + std::to_string(size)))
        check_identical(resized, golden_image(key + "resize" + std::to_string(size)),
                        key + "resize" + std::to_string(size));
      check_identical(center_crop(resized, size), golden_image(key + "crop" + std::to_string(size)),
                      key + "crop" + std::to_string(size));
    }
  }
}

TEST_CASE("image transforms: resize_bilinear equals PIL's Image.resize BILINEAR at arbitrary sizes") {
  int checked = 0;
  for (const auto& [key, tensor] : goldens().tensors) {
    if (key.rfind("free/", 0) != 0) continue;
    const DecodedImage expected = golden_image(key);
    const std::string source = key.substr(5, key.rfind('_') - 5);
    for (const Case& c : kCases)
      if (source == c.name) {
        check_identical(resize_bilinear(pattern_image(c.width, c.height, c.channels), expected.width, expected.height),
                        expected, key);
        ++checked;
      }
  }
  CHECK(checked == 7);
}

TEST_CASE("image transforms: Pillow 12 pass order where Pillow 13 resizes vertically first") {
  const DecodedImage tall = pattern_image(17, 91, 3);
  check_identical(resize_shorter_side(tall, 16, ResizePassOrder::pillow12), golden_image("pillow12/rgb17x91/resize16"),
                  "pillow12 rgb17x91/resize16");
  check_identical(resize_bilinear(tall, 40, 13, ResizePassOrder::pillow12),
                  golden_image("pillow12/free/rgb17x91_40x13"), "pillow12 free 40x13");
  check_identical(resize_bilinear(tall, 1, 1, ResizePassOrder::pillow12), golden_image("pillow12/free/rgb17x91_1x1"),
                  "pillow12 free 1x1");
  // The orders really differ there (else this case tests nothing), by rounding only.
  const int apart = max_abs_difference(resize_shorter_side(tall, 16, ResizePassOrder::pillow12),
                                       resize_shorter_side(tall, 16, ResizePassOrder::pillow13));
  CHECK(apart == 1);
  // Where the height does not lose over twice the width's pixels, both orders agree.
  const DecodedImage wide = pattern_image(300, 200, 3);
  CHECK(resize_shorter_side(wide, 32, ResizePassOrder::pillow12).hwc ==
        resize_shorter_side(wide, 32, ResizePassOrder::pillow13).hwc);
}

TEST_CASE("image transforms: a same-size resize is a copy") {
  const DecodedImage img = pattern_image(9, 7, 3);
  CHECK(resize_bilinear(img, 9, 7).hwc == img.hwc);
  CHECK(resize_shorter_side(img, 7).hwc == img.hwc);
}

TEST_CASE("image transforms: Resize output size follows torchvision's int of size times long over short") {
  auto check = [](int w, int h, int size, int ew, int eh) {
    const ImageSize s = shorter_side_resized_size(w, h, size);
    INFO(w, "x", h, " -> ", size);
    CHECK(s.width == ew);
    CHECK(s.height == eh);
  };
  check(37, 23, 16, 25, 16);    // 25.7 truncates
  check(17, 91, 64, 64, 342);   // portrait: width is the short side
  check(50, 50, 64, 64, 64);    // square
  check(300, 200, 64, 96, 64);  // exact
  check(500, 375, 64, 85, 64);  // an ImageNet shape: 85.33
  check(3, 1000, 64, 64, 21333);
  CHECK_THROWS_AS(shorter_side_resized_size(0, 10, 64), Error);
}

TEST_CASE("image transforms: center_crop rounds half to even and pads small images like torchvision") {
  // One row whose bytes are their x coordinate: the crop's first byte is its left offset.
  auto left_of = [](int width, int crop) {
    DecodedImage row{width, 1, 1, {}};
    for (int x = 0; x < width; ++x) row.hwc.push_back(uint8_t(x));
    return int(center_crop(row, 1, crop).hwc[0]);
  };
  CHECK(left_of(5, 2) == 2);  // round(1.5) = 2
  CHECK(left_of(7, 2) == 2);  // round(2.5) = 2
  CHECK(left_of(9, 2) == 4);  // round(3.5) = 4
  CHECK(left_of(4, 1) == 2);  // round(1.5) = 2
  CHECK(left_of(6, 1) == 2);  // round(2.5) = 2
  CHECK(left_of(8, 8) == 0);

  // 2x2 -> 5x5: torchvision pads (5 - 2) // 2 = 1 before and 2 after, then crops at 0.
  DecodedImage small{2, 2, 1, {1, 2, 3, 4}};
  const DecodedImage padded = center_crop(small, 5);
  const std::vector<uint8_t> expected = {0, 0, 0, 0, 0,  //
                                         0, 1, 2, 0, 0,  //
                                         0, 3, 4, 0, 0,  //
                                         0, 0, 0, 0, 0,  //
                                         0, 0, 0, 0, 0};
  CHECK(padded.hwc == expected);
  // Taller than the crop but narrower: pad the width, crop the height.
  DecodedImage column{1, 5, 1, {10, 11, 12, 13, 14}};
  CHECK(center_crop(column, 2, 3).hwc == std::vector<uint8_t>{0, 12, 0, 0, 13, 0});  // top = round(1.5) = 2
}

TEST_CASE("image decoding: lossless formats equal PIL's convert RGB exactly") {
  for (const char* file : {"golden_grey16.png", "golden_maxval1000.pgm", "golden_maxval100.ppm"})
    check_identical(decode_image(data_path(file)), golden_image(std::string("decode/") + file), file);
}

TEST_CASE("image decoding: JPEG and WebP agree with PIL's decode") {
  // libjpeg-turbo here and in Pillow's wheel, same IDCT and upsampling: we expect identical
  // bytes, and allow 2 levels should another libjpeg build round its IDCT differently.
  for (const char* file : {"golden_photo.jpg", "golden_photo_grey.jpg", "golden_photo_cmyk.jpg", "golden_photo.webp"}) {
    const DecodedImage ours = decode_image(data_path(file));
    const DecodedImage pil = golden_image(std::string("decode/") + file);
    INFO(file, ": ", count_differences(ours, pil), " bytes differ from PIL's, by up to ",
         max_abs_difference(ours, pil));
    CHECK(max_abs_difference(ours, pil) >= 0);
    CHECK(max_abs_difference(ours, pil) <= 2);
  }
}

TEST_CASE("image transforms: JPEG decode then Resize and CenterCrop equal torchvision's pipeline") {
  const DecodedImage decoded = decode_image(data_path("golden_photo.jpg"));
  const DecodedImage ours = center_crop(resize_shorter_side(decoded, 32), 32);
  const DecodedImage pil = golden_image("photo_pipeline/resize32_crop32");
  INFO(count_differences(ours, pil), " bytes differ from torchvision's, by up to ", max_abs_difference(ours, pil));
  CHECK(max_abs_difference(ours, pil) >= 0);
  CHECK(max_abs_difference(ours, pil) <= 2);
}
