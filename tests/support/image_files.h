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
std::string jpeg_bytes(const DecodedImage& image, int quality = 90,
                       bool progressive = false);  // 4:2:0, or grey for 1 channel
std::string webp_bytes(const DecodedImage& image, bool lossless);
std::string pnm_bytes(const DecodedImage& image);   // P5 for 1 channel, P6 for 3
std::string tiff_bytes(const DecodedImage& image);  // uncompressed RGB, one strip
// A GIF89a of width x height with a 256-grey palette, one frame after a graphic control
// extension, pixel (x, y) of index (x + 3y) mod 256, LZW at 9 bits throughout (a clear code
// every 200 pixels keeps the code size from growing), packed into sub-blocks of 255 bytes.
std::string grey_gif_bytes(int width, int height);

// Largest |a - b| over two images of the same size; -1 when the sizes differ.
int max_abs_difference(const DecodedImage& a, const DecodedImage& b);

}  // namespace ge::test
