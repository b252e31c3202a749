// TIFF through libtiff's RGBA interface (TIFFReadRGBAImageOriented): first page, any
// photometric libtiff understands, returned as 8-bit RGB with alpha dropped. For 8-bit
// RGB, grey and palette files this is PIL's result; 16-bit samples are rounded to 8 bits by
// libtiff where PIL keeps the high byte (at most 1 level apart).
// Built without libtiff (GE_WITH_TIFF unset), TIFF files are refused with a clear message.
#include "data/image_codecs.h"

#ifdef GE_WITH_TIFF
#include <tiffio.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>
#endif

namespace ge::codecs {

#ifdef GE_WITH_TIFF

namespace {

// libtiff reads through these callbacks from the bytes we already hold.
struct MemoryFile {
  const uint8_t* data;
  uint64_t size;
  uint64_t pos = 0;
  std::string error;  // libtiff's last error message, for ours
};

tmsize_t mem_read(thandle_t h, void* buf, tmsize_t n) {
  auto* f = static_cast<MemoryFile*>(h);
  const uint64_t left = f->pos < f->size ? f->size - f->pos : 0;
  const uint64_t count = std::min<uint64_t>(left, n < 0 ? 0 : uint64_t(n));
  std::memcpy(buf, f->data + f->pos, count);
  f->pos += count;
  return static_cast<tmsize_t>(count);
}
tmsize_t mem_write(thandle_t, void*, tmsize_t) { return 0; }
toff_t mem_seek(thandle_t h, toff_t off, int whence) {
  auto* f = static_cast<MemoryFile*>(h);
  const uint64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? f->pos : f->size;
  f->pos = base + off;
  return f->pos;
}
int mem_close(thandle_t) { return 0; }
toff_t mem_size(thandle_t h) { return static_cast<MemoryFile*>(h)->size; }
int no_map(thandle_t, void**, toff_t*) { return 0; }
void no_unmap(thandle_t, void*, toff_t) {}

int keep_error(TIFF*, void* user, const char* module, const char* fmt, va_list ap) {
  char message[512];
  std::vsnprintf(message, sizeof message, fmt, ap);
  auto* f = static_cast<MemoryFile*>(user);
  f->error = std::string(module ? module : "libtiff") + ": " + message;
  return 1;  // handled: libtiff must not print to stderr
}
int ignore_warning(TIFF*, void*, const char*, const char*, va_list) { return 1; }

struct TiffCloser {
  void operator()(TIFF* t) const { TIFFClose(t); }
};

// Opens the first page with per-handle error handlers (thread-safe, unlike the global ones)
// and a cap on any single allocation a corrupt tag could ask for.
std::unique_ptr<TIFF, TiffCloser> open_tiff(const ImageBytes& in, MemoryFile& file) {
  TIFFOpenOptions* options = TIFFOpenOptionsAlloc();
  TIFFOpenOptionsSetErrorHandlerExtR(options, keep_error, &file);
  TIFFOpenOptionsSetWarningHandlerExtR(options, ignore_warning, nullptr);
  TIFFOpenOptionsSetMaxSingleMemAlloc(options, tmsize_t(1) << 30);
  TIFF* tif = TIFFClientOpenExt(in.name->c_str(), "rm", &file, mem_read, mem_write, mem_seek, mem_close, mem_size,
                                no_map, no_unmap, options);
  TIFFOpenOptionsFree(options);
  if (!tif) fail_image(in, "bad TIFF header (", file.error.empty() ? "unreadable" : file.error, ")");
  return std::unique_ptr<TIFF, TiffCloser>(tif);
}

ImageHeader read_size(const ImageBytes& in, TIFF* tif) {
  uint32_t width = 0, height = 0;
  if (!TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &width) || !TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &height))
    fail_image(in, "bad TIFF header (no image width or length)");
  check_dimensions(in, ImageFormat::tiff, width, height);
  return {ImageFormat::tiff, int(width), int(height)};
}

// Every strip (or tile) must hold at least one byte inside the file. libtiff pads a short
// StripOffsets list with empty strips and decodes those as blank rows without an error, so a
// file of a few hundred bytes could otherwise claim tens of millions of pixels, all but a few
// of them invented, and cost seconds and hundreds of megabytes to "decode".
void check_strips_inside_file(const ImageBytes& in, TIFF* tif) {
  const bool tiled = TIFFIsTiled(tif) != 0;
  const uint32_t n = tiled ? TIFFNumberOfTiles(tif) : TIFFNumberOfStrips(tif);
  const char* what = tiled ? "tile" : "strip";
  if (n == 0 || n > in.size) fail_image(in, "corrupt TIFF: ", n, " ", what, "s in a file of ", in.size, " bytes");
  for (uint32_t i = 0; i < n; ++i) {
    int err = 0;
    const uint64_t offset = TIFFGetStrileOffsetWithErr(tif, i, &err);
    const uint64_t bytes = TIFFGetStrileByteCountWithErr(tif, i, &err);
    if (err != 0 || bytes == 0 || offset > in.size || in.size - offset < bytes)
      fail_image(in, "truncated or corrupt TIFF: ", what, " ", i, " of ", n, " (", bytes, " bytes at byte ", offset,
                 ") does not lie inside the file's ", in.size, " bytes");
  }
}

}  // namespace

ImageHeader probe_tiff(const ImageBytes& in) {
  MemoryFile file{in.data, in.size, 0, {}};
  auto tif = open_tiff(in, file);
  return read_size(in, tif.get());
}

DecodedImage decode_tiff(const ImageBytes& in) {
  MemoryFile file{in.data, in.size, 0, {}};
  auto tif = open_tiff(in, file);
  const ImageHeader h = read_size(in, tif.get());
  check_strips_inside_file(in, tif.get());
  std::vector<uint32_t> abgr(size_t(h.width) * size_t(h.height));
  if (!TIFFReadRGBAImageOriented(tif.get(), uint32_t(h.width), uint32_t(h.height), abgr.data(), ORIENTATION_TOPLEFT,
                                 /*stop_on_error=*/1))
    fail_image(in, "corrupt, truncated or unsupported TIFF data (", file.error.empty() ? "unreadable" : file.error,
               ")");
  DecodedImage out = rgb_image(h.width, h.height);
  for (size_t p = 0; p < abgr.size(); ++p) {
    out.hwc[p * 3 + 0] = static_cast<uint8_t>(TIFFGetR(abgr[p]));
    out.hwc[p * 3 + 1] = static_cast<uint8_t>(TIFFGetG(abgr[p]));
    out.hwc[p * 3 + 2] = static_cast<uint8_t>(TIFFGetB(abgr[p]));
  }
  return out;
}

#else  // built without libtiff

[[noreturn]] static void refuse_tiff(const ImageBytes& in) {
  fail_image(in, "TIFF images are not supported by this build of ganengine (built without libtiff); ",
             "convert them to PNG or JPEG");
}
ImageHeader probe_tiff(const ImageBytes& in) { refuse_tiff(in); }
DecodedImage decode_tiff(const ImageBytes& in) { refuse_tiff(in); }

#endif

}  // namespace ge::codecs
