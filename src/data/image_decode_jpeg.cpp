// JPEG through the TurboJPEG API of libjpeg-turbo, set up as PIL sets up libjpeg: accurate
// integer IDCT, fancy (smooth) chroma upsampling, CMYK read with Adobe's inverted polarity.
#include <turbojpeg.h>

#include <cstring>
#include <string>
#include <vector>

#include "data/image_codecs.h"

namespace ge::codecs {

namespace {

// One decompressor per thread: creating one costs more than decoding a small image, and a
// TurboJPEG handle must not be used by two threads at once. After a failure the handle is
// replaced: libjpeg-turbo 2.1 leaves a handle whose header read failed mid-way in a state
// that garbles the next file ("Bogus DQT index").
struct Decompressor {
  tjhandle handle = tjInitDecompress();
  ~Decompressor() {
    if (handle) tjDestroy(handle);
  }
  void renew() {
    if (handle) tjDestroy(handle);
    handle = tjInitDecompress();
  }
};

Decompressor& thread_decompressor_slot() {
  thread_local Decompressor d;
  return d;
}

tjhandle thread_decompressor(const ImageBytes& in) {
  Decompressor& d = thread_decompressor_slot();
  if (!d.handle) d.renew();
  if (!d.handle) fail_image(in, "cannot start the JPEG decoder (", tjGetErrorStr2(nullptr), ")");
  return d.handle;
}

// The message of the handle's last failure, the handle then renewed.
std::string take_error(tjhandle tj) {
  std::string why = tjGetErrorStr2(tj);
  thread_decompressor_slot().renew();
  return why;
}

struct JpegHeader {
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
};

JpegHeader read_header(tjhandle tj, const ImageBytes& in) {
  JpegHeader h;
  if (tjDecompressHeader3(tj, in.data, static_cast<unsigned long>(in.size), &h.width, &h.height, &h.subsampling,
                          &h.colorspace) != 0)
    fail_image(in, "bad JPEG header (", take_error(tj), ")");
  // A header cut short reads as "no image" rather than as an error.
  if (h.width == 0 || h.height == 0) {
    take_error(tj);
    fail_image(in, "bad JPEG header (no frame header: the file is truncated or holds only tables)");
  }
  check_dimensions(in, ImageFormat::jpeg, h.width, h.height);
  return h;
}

// PIL's CMYK -> RGB (Convert.c cmyk2rgb) on the inverted ("CMYK;I") values it unpacks:
// with stored bytes s, ink = 255 - s and R = nk - nk * c / 255 rounded by its MULDIV255.
uint8_t muldiv255(int a, int b) {
  const int t = a * b + 128;
  return static_cast<uint8_t>(((t >> 8) + t) >> 8);
}

void cmyk_to_rgb_like_pil(const std::vector<uint8_t>& stored_cmyk, DecodedImage& out) {
  const size_t pixels = size_t(out.width) * size_t(out.height);
  for (size_t p = 0; p < pixels; ++p) {
    const uint8_t* s = &stored_cmyk[p * 4];
    const int not_k = s[3];  // 255 - k with k = 255 - s[3]
    for (int c = 0; c < 3; ++c) out.hwc[p * 3 + c] = static_cast<uint8_t>(not_k - muldiv255(255 - s[c], not_k));
  }
}

// A failed or warned decode: a truncated file is an error (PIL raises "image file is
// truncated"); other libjpeg warnings ("Corrupt JPEG data: N extraneous bytes before
// marker") leave a usable image that PIL loads without complaint, and so do we.
void check_decode_result(tjhandle tj, int result, const ImageBytes& in) {
  if (result == 0) return;
  const bool warning = tjGetErrorCode(tj) == TJERR_WARNING;
  const std::string why = take_error(tj);
  if (warning && why.find("Premature end of JPEG file") == std::string::npos) return;
  if (why.find("Premature end of JPEG file") != std::string::npos)
    fail_image(in, "truncated JPEG (the data ends before the image does)");
  fail_image(in, "corrupt JPEG data (", why, ")");
}

// What a walk over the file's markers finds: whether a frame is progressive (SOF2, SOF6,
// SOF10, SOF14) and whether the end-of-image marker comes before the data ends. Segments are
// skipped by their lengths, entropy-coded data byte by byte (there a 0xFF is followed by a
// stuffed 0x00 or a restart marker, anything else is the next marker).
struct JpegMarkers {
  bool progressive = false;
  bool reaches_end = false;
};

JpegMarkers walk_jpeg_markers(const ImageBytes& in) {
  JpegMarkers found;
  const uint8_t* d = in.data;
  size_t pos = 2;  // after SOI
  for (;;) {
    while (pos < in.size && d[pos] != 0xFF) ++pos;  // stray bytes: libjpeg warns and goes on
    while (pos < in.size && d[pos] == 0xFF) ++pos;  // fill bytes
    if (pos >= in.size) return found;
    const uint8_t marker = d[pos++];
    if (marker == 0xD9) {
      found.reaches_end = true;
      return found;
    }
    if ((marker >= 0xD0 && marker <= 0xD7) || marker == 0x01 || marker == 0x00) continue;  // no length
    if (in.size - pos < 2) return found;
    const size_t length = size_t(d[pos]) << 8 | d[pos + 1];
    if (marker == 0xC2 || marker == 0xC6 || marker == 0xCA || marker == 0xCE) found.progressive = true;
    if (length < 2 || in.size - pos < length) return found;
    pos += length;
    if (marker != 0xDA) continue;
    while (pos + 1 < in.size) {  // entropy-coded data up to the next marker
      if (d[pos] == 0xFF && d[pos + 1] != 0x00 && !(d[pos + 1] >= 0xD0 && d[pos + 1] <= 0xD7) && d[pos + 1] != 0xFF)
        break;
      pos += d[pos] == 0xFF && d[pos + 1] != 0xFF ? 2 : 1;
    }
    if (pos + 1 >= in.size) return found;
  }
}

// libjpeg reads a progressive file's every scan before it returns the first row, and PIL
// stops with "image file is truncated" when the data ends before the end-of-image marker.
// libjpeg-turbo itself only warns and fills in what it had, and its warning is not always
// the one TurboJPEG reports, so the markers decide.
void check_progressive_complete(const ImageBytes& in) {
  const JpegMarkers markers = walk_jpeg_markers(in);
  if (markers.progressive && !markers.reaches_end)
    fail_image(in, "truncated JPEG (a progressive JPEG whose data ends before its end-of-image marker)");
}

}  // namespace

ImageHeader probe_jpeg(const ImageBytes& in) {
  const JpegHeader h = read_header(thread_decompressor(in), in);
  return {ImageFormat::jpeg, h.width, h.height};
}

DecodedImage decode_jpeg(const ImageBytes& in) {
  tjhandle tj = thread_decompressor(in);
  const JpegHeader h = read_header(tj, in);
  check_progressive_complete(in);
  // TJFLAG_LIMITSCANS refuses progressive files with hundreds of scans, which would take
  // minutes to decode (a known denial-of-service pattern); real photos have about ten.
  const int flags = TJFLAG_ACCURATEDCT | TJFLAG_LIMITSCANS;
  DecodedImage out = rgb_image(h.width, h.height);
  if (h.colorspace == TJCS_CMYK || h.colorspace == TJCS_YCCK) {
    std::vector<uint8_t> cmyk(size_t(h.width) * size_t(h.height) * 4);
    check_decode_result(tj,
                        tjDecompress2(tj, in.data, static_cast<unsigned long>(in.size), cmyk.data(), h.width, 0,
                                      h.height, TJPF_CMYK, flags),
                        in);
    cmyk_to_rgb_like_pil(cmyk, out);
  } else {
    check_decode_result(tj,
                        tjDecompress2(tj, in.data, static_cast<unsigned long>(in.size), out.hwc.data(), h.width, 0,
                                      h.height, TJPF_RGB, flags),
                        in);
  }
  return out;
}

}  // namespace ge::codecs
