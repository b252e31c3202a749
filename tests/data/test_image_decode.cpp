// Image decoding: every format back to the pixels it was written from (lossless ones exactly),
// RGB output whatever the file held, the format taken from the magic bytes, probe_image on
// headers, and bad input: missing, empty, unknown, truncated, oversized and bit-flipped files
// give a ge::Error naming the file and the problem, never a crash or a hang.
#include <cstdlib>
#include <string>
#include <vector>

#include "data/image_decode.h"
#include "ganengine/error.h"
#include "support/image_files.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

using namespace ge;
using namespace ge::test;
using doctest::Contains;

namespace {

DecodedImage rgb_of_grey(const DecodedImage& grey) {
  DecodedImage rgb{grey.width, grey.height, 3, {}};
  for (uint8_t v : grey.hwc) rgb.hwc.insert(rgb.hwc.end(), {v, v, v});
  return rgb;
}

DecodedImage drop_last_channel(const DecodedImage& image) {
  DecodedImage out{image.width, image.height, image.channels - 1, {}};
  for (size_t i = 0; i < image.hwc.size(); ++i)
    if (int(i % size_t(image.channels)) != image.channels - 1) out.hwc.push_back(image.hwc[i]);
  return out;
}

double mean_abs_difference(const DecodedImage& a, const DecodedImage& b) {
  double sum = 0;
  for (size_t i = 0; i < a.hwc.size(); ++i) sum += std::abs(int(a.hwc[i]) - int(b.hwc[i]));
  return sum / double(a.hwc.size());
}

std::string decode_error(const std::string& path) {
  try {
    decode_image(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

bool tiff_supported(const TempDir& dir) {
  const std::string path = dir.file("probe.tif");
  write_file_bytes(path, tiff_bytes(pattern_image(2, 2, 3)));
  return decode_error(path).find("not supported") == std::string::npos;
}

struct NamedFile {
  const char* name;
  std::string bytes;
};

// One small file of each format, all of the same 23 x 17 picture.
std::vector<NamedFile> sample_files() {
  const DecodedImage rgb = pattern_image(23, 17, 3);
  return {{"a.png", png_bytes(rgb)},
          {"a.bmp", bmp_bytes(rgb)},
          {"a.jpg", jpeg_bytes(rgb)},
          {"a.webp", webp_bytes(rgb, false)},
          {"b.webp", webp_bytes(rgb, true)},
          {"a.ppm", pnm_bytes(rgb)},
          {"a.pgm", pnm_bytes(pattern_image(23, 17, 1))},
          {"a.tif", tiff_bytes(rgb)}};
}

}  // namespace

TEST_CASE("image decoding: lossless formats give back their pixels as RGB") {
  TempDir dir;
  const DecodedImage rgb = pattern_image(23, 17, 3);
  const DecodedImage grey = pattern_image(23, 17, 1);
  auto decoded = [&](const std::string& name, const std::string& bytes) {
    write_file_bytes(dir.file(name), bytes);
    DecodedImage img = decode_image(dir.file(name));
    CHECK(img.channels == 3);
    return img;
  };
  CHECK(decoded("rgb.png", png_bytes(rgb)).hwc == rgb.hwc);
  CHECK(decoded("grey.png", png_bytes(grey)).hwc == rgb_of_grey(grey).hwc);  // R = G = B
  CHECK(decoded("rgba.png", png_bytes(pattern_image(23, 17, 4))).hwc ==
        drop_last_channel(pattern_image(23, 17, 4)).hwc);
  CHECK(decoded("la.png", png_bytes(pattern_image(23, 17, 2))).hwc ==
        rgb_of_grey(drop_last_channel(pattern_image(23, 17, 2))).hwc);
  CHECK(decoded("rgb.bmp", bmp_bytes(rgb)).hwc == rgb.hwc);
  CHECK(decoded("rgb.ppm", pnm_bytes(rgb)).hwc == rgb.hwc);
  CHECK(decoded("grey.pgm", pnm_bytes(grey)).hwc == rgb_of_grey(grey).hwc);
  CHECK(decoded("lossless.webp", webp_bytes(rgb, true)).hwc == rgb.hwc);
  if (tiff_supported(dir)) CHECK(decoded("rgb.tif", tiff_bytes(rgb)).hwc == rgb.hwc);
}

TEST_CASE("image decoding: lossy formats come back close to their pixels") {
  TempDir dir;
  // A smooth picture: what lossy codecs are made for.
  DecodedImage smooth{48, 32, 3, {}};
  for (int y = 0; y < 32; ++y)
    for (int x = 0; x < 48; ++x) smooth.hwc.insert(smooth.hwc.end(), {uint8_t(x * 5), uint8_t(y * 7), uint8_t(100)});
  write_file_bytes(dir.file("a.jpg"), jpeg_bytes(smooth, 95));
  write_file_bytes(dir.file("a.webp"), webp_bytes(smooth, false));
  for (const char* name : {"a.jpg", "a.webp"}) {
    const DecodedImage img = decode_image(dir.file(name));
    INFO(name);
    CHECK(img.width == 48);
    CHECK(img.height == 32);
    CHECK(mean_abs_difference(img, smooth) < 3.0);
  }
  const DecodedImage grey = pattern_image(16, 16, 1);
  write_file_bytes(dir.file("grey.jpg"), jpeg_bytes(grey, 95));
  const DecodedImage g = decode_image(dir.file("grey.jpg"));
  bool replicated = true;
  for (size_t p = 0; p < g.hwc.size(); p += 3) replicated &= g.hwc[p] == g.hwc[p + 1] && g.hwc[p] == g.hwc[p + 2];
  CHECK(replicated);
}

TEST_CASE("image decoding: the format comes from the magic bytes not the extension") {
  TempDir dir;
  const DecodedImage rgb = pattern_image(5, 4, 3);
  write_file_bytes(dir.file("really_a_png.jpg"), png_bytes(rgb));
  write_file_bytes(dir.file("really_a_jpeg.png"), jpeg_bytes(rgb));
  CHECK(decode_image(dir.file("really_a_png.jpg")).hwc == rgb.hwc);
  CHECK(probe_image(dir.file("really_a_png.jpg")).format == ImageFormat::png);
  CHECK(probe_image(dir.file("really_a_jpeg.png")).format == ImageFormat::jpeg);
}

TEST_CASE("image decoding: probe_image reads sizes from headers") {
  TempDir dir;
  for (const NamedFile& f : sample_files()) {
    write_file_bytes(dir.file(f.name), f.bytes);
    if (std::string(f.name) == "a.tif" && !tiff_supported(dir)) continue;
    const ImageHeader h = probe_image(dir.file(f.name));
    INFO(f.name);
    CHECK(h.width == 23);
    CHECK(h.height == 17);
  }
  // A JPEG cut in its scan data still has a good header: only decoding finds the damage.
  const std::string jpeg = jpeg_bytes(pattern_image(64, 64, 3));
  write_file_bytes(dir.file("cut.jpg"), jpeg.substr(0, jpeg.size() / 2));
  CHECK(probe_image(dir.file("cut.jpg")).width == 64);
  CHECK_THROWS_WITH_AS(decode_image(dir.file("cut.jpg")), Contains("truncated JPEG"), Error);
}

TEST_CASE("image decoding: bad files give errors naming the file and the problem") {
  TempDir dir;
  auto error_for = [&](const std::string& name, const std::string& bytes) {
    write_file_bytes(dir.file(name), bytes);
    std::string message = decode_error(dir.file(name));
    CHECK(message.find(dir.file(name)) != std::string::npos);  // names the file
    return message;
  };
  const DecodedImage rgb = pattern_image(40, 30, 3);
  const std::string png = png_bytes(rgb), bmp = bmp_bytes(rgb), jpeg = jpeg_bytes(rgb), ppm = pnm_bytes(rgb);
  const std::string webp = webp_bytes(rgb, false);
  CHECK(error_for("empty.jpg", "").find("empty file") != std::string::npos);
  CHECK(error_for("text.jpg", "hello, world\n").find("not an image: unknown magic bytes 0x68656c6c6f2c2077") !=
        std::string::npos);
  CHECK(error_for("tiny.jpg", "\xFF\xD8").find("truncated JPEG") != std::string::npos);
  CHECK(error_for("header.jpg", jpeg.substr(0, 40)).find("bad JPEG header") != std::string::npos);
  CHECK(error_for("cut.jpg", jpeg.substr(0, jpeg.size() - 30)).find("truncated JPEG") != std::string::npos);
  CHECK(error_for("cut.png", png.substr(0, png.size() / 2)).find("PNG") != std::string::npos);
  CHECK(error_for("cut.bmp", bmp.substr(0, bmp.size() - 10)).find("truncated BMP") != std::string::npos);
  CHECK(error_for("cut.ppm", ppm.substr(0, ppm.size() - 1)).find("truncated PPM/PGM") != std::string::npos);
  CHECK(error_for("cut.webp", webp.substr(0, webp.size() / 2)).find("WebP") != std::string::npos);
  CHECK(error_for("plain.ppm", "P3\n1 1\n255\n0 0 0\n").find("not supported") != std::string::npos);
  CHECK(error_for("bomb.ppm", "P6\n20000 20000\n255\n").find("exceeds the limit") != std::string::npos);
  CHECK(decode_error(dir.file("missing.png")).find("cannot open") != std::string::npos);
  CHECK(decode_error(dir.dir.string()).find("directory") != std::string::npos);
}

TEST_CASE("image decoding: truncated and bit-flipped files throw ge::Error or decode and never crash") {
  TempDir dir;
  const bool tiff = tiff_supported(dir);
  std::mt19937_64& random = rng();
  int errors = 0, decoded = 0;
  auto attempt = [&](const std::string& bytes) {
    const std::string path = dir.file("fuzz");
    write_file_bytes(path, bytes);
    try {
      const DecodedImage img = decode_image(path);
      CHECK(img.hwc.size() == size_t(img.width) * img.height * 3);
      ++decoded;
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find(path) != std::string::npos);
      ++errors;
    }
  };
  for (const NamedFile& f : sample_files()) {
    if (std::string(f.name) == "a.tif" && !tiff) continue;
    INFO(f.name);
    const size_t n = f.bytes.size();
    for (size_t cut = 0; cut < n; cut += (cut < 64 ? 1 : n / 40 + 1)) attempt(f.bytes.substr(0, cut));
    for (int trial = 0; trial < 150; ++trial) {
      std::string flipped = f.bytes;
      const int flips = 1 + int(random() % 8);
      for (int i = 0; i < flips; ++i) flipped[random() % n] ^= char(1 << (random() % 8));
      attempt(flipped);
    }
  }
  CHECK(errors > 0);
}
