// Image files to pixels, the way torchvision's default loader sees them: PIL's
// Image.open(path).convert('RGB'). Whatever the file holds (grey, grey + alpha, palette, RGBA,
// CMYK), the result is 8-bit RGB: grey is replicated into R = G = B, alpha is dropped (not
// composited), palettes are expanded.
//
// The format is decided by the file's first bytes, never by its extension:
//   JPEG  libjpeg-turbo (TurboJPEG API), accurate integer IDCT and fancy upsampling, the
//         decoder and settings PIL uses, so pixels agree with PIL's (see tests);
//   PNG, BMP, GIF (first frame), TGA   stb_image (TGA has no magic bytes: only a *.tga name
//         that stb accepts is taken for one);
//   PPM/PGM (binary P5/P6)   our own reader, PIL's maxval scaling;
//   WebP  libwebp;   TIFF  libtiff's RGBA interface (8-bit RGB/grey/palette files agree with PIL).
// Every failure (missing file, unknown magic bytes, truncation, corrupt data, an image larger
// than PIL's decompression-bomb limit) throws ge::Error naming the file and what was wrong.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ge {

// A u8 image, row-major HWC: what the decoders produce and the transforms take and return.
struct DecodedImage {
  int width = 0;
  int height = 0;
  int channels = 0;          // 3 (RGB) from decode_image; the transforms accept any count
  std::vector<uint8_t> hwc;  // height * width * channels bytes
};

enum class ImageFormat { jpeg, png, gif, bmp, pnm, webp, tiff, tga };
const char* image_format_name(ImageFormat format);  // "JPEG", "PNG", ...

// PIL refuses images above twice its MAX_IMAGE_PIXELS (DecompressionBombError), so torchvision
// never trains on one; we refuse them too, before allocating anything.
constexpr int64_t kMaxImagePixels = 2 * 89'478'485;

// Reads and decodes the whole file to RGB (channels == 3).
DecodedImage decode_image(const std::string& path);

// The same for bytes already in memory; `name` is what error messages call them (a path).
DecodedImage decode_image_bytes(const uint8_t* bytes, size_t size, const std::string& name);

// What a file's header says, read without decoding pixels: cheap enough to check every file of
// a dataset up front. Throws ge::Error like decode_image for what the header already shows
// (unknown magic bytes, a malformed or truncated header, absurd dimensions, missing pixel data
// of an uncompressed format); damage further into compressed data is found only by decoding.
struct ImageHeader {
  ImageFormat format = ImageFormat::jpeg;
  int width = 0;
  int height = 0;
};
ImageHeader probe_image(const std::string& path);

}  // namespace ge
