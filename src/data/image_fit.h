// The image transforms the example applies to its datasets before ToTensor():
// torchvision Resize(size) (shorter side to size, PIL bilinear) and, for LSUN, CenterCrop(size).
// The file datasets call only this, so the resampling lives in one place.
#pragma once
#include <cstdint>
#include <string>

namespace ge {

// Writes size x size x channels bytes (HWC) to out. `what` names the image in errors (a file,
// an LMDB key). Without center_crop the image must be square, as Resize(size) alone gives a
// square result only for square inputs; with it, the shorter side is resized to size and the
// centre size x size is kept.
void fit_image(const uint8_t* hwc, int width, int height, int channels, int size, bool center_crop,
               const std::string& what, uint8_t* out);

}  // namespace ge
