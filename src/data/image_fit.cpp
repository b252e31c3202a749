// fit_image: Resize(size) [+ CenterCrop(size)] through image_transform.h's PIL-exact versions.
#include "data/image_fit.h"

#include <cstring>

#include "data/image_transform.h"
#include "ganengine/error.h"

namespace ge {

void fit_image(const uint8_t* hwc, int width, int height, int channels, int size, bool center_crop_too,
               const std::string& what, uint8_t* out) {
  const size_t out_bytes = size_t(size) * size_t(size) * size_t(channels);
  // torchvision's resize returns an image already of the asked size unchanged.
  if (width == size && height == size) {
    std::memcpy(out, hwc, out_bytes);
    return;
  }
  if (!center_crop_too && width != height)
    fail(what, ": a ", width, " x ", height, " image, expected a square one (Resize(", size,
         ") alone would not make it ", size, " x ", size, ")");
  DecodedImage image;
  image.width = width;
  image.height = height;
  image.channels = channels;
  image.hwc.assign(hwc, hwc + size_t(width) * size_t(height) * size_t(channels));
  DecodedImage fitted = resize_shorter_side(image, size);
  if (center_crop_too) fitted = center_crop(fitted, size);
  GE_CHECK(fitted.width == size && fitted.height == size && fitted.hwc.size() == out_bytes, what, ": resizing gave ",
           fitted.width, " x ", fitted.height);
  std::memcpy(out, fitted.hwc.data(), out_bytes);
}

}  // namespace ge
