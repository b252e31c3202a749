// The per-format halves of image_decode.h, private to src/data: each codec checks its own
// header and decodes to RGB. They see the whole file in memory and report problems through
// fail_image, so every message starts with the file's name.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/image_decode.h"
#include "ganengine/error.h"

namespace ge::codecs {

// A file's bytes (all of them, or for probing perhaps only the first ones; file_size then
// says how many there are on disk).
struct ImageBytes {
  const uint8_t* data = nullptr;
  size_t size = 0;
  uint64_t file_size = 0;
  const std::string* name = nullptr;  // the path, for messages
  bool complete() const { return size == file_size; }
};

template <class... Parts>
[[noreturn]] void fail_image(const ImageBytes& in, const Parts&... parts) {
  fail("cannot read image ", *in.name, ": ", parts...);
}

// Rejects sizes below 1 pixel or above kMaxImagePixels, before anything is allocated.
void check_dimensions(const ImageBytes& in, ImageFormat format, int64_t width, int64_t height);

// An RGB image of this size, its bytes not yet written.
DecodedImage rgb_image(int width, int height);

ImageHeader probe_jpeg(const ImageBytes& in);
DecodedImage decode_jpeg(const ImageBytes& in);

ImageHeader probe_with_stb(const ImageBytes& in, ImageFormat format);  // PNG, BMP, GIF, TGA
DecodedImage decode_with_stb(const ImageBytes& in, ImageFormat format);

ImageHeader probe_pnm(const ImageBytes& in);
DecodedImage decode_pnm(const ImageBytes& in);

ImageHeader probe_webp(const ImageBytes& in);
DecodedImage decode_webp(const ImageBytes& in);

ImageHeader probe_tiff(const ImageBytes& in);
DecodedImage decode_tiff(const ImageBytes& in);

}  // namespace ge::codecs
