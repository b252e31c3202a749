// WebP (lossy or lossless, with or without alpha) through libwebp's simple decoding API,
// asked for RGB: alpha is dropped, as PIL's convert('RGB') drops it. Animated WebP files
// (PIL shows their first frame) are refused: that needs libwebpdemux, and no dataset we know
// of holds them.
#include <webp/decode.h>

#include <cstring>
#include <memory>

#include "data/image_codecs.h"

namespace ge::codecs {

namespace {

WebPBitstreamFeatures read_features(const ImageBytes& in) {
  WebPBitstreamFeatures features;
  const VP8StatusCode status = WebPGetFeatures(in.data, in.size, &features);
  if (status == VP8_STATUS_NOT_ENOUGH_DATA) fail_image(in, "truncated WebP header");
  if (status != VP8_STATUS_OK) fail_image(in, "bad WebP header (libwebp status ", int(status), ")");
  check_dimensions(in, ImageFormat::webp, features.width, features.height);
  if (features.has_animation) fail_image(in, "animated WebP files are not supported");
  return features;
}

}  // namespace

ImageHeader probe_webp(const ImageBytes& in) {
  const WebPBitstreamFeatures f = read_features(in);
  return {ImageFormat::webp, f.width, f.height};
}

DecodedImage decode_webp(const ImageBytes& in) {
  const WebPBitstreamFeatures f = read_features(in);
  DecodedImage out = rgb_image(f.width, f.height);
  // Straight into our buffer: WebPDecodeRGBInto checks the size it is given.
  if (!WebPDecodeRGBInto(in.data, in.size, out.hwc.data(), out.hwc.size(), f.width * 3))
    fail_image(in, "corrupt or truncated WebP data");
  return out;
}

}  // namespace ge::codecs
