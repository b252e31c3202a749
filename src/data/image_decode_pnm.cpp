// Binary PGM (P5) and PPM (P6), read as PIL reads them: maxval 255 is taken as is; another
// maxval is rescaled with round-half-even(v / maxval * out_max) (PpmDecoder); a 16-bit PGM
// becomes PIL mode "I", whose convert('RGB') clips at 255 rather than scaling.
// Plain-text (P1-P3), bitmap (P4) and PAM (P7) files are refused with a clear message.
#include <cmath>

#include "data/image_codecs.h"

namespace ge::codecs {

namespace {

struct PnmHeader {
  int bands = 0;  // 1 for P5, 3 for P6
  int64_t width = 0, height = 0, maxval = 0;
  size_t data_offset = 0;
  uint64_t data_bytes() const { return uint64_t(width) * uint64_t(height) * bands * (maxval > 255 ? 2 : 1); }
};

bool is_space(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// The next decimal header field; '#' starts a comment running to the end of the line. Like
// PIL, the single whitespace byte ending the field is consumed.
int64_t read_field(const ImageBytes& in, size_t& pos, const char* what) {
  while (pos < in.size && (is_space(in.data[pos]) || in.data[pos] == '#')) {
    if (in.data[pos] == '#')
      while (pos < in.size && in.data[pos] != '\n' && in.data[pos] != '\r') ++pos;
    else
      ++pos;
  }
  int64_t value = 0;
  int digits = 0;
  while (pos < in.size && in.data[pos] >= '0' && in.data[pos] <= '9') {
    if (++digits > 9) fail_image(in, "PPM/PGM ", what, " has too many digits");
    value = value * 10 + (in.data[pos++] - '0');
  }
  if (digits == 0) {
    if (pos >= in.size) fail_image(in, "truncated PPM/PGM header (no ", what, ")");
    fail_image(in, "bad PPM/PGM header: expected the ", what, " as a decimal number");
  }
  if (pos < in.size) {
    if (!is_space(in.data[pos])) fail_image(in, "bad PPM/PGM header: junk after the ", what);
    ++pos;
  }
  return value;
}

PnmHeader read_header(const ImageBytes& in) {
  const char kind = static_cast<char>(in.data[1]);
  if (kind != '5' && kind != '6')
    fail_image(in, "P", kind, " PNM files (plain-text P1-P3, bitmap P4, PAM P7) are not supported; ",
               "convert the image to binary PGM (P5) or PPM (P6), PNG or JPEG");
  PnmHeader h;
  h.bands = kind == '5' ? 1 : 3;
  size_t pos = 2;
  h.width = read_field(in, pos, "width");
  h.height = read_field(in, pos, "height");
  h.maxval = read_field(in, pos, "maxval");
  h.data_offset = pos;
  check_dimensions(in, ImageFormat::pnm, h.width, h.height);
  if (h.maxval < 1 || h.maxval > 65535) fail_image(in, "bad PPM/PGM maxval ", h.maxval, " (expected 1 to 65535)");
  const uint64_t available = in.file_size > pos ? in.file_size - pos : 0;
  if (available < h.data_bytes())
    fail_image(in, "truncated PPM/PGM: ", h.width, " x ", h.height, " pixels need ", h.data_bytes(),
               " bytes of pixel data, the file has ", available);
  return h;
}

uint8_t scaled_sample(uint32_t v, const PnmHeader& h) {
  if (h.maxval == 255) return static_cast<uint8_t>(v);
  // PIL: min(out_max, round(v / maxval * out_max)), Python's round being half-to-even
  // (nearbyint's default mode); grey above 8 bits then clips at 255 on convert('RGB').
  const double out_max = (h.bands == 1 && h.maxval > 255) ? 65535.0 : 255.0;
  const double scaled = std::fmin(out_max, std::nearbyint(double(v) / double(h.maxval) * out_max));
  return static_cast<uint8_t>(std::fmin(scaled, 255.0));
}

}  // namespace

ImageHeader probe_pnm(const ImageBytes& in) {
  const PnmHeader h = read_header(in);
  return {ImageFormat::pnm, int(h.width), int(h.height)};
}

DecodedImage decode_pnm(const ImageBytes& in) {
  const PnmHeader h = read_header(in);
  DecodedImage out = rgb_image(int(h.width), int(h.height));
  const uint8_t* src = in.data + h.data_offset;
  const bool wide = h.maxval > 255;
  const size_t pixels = size_t(h.width) * size_t(h.height);
  for (size_t p = 0; p < pixels; ++p) {
    for (int c = 0; c < 3; ++c) {
      const size_t sample = p * h.bands + (h.bands == 1 ? 0 : c);
      const uint32_t v = wide ? (uint32_t(src[2 * sample]) << 8 | src[2 * sample + 1]) : src[sample];
      out.hwc[p * 3 + c] = scaled_sample(v, h);
    }
  }
  return out;
}

}  // namespace ge::codecs
