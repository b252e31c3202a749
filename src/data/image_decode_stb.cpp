// PNG, BMP, GIF and TGA through stb_image, asked for 3 channels: stb then expands grey and
// palettes, keeps the high byte of 16-bit samples and drops alpha exactly as PIL's
// convert('RGB') does. Two PIL habits need help: a 16-bit greyscale PNG is mode "I;16" there,
// whose conversion clips values to 255 instead of scaling them; and stb reads zeros past the
// end of an uncompressed BMP instead of failing, so a BMP's pixel data is measured first.
#include <stb/stb_image.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "data/image_codecs.h"

namespace ge::codecs {

namespace {

uint32_t u16le(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8; }
uint32_t u32le(const uint8_t* p) { return u16le(p) | u16le(p + 2) << 16; }

// An uncompressed BMP (BI_RGB, BI_BITFIELDS) holds |height| rows of 4-byte-aligned pixels at
// the offset its file header gives; anything shorter was cut off. Compressed variants are
// left to stb, which refuses the RLE ones.
void check_bmp_pixel_data(const ImageBytes& in) {
  if (in.size < 30) fail_image(in, "truncated BMP header (", in.file_size, " bytes)");
  const uint64_t offset = u32le(in.data + 10);
  const uint32_t info_size = u32le(in.data + 14);
  int64_t width = 0, height = 0;
  uint32_t bits = 0, compression = 0;
  if (info_size == 12) {  // OS/2 BITMAPCOREHEADER: 16-bit sizes, never compressed
    width = u16le(in.data + 18);
    height = u16le(in.data + 20);
    bits = u16le(in.data + 24);
  } else {
    if (in.size < 34) fail_image(in, "truncated BMP header (", in.file_size, " bytes)");
    width = static_cast<int32_t>(u32le(in.data + 18));
    height = static_cast<int32_t>(u32le(in.data + 22));
    bits = u16le(in.data + 28);
    compression = u32le(in.data + 30);
  }
  const bool uncompressed = compression == 0 || compression == 3 || compression == 6;
  if (!uncompressed || width <= 0 || bits == 0 || bits > 32) return;  // stb judges these
  const uint64_t stride = (uint64_t(width) * bits + 31) / 32 * 4;
  const uint64_t needed = stride * uint64_t(height < 0 ? -height : height);
  if (offset > in.file_size || in.file_size - offset < needed)
    fail_image(in, "truncated BMP: ", width, " x ", (height < 0 ? -height : height), " pixels at ", bits, " bits need ",
               needed, " bytes of pixel data from offset ", offset, ", the file has ", in.file_size, " bytes");
}

// A GIF's blocks up to the end of its first image's data (the frame stb and PIL decode): the
// screen descriptor and colour table, extensions, the image descriptor, its colour table and
// LZW sub-blocks up to their zero terminator. stb reads zeros past the end of the data, so a
// cut-off GIF would decode without a word where PIL raises "image file is truncated".
void check_gif_first_frame_complete(const ImageBytes& in) {
  const uint8_t* d = in.data;
  const size_t n = in.size;
  auto truncated = [&] { fail_image(in, "truncated GIF (the data ends before its first frame's image data does)"); };
  auto skip_sub_blocks = [&](size_t pos) {
    for (;;) {
      if (pos >= n) truncated();
      const size_t block = d[pos++];
      if (block == 0) return pos;
      pos += block;
    }
  };
  if (n < 13) truncated();
  size_t pos = 13;
  if (d[10] & 0x80) pos += size_t(3) << ((d[10] & 7) + 1);  // global colour table
  for (;;) {
    if (pos >= n) truncated();
    const uint8_t introducer = d[pos++];
    if (introducer == 0x21) {  // extension: label, then sub-blocks
      pos = skip_sub_blocks(pos + 1);
    } else if (introducer == 0x2C) {  // image descriptor: 9 bytes, colour table, LZW code size
      if (n - pos < 9) truncated();
      const uint8_t flags = d[pos + 8];
      pos += 9;
      if (flags & 0x80) pos += size_t(3) << ((flags & 7) + 1);
      skip_sub_blocks(pos + 1);
      return;
    } else {
      return;  // a trailer before any image, or garbage: stb's message says which
    }
  }
}

// PNG's IHDR: bit depth 16 and colour type 0 (greyscale without alpha).
bool is_16bit_grey_png(const ImageBytes& in) { return in.size > 25 && in.data[24] == 16 && in.data[25] == 0; }

DecodedImage decode_16bit_grey_png_like_pil(const ImageBytes& in, int length) {
  int width = 0, height = 0, channels_in_file = 0;
  std::unique_ptr<stbi_us, void (*)(void*)> grey(
      stbi_load_16_from_memory(in.data, length, &width, &height, &channels_in_file, 1), &stbi_image_free);
  if (!grey) fail_image(in, "corrupt or unsupported PNG data (", stbi_failure_reason(), ")");
  DecodedImage out = rgb_image(width, height);
  for (size_t p = 0; p < size_t(width) * size_t(height); ++p) {
    const uint8_t v = static_cast<uint8_t>(grey.get()[p] > 255 ? 255 : grey.get()[p]);
    out.hwc[p * 3] = out.hwc[p * 3 + 1] = out.hwc[p * 3 + 2] = v;
  }
  return out;
}

int stb_length(const ImageBytes& in) {
  if (in.size > size_t(INT_MAX)) fail_image(in, "file too large for the ", "image decoder (", in.size, " bytes)");
  return static_cast<int>(in.size);
}

}  // namespace

ImageHeader probe_with_stb(const ImageBytes& in, ImageFormat format) {
  int width = 0, height = 0, channels = 0;
  if (!stbi_info_from_memory(in.data, stb_length(in), &width, &height, &channels))
    fail_image(in, "bad ", image_format_name(format), " header (", stbi_failure_reason(), ")");
  check_dimensions(in, format, width, height);
  if (format == ImageFormat::bmp) check_bmp_pixel_data(in);
  return {format, width, height};
}

DecodedImage decode_with_stb(const ImageBytes& in, ImageFormat format) {
  const ImageHeader header = probe_with_stb(in, format);
  if (format == ImageFormat::gif) check_gif_first_frame_complete(in);
  if (format == ImageFormat::png && is_16bit_grey_png(in)) return decode_16bit_grey_png_like_pil(in, stb_length(in));
  int width = 0, height = 0, channels_in_file = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> pixels(
      stbi_load_from_memory(in.data, stb_length(in), &width, &height, &channels_in_file, 3), &stbi_image_free);
  if (!pixels)
    fail_image(in, "corrupt or unsupported ", image_format_name(format), " data (", stbi_failure_reason(), ")");
  if (width != header.width || height != header.height)
    fail_image(in, "inconsistent ", image_format_name(format), " size");
  DecodedImage out = rgb_image(width, height);
  std::memcpy(out.hwc.data(), pixels.get(), out.hwc.size());
  return out;
}

}  // namespace ge::codecs
