// Resize and CenterCrop as torchvision applies them to PIL images. The resampler follows
// PIL's libImaging/Resample.c step by step (precompute_coeffs, normalize_coeffs_8bpc,
// ImagingResampleHorizontal/Vertical_8bpc, clip8, the order of the two passes): same double
// arithmetic in the same order,
// same fixed-point rounding, so the bytes agree exactly. This file is built without FMA
// contraction (-ffp-contract=off), which that agreement needs.
#include "data/image_transform.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ganengine/error.h"

namespace ge {

namespace {

// PIL's fixed point for 8-bit images: 32 bits, minus 8 for the pixel, minus 2 for headroom.
constexpr int kPrecisionBits = 32 - 8 - 2;

// The triangle ("bilinear") filter, support 1.
double triangle(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

// For each output position along one axis: the first input position it reads, how many it
// reads, and that many fixed-point weights (ksize slots per output, unused ones zero).
struct AxisWeights {
  int ksize = 0;
  std::vector<int> first;
  std::vector<int> count;
  std::vector<int32_t> weights;
};

// precompute_coeffs + normalize_coeffs_8bpc for the box [in0, in1) of an axis of in_size
// pixels mapped onto out_size pixels. The box is float in PIL, hence the float subtraction.
AxisWeights axis_weights(int in_size, float in0, float in1, int out_size) {
  const double scale = static_cast<double>(in1 - in0) / out_size;
  const double filterscale = scale < 1.0 ? 1.0 : scale;  // widen the filter when shrinking
  const double support = 1.0 * filterscale;
  AxisWeights a;
  a.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  a.first.resize(size_t(out_size));
  a.count.resize(size_t(out_size));
  a.weights.assign(size_t(out_size) * size_t(a.ksize), 0);
  std::vector<double> k(size_t(a.ksize));
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = in0 + (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int xmin = static_cast<int>(center - support + 0.5);  // C's truncating cast, as in PIL
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      const double w = triangle((x + xmin - center + 0.5) * ss);
      k[size_t(x)] = w;
      ww += w;
    }
    int32_t* fixed = &a.weights[size_t(xx) * size_t(a.ksize)];
    for (int x = 0; x < xmax; ++x) {
      const double normalised = ww != 0.0 ? k[size_t(x)] / ww : k[size_t(x)];
      fixed[x] = normalised < 0 ? static_cast<int32_t>(-0.5 + normalised * (1 << kPrecisionBits))
                                : static_cast<int32_t>(0.5 + normalised * (1 << kPrecisionBits));
    }
    a.first[size_t(xx)] = xmin;
    a.count[size_t(xx)] = xmax;
  }
  return a;
}

uint8_t clip8(int32_t v) {
  if (v >= (1 << kPrecisionBits << 8)) return 255;
  if (v <= 0) return 0;
  return static_cast<uint8_t>(v >> kPrecisionBits);
}

// Output rows [0, out.height) from input rows [row_offset, row_offset + out.height).
template <int C>
void resample_rows(const DecodedImage& in, int row_offset, const AxisWeights& a, DecodedImage& out) {
  for (int yy = 0; yy < out.height; ++yy) {
    const uint8_t* src = &in.hwc[size_t(yy + row_offset) * size_t(in.width) * C];
    uint8_t* dst = &out.hwc[size_t(yy) * size_t(out.width) * C];
    for (int xx = 0; xx < out.width; ++xx) {
      const int32_t* k = &a.weights[size_t(xx) * size_t(a.ksize)];
      const uint8_t* s = src + size_t(a.first[size_t(xx)]) * C;
      int32_t sum[C];
      for (int c = 0; c < C; ++c) sum[c] = 1 << (kPrecisionBits - 1);
      for (int x = 0; x < a.count[size_t(xx)]; ++x)
        for (int c = 0; c < C; ++c) sum[c] += s[x * C + c] * k[x];
      for (int c = 0; c < C; ++c) dst[xx * C + c] = clip8(sum[c]);
    }
  }
}

// Output rows from rows first[yy] .. first[yy] + count[yy] of `in`. Tap by tap over whole
// rows, so the inner loop runs along memory (and vectorises); integer sums do not depend on
// their order, so this is PIL's result exactly.
void resample_columns(const DecodedImage& in, const AxisWeights& a, DecodedImage& out) {
  const size_t row = size_t(in.width) * size_t(in.channels);
  std::vector<int32_t> sum(row);
  for (int yy = 0; yy < out.height; ++yy) {
    const int32_t* k = &a.weights[size_t(yy) * size_t(a.ksize)];
    const uint8_t* src = &in.hwc[size_t(a.first[size_t(yy)]) * row];
    std::fill(sum.begin(), sum.end(), int32_t(1) << (kPrecisionBits - 1));
    for (int y = 0; y < a.count[size_t(yy)]; ++y) {
      const uint8_t* s = src + size_t(y) * row;
      const int32_t w = k[y];
      for (size_t i = 0; i < row; ++i) sum[i] += s[i] * w;
    }
    uint8_t* dst = &out.hwc[size_t(yy) * row];
    for (size_t i = 0; i < row; ++i) dst[i] = clip8(sum[i]);
  }
}

DecodedImage blank_like(const DecodedImage& image, int width, int height) {
  DecodedImage out;
  out.width = width;
  out.height = height;
  out.channels = image.channels;
  out.hwc.resize(size_t(width) * size_t(height) * size_t(image.channels));
  return out;
}

void resample_rows_any(const DecodedImage& in, int row_offset, const AxisWeights& a, DecodedImage& out) {
  switch (in.channels) {
    case 1: return resample_rows<1>(in, row_offset, a, out);
    case 3: return resample_rows<3>(in, row_offset, a, out);
    case 4: return resample_rows<4>(in, row_offset, a, out);
    default: fail("resize: images of ", in.channels, " channels are not supported (1, 3 or 4)");
  }
}

// Python's round(n / 2) for an integer n >= 0: halves go to the even neighbour.
int half_rounded_to_even(int n) {
  const int down = n / 2;
  if (n % 2 == 0) return down;
  return down % 2 == 0 ? down : down + 1;
}

void check_image(const DecodedImage& image, const char* what) {
  GE_CHECK(image.width > 0 && image.height > 0 && image.channels > 0 &&
               image.hwc.size() == size_t(image.width) * size_t(image.height) * size_t(image.channels),
           what, ": malformed image ", image.width, " x ", image.height, " x ", image.channels);
}

}  // namespace

DecodedImage resize_bilinear(const DecodedImage& image, int width, int height, ResizePassOrder order) {
  check_image(image, "resize");
  if (width < 1 || height < 1) fail("resize: expected an output size of at least 1 x 1, got ", width, " x ", height);
  if (width == image.width && height == image.height) return image;  // PIL copies

  const AxisWeights horizontal = axis_weights(image.width, 0.0f, float(image.width), width);
  AxisWeights vertical = axis_weights(image.height, 0.0f, float(image.height), height);
  const bool need_horizontal = width != image.width;
  const bool need_vertical = height != image.height;
  // Pillow 13's rule (ImagingResampleInner): the vertical pass goes first when the height
  // loses more than twice as many pixels as the width does. The order matters for the bytes:
  // the first pass's output is rounded to u8 before the second reads it.
  const int rows_lost = image.height - height;
  const bool vertical_first =
      order == ResizePassOrder::pillow13 && rows_lost > 0 && rows_lost > (image.width - width) * 2;

  if (vertical_first) {
    DecodedImage columns = blank_like(image, image.width, height);
    resample_columns(image, vertical, columns);
    if (!need_horizontal) return columns;
    DecodedImage out = blank_like(image, width, height);
    resample_rows_any(columns, 0, horizontal, out);
    return out;
  }
  if (!need_horizontal) {
    DecodedImage out = blank_like(image, width, height);
    resample_columns(image, vertical, out);
    return out;
  }
  // As PIL does: the horizontal pass covers only the rows the vertical pass will read.
  const int first_row = vertical.first.front();
  const int last_row = vertical.first.back() + vertical.count.back();
  DecodedImage rows = blank_like(image, width, last_row - first_row);
  resample_rows_any(image, first_row, horizontal, rows);
  if (!need_vertical) return rows;
  for (int& f : vertical.first) f -= first_row;
  DecodedImage out = blank_like(image, width, height);
  resample_columns(rows, vertical, out);
  return out;
}

ImageSize shorter_side_resized_size(int width, int height, int size) {
  if (width < 1 || height < 1 || size < 1)
    fail("Resize: expected a positive image and target size, got ", width, " x ", height, " -> ", size);
  const int shorter = std::min(width, height);
  const int longer = std::max(width, height);
  // Python: int(size * long / short); the product is exact, / is a correctly rounded double.
  const int new_long = static_cast<int>(double(int64_t(size) * longer) / double(shorter));
  return width <= height ? ImageSize{size, new_long} : ImageSize{new_long, size};
}

DecodedImage resize_shorter_side(const DecodedImage& image, int size, ResizePassOrder order) {
  const ImageSize s = shorter_side_resized_size(image.width, image.height, size);
  return resize_bilinear(image, s.width, s.height, order);
}

DecodedImage center_crop(const DecodedImage& image, int height, int width) {
  check_image(image, "center_crop");
  if (width < 1 || height < 1) fail("center_crop: expected a crop of at least 1 x 1, got ", height, " x ", width);
  // torchvision pads a too-small image with zeros first: (crop - size) // 2 before, the rest after.
  const int pad_left = width > image.width ? (width - image.width) / 2 : 0;
  const int pad_top = height > image.height ? (height - image.height) / 2 : 0;
  const int padded_w = std::max(width, image.width);
  const int padded_h = std::max(height, image.height);
  const int top = half_rounded_to_even(padded_h - height);
  const int left = half_rounded_to_even(padded_w - width);

  DecodedImage out = blank_like(image, width, height);  // zero-filled: the padding
  const int C = image.channels;
  for (int y = 0; y < height; ++y) {
    const int src_y = y + top - pad_top;
    if (src_y < 0 || src_y >= image.height) continue;
    const int x0 = std::max(0, pad_left - left);                    // first x inside the image
    const int x1 = std::min(width, image.width + pad_left - left);  // one past the last
    if (x1 <= x0) continue;
    const int src_x0 = x0 + left - pad_left;
    std::memcpy(&out.hwc[(size_t(y) * width + x0) * C], &image.hwc[(size_t(src_y) * image.width + src_x0) * C],
                size_t(x1 - x0) * C);
  }
  return out;
}

}  // namespace ge
