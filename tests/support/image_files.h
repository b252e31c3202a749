// Small image files for the decoder and ImageFolder suites, written by the reference encoders
// of each format (stb_image_write, TurboJPEG, libwebp) or by hand (PPM/PGM, TIFF), and the
// test pattern shared with tools/make_resize_goldens.py.
#pragma once
#include <cstdint>
#include <string>

#include "data/image_decode.h"

namespace ge::test {

// pattern(x, y, c) = (3x^2 + 5y^2 + 7xy + (c + 1)(11x + 17y) + 13 (x xor y)) mod 256, the
// generated input of the resize goldens (tools/make_resize_goldens.py computes the same).
DecodedImage pattern_image(int width, int height, int channels);

// Encoded files as bytes; `image` has 3 channels unless said otherwise.
std::string png_bytes(const DecodedImage& image);  // any channel count 1-4
std::string bmp_bytes(const DecodedImage& image);
std::string jpeg_bytes(const DecodedImage& image, int quality = 90);  // 4:2:0, or grey for 1 channel
std::string webp_bytes(const DecodedImage& image, bool lossless);
std::string pnm_bytes(const DecodedImage& image);   // P5 for 1 channel, P6 for 3
std::string tiff_bytes(const DecodedImage& image);  // uncompressed RGB, one strip

// Largest |a - b| over two images of the same size; -1 when the sizes differ.
int max_abs_difference(const DecodedImage& a, const DecodedImage& b);

}  // namespace ge::test
