// torchvision's transforms.Resize(size) and transforms.CenterCrop(size) on PIL images,
// reproduced to the byte: the reference feeds its networks exactly these pixels.
//
// Resize on a PIL image is PIL's Image.resize(..., BILINEAR): a separable triangle filter
// whose support widens with the downscale factor (antialiasing), one pass per axis, each
// rounded to u8, normalised double weights turned into 22-bit fixed point (PIL's
// ImagingResample). Every rounding step is PIL's, so outputs are identical u8 values
// (tests/goldens/golden_resize.safetensors, made by tools/make_resize_goldens.py).
#pragma once
#include "data/image_decode.h"

namespace ge {

struct ImageSize {
  int width = 0;
  int height = 0;
};

// Which pass runs first. Up to Pillow 12 always the horizontal one; Pillow 13 runs the vertical
// one first when the height loses more than twice as many pixels as the width (for Resize:
// portrait images taller than about 2:1). The two differ by at most 1 level on some pixels.
enum class ResizePassOrder { pillow13, pillow12 };

// PIL's Image.resize((width, height), Image.BILINEAR) of a whole image, 1, 3 or 4 channels.
DecodedImage resize_bilinear(const DecodedImage& image, int width, int height,
                             ResizePassOrder order = ResizePassOrder::pillow13);

// The size transforms.Resize(size) gives: the shorter side becomes `size`, the longer one
// int(size * long / short) (truncated, as Python's int() does).
ImageSize shorter_side_resized_size(int width, int height, int size);

// transforms.Resize(size) with an int size: resize_bilinear to shorter_side_resized_size.
DecodedImage resize_shorter_side(const DecodedImage& image, int size,
                                 ResizePassOrder order = ResizePassOrder::pillow13);

// transforms.CenterCrop((height, width)): the window starting at
// top = round((H - height) / 2), left = round((W - width) / 2), Python's round (half to even).
// An image smaller than the crop is first padded with zeros as torchvision pads it
// (left/top get the smaller half of the padding).
DecodedImage center_crop(const DecodedImage& image, int height, int width);
inline DecodedImage center_crop(const DecodedImage& image, int size) { return center_crop(image, size, size); }

}  // namespace ge
