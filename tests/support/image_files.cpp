#include "support/image_files.h"

#include <stb/stb_image_write.h>
#include <turbojpeg.h>
#include <webp/encode.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "ganengine/error.h"

namespace ge::test {

DecodedImage pattern_image(int width, int height, int channels) {
  DecodedImage img{width, height, channels, {}};
  img.hwc.resize(size_t(width) * height * channels);
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x)
      for (int64_t c = 0; c < channels; ++c)
        img.hwc[size_t((y * width + x) * channels + c)] = static_cast<uint8_t>(
            (3 * x * x + 5 * y * y + 7 * x * y + (c + 1) * (11 * x + 17 * y) + 13 * (x ^ y)) % 256);
  return img;
}

namespace {

void append(void* context, void* data, int size) {
  static_cast<std::string*>(context)->append(static_cast<char*>(data), size_t(size));
}

void put16(std::string& s, uint32_t v) { s += char(v & 255), s += char(v >> 8 & 255); }
void put32(std::string& s, uint32_t v) { put16(s, v & 0xFFFF), put16(s, v >> 16); }

}  // namespace

std::string png_bytes(const DecodedImage& image) {
  std::string out;
  GE_CHECK(stbi_write_png_to_func(append, &out, image.width, image.height, image.channels, image.hwc.data(),
                                  image.width * image.channels),
           "png encode");
  return out;
}

std::string bmp_bytes(const DecodedImage& image) {
  std::string out;
  GE_CHECK(stbi_write_bmp_to_func(append, &out, image.width, image.height, image.channels, image.hwc.data()),
           "bmp encode");
  return out;
}

std::string jpeg_bytes(const DecodedImage& image, int quality, bool progressive) {
  tjhandle tj = tjInitCompress();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  const bool grey = image.channels == 1;
  const int rc = tjCompress2(tj, image.hwc.data(), image.width, 0, image.height, grey ? TJPF_GRAY : TJPF_RGB, &jpeg,
                             &size, grey ? TJSAMP_GRAY : TJSAMP_420, quality, progressive ? TJFLAG_PROGRESSIVE : 0);
  std::string out = rc == 0 ? std::string(reinterpret_cast<char*>(jpeg), size) : std::string();
  tjFree(jpeg);
  tjDestroy(tj);
  GE_CHECK(rc == 0, "jpeg encode");
  return out;
}

std::string grey_gif_bytes(int width, int height) {
  std::string gif = "GIF89a";
  auto u16 = [&](int v) {
    gif += static_cast<char>(v & 0xff);
    gif += static_cast<char>(v >> 8);
  };
  u16(width);
  u16(height);
  gif += "\xF7";
  gif += std::string(2, '\0');
  for (int i = 0; i < 256; ++i) gif += std::string(3, static_cast<char>(i));
  gif += "!\xF9\x04";  // a graphic control extension, as most GIFs carry
  gif += std::string("\x00\x00\x00\x00\x00", 5);
  gif += ",";
  u16(0);
  u16(0);
  u16(width);
  u16(height);
  gif += '\0';
  gif += '\x08';
  std::string data;
  uint32_t bits = 0;
  int nbits = 0;
  auto code = [&](uint32_t c) {
    bits |= c << nbits;
    for (nbits += 9; nbits >= 8; nbits -= 8, bits >>= 8) data += static_cast<char>(bits & 0xff);
  };
  for (int p = 0; p < width * height; ++p) {
    if (p % 200 == 0) code(256);
    code(uint32_t((p % width + 3 * (p / width)) % 256));
  }
  code(257);
  if (nbits > 0) data += static_cast<char>(bits & 0xff);
  for (size_t at = 0; at < data.size(); at += 255) {
    const std::string block = data.substr(at, 255);
    gif += static_cast<char>(block.size());
    gif += block;
  }
  return gif + std::string(1, '\0') + ";";
}

std::string webp_bytes(const DecodedImage& image, bool lossless) {
  uint8_t* webp = nullptr;
  const size_t size = lossless
                          ? WebPEncodeLosslessRGB(image.hwc.data(), image.width, image.height, image.width * 3, &webp)
                          : WebPEncodeRGB(image.hwc.data(), image.width, image.height, image.width * 3, 80, &webp);
  std::string out(reinterpret_cast<char*>(webp), size);
  WebPFree(webp);
  GE_CHECK(size > 0, "webp encode");
  return out;
}

std::string pnm_bytes(const DecodedImage& image) {
  std::string out = (image.channels == 1 ? "P5\n" : "P6\n") + std::to_string(image.width) + " " +
                    std::to_string(image.height) + "\n255\n";
  return out.append(image.hwc.begin(), image.hwc.end());
}

// A little-endian baseline TIFF: header, the pixels as one strip, then one IFD.
std::string tiff_bytes(const DecodedImage& image) {
  const uint32_t pixels_at = 8, bytes = uint32_t(image.hwc.size());
  const uint32_t bits_at = pixels_at + bytes;  // three shorts: 8, 8, 8
  const uint32_t ifd_at = bits_at + 6 + (bits_at + 6) % 2;
  std::string s = "II*";
  s += '\0';
  put32(s, ifd_at);
  s.append(image.hwc.begin(), image.hwc.end());
  put16(s, 8), put16(s, 8), put16(s, 8);
  if (s.size() % 2) s += '\0';
  struct Tag {
    uint16_t id, type;
    uint32_t count, value;
  };
  const Tag tags[] = {{256, 4, 1, uint32_t(image.width)},
                      {257, 4, 1, uint32_t(image.height)},
                      {258, 3, 3, bits_at},
                      {259, 3, 1, 1},
                      {262, 3, 1, 2},
                      {273, 4, 1, pixels_at},
                      {277, 3, 1, 3},
                      {278, 4, 1, uint32_t(image.height)},
                      {279, 4, 1, bytes},
                      {284, 3, 1, 1}};
  put16(s, sizeof tags / sizeof tags[0]);
  for (const Tag& t : tags) put16(s, t.id), put16(s, t.type), put32(s, t.count), put32(s, t.value);
  put32(s, 0);  // no next IFD
  return s;
}

int max_abs_difference(const DecodedImage& a, const DecodedImage& b) {
  if (a.width != b.width || a.height != b.height || a.channels != b.channels || a.hwc.size() != b.hwc.size()) return -1;
  int worst = 0;
  for (size_t i = 0; i < a.hwc.size(); ++i) worst = std::max(worst, std::abs(int(a.hwc[i]) - int(b.hwc[i])));
  return worst;
}

}  // namespace ge::test
