// save_image_grid: torchvision's make_grid(normalize=True) + save_image, step by step.
// torchvision normalises the batch in place (clamp to [min, max], subtract min, divide by the
// range), pastes it into a black grid, then maps the grid to u8 with mul(255).add_(0.5)
// .clamp_(0, 255) and a truncating cast. Each of those is a separate PyTorch op, so with a
// half-precision batch every intermediate is rounded back to half; and a division by a
// scalar on the GPU is a multiplication by its float reciprocal. We repeat all of that, so a
// grid saved here is byte-identical to the reference's pixels whatever the batch's dtype.
#include "ganengine/image_grid.h"

#include <stb/stb_image.h>
#include <stb/stb_image_write.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/half_bits.h"
#include "ganengine/error.h"
#include "io/atomic_file.h"

namespace ge {
namespace {

// PyTorch's elementwise arithmetic on a tensor of this dtype: computed in Op (its "opmath"
// type: float, or double for f64) and rounded back to the tensor's dtype after every op.
template <class Op>
struct TorchArithmetic {
  DType dtype;
  Op store(Op v) const {
    switch (dtype) {
      case DType::F16: return static_cast<Op>(half_bits_to_float(float_to_half_bits(static_cast<float>(v))));
      case DType::BF16: return static_cast<Op>(bf16_bits_to_float(float_to_bf16_bits(static_cast<float>(v))));
      default: return v;  // f32 in float, f64 in double: already the tensor's precision
    }
  }
};

// The batch's values as u8, logical NCHW order: normalisation then save_image's rounding.
template <class Op>
std::vector<uint8_t> quantise(const std::vector<double>& values, DType dtype, bool on_cuda) {
  const TorchArithmetic<Op> arith{dtype};
  double lo = values.empty() ? 0.0 : values[0];
  double hi = lo;
  for (double v : values) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  // torchvision takes float(t.min()) and float(t.max()), Python doubles, and passes
  // max(high - low, 1e-5) as a scalar that PyTorch converts to the opmath type.
  const Op low = static_cast<Op>(lo);
  const Op high = static_cast<Op>(hi);
  const Op range = static_cast<Op>(std::max(hi - lo, 1e-5));
  const Op inverse = Op(1) / range;  // CUDA's div-by-scalar multiplies by this instead

  std::vector<uint8_t> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    Op x = static_cast<Op>(values[i]);
    x = std::min(std::max(x, low), high);                           // clamp_(min=low, max=high)
    x = arith.store(x - low);                                       // sub_(low)
    x = arith.store(on_cuda ? x * inverse : x / range);             // div_(range)
    x = arith.store(x * Op(255));                                   // mul(255)
    x = arith.store(x + Op(0.5));                                   // add_(0.5)
    x = std::min(std::max(x, Op(0)), Op(255));                      // clamp_(0, 255)
    out[i] = std::isnan(x) ? uint8_t(0) : static_cast<uint8_t>(x);  // .to(uint8) truncates
  }
  return out;
}

struct GridLayout {
  int64_t columns, rows;  // images across and down
  int64_t width, height;  // pixels
  int padding;
};

// make_grid's arithmetic; a batch of one image is returned bare, without padding.
GridLayout layout_for(int64_t n, int64_t h, int64_t w, int nrow, int padding) {
  if (n == 1) return {1, 1, w, h, 0};
  const int64_t columns = std::min<int64_t>(nrow, n);
  const int64_t rows = (n + columns - 1) / columns;
  return {columns, rows, columns * (w + padding) + padding, rows * (h + padding) + padding, padding};
}

bool is_jpeg_path(const std::string& path) {
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos) return false;
  std::string ext = path.substr(dot);
  for (char& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return ext == ".jpg" || ext == ".jpeg";
}

void append_to_string(void* context, void* data, int size) {
  static_cast<std::string*>(context)->append(static_cast<const char*>(data), static_cast<size_t>(size));
}

// Encodes interleaved u8 pixels in memory, as JPEG (quality 95, alpha dropped) when the path
// ends in .jpg or .jpeg, as torchvision's save_image picks the format by extension, else as PNG,
// and writes the file atomically.
void write_png(const std::string& path, const std::vector<uint8_t>& pixels, int64_t width, int64_t height,
               int64_t channels) {
  std::string encoded;
  const bool jpeg = is_jpeg_path(path);
  const int ok =
      jpeg ? stbi_write_jpg_to_func(append_to_string, &encoded, static_cast<int>(width), static_cast<int>(height),
                                    static_cast<int>(channels), pixels.data(), 95)
           : stbi_write_png_to_func(append_to_string, &encoded, static_cast<int>(width), static_cast<int>(height),
                                    static_cast<int>(channels), pixels.data(), static_cast<int>(width * channels));
  if (!ok)
    fail("cannot write ", path, ": ", jpeg ? "JPEG" : "PNG", " encoding of a ", width, " x ", height, " image failed");
  write_file_atomically(path, encoded);
}

}  // namespace

void save_image_grid(const Tensor& images, const std::string& path, int nrow, int padding) {
  if (!images.defined() || images.rank() != 4 || !is_floating(images.dtype()))
    fail("cannot write ", path, ": expected a floating (N, C, H, W) batch of images, got ",
         images.defined() ? images.str() : std::string("an undefined tensor"));
  const int64_t n = images.dim(0), c = images.dim(1), h = images.dim(2), w = images.dim(3);
  if (n < 1 || h < 1 || w < 1) fail("cannot write ", path, ": the batch ", images.str(), " is empty");
  if (c != 1 && c != 3 && c != 4)
    fail("cannot write ", path, ": expected 1, 3 or 4 channels (grey, RGB, RGBA), got ", images.str());
  if (nrow < 1 || padding < 0)
    fail("cannot write ", path, ": expected nrow >= 1 and padding >= 0, got nrow ", nrow, ", padding ", padding);

  const std::vector<double> values = images.to_doubles();
  const bool on_cuda = images.device().is_cuda();
  const std::vector<uint8_t> pixels = images.dtype() == DType::F64 ? quantise<double>(values, images.dtype(), on_cuda)
                                                                   : quantise<float>(values, images.dtype(), on_cuda);

  // A grey batch becomes RGB by repeating its channel, as make_grid does.
  const int64_t channels = c == 1 ? 3 : c;
  const GridLayout g = layout_for(n, h, w, nrow, padding);
  if (g.width > (1 << 24) || g.height > (1 << 24))
    fail("cannot write ", path, ": a ", g.width, " x ", g.height, " grid is too large for a PNG");
  std::vector<uint8_t> grid(static_cast<size_t>(g.width * g.height * channels), 0);  // pad value 0
  for (int64_t k = 0; k < n; ++k) {
    const int64_t top = (k / g.columns) * (h + g.padding) + g.padding;
    const int64_t left = (k % g.columns) * (w + g.padding) + g.padding;
    for (int64_t ch = 0; ch < channels; ++ch) {
      const int64_t source_channel = c == 1 ? 0 : ch;
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
          grid[static_cast<size_t>(((top + y) * g.width + left + x) * channels + ch)] =
              pixels[static_cast<size_t>(((k * c + source_channel) * h + y) * w + x)];
    }
  }

  write_png(path, grid, g.width, g.height, channels);
}

void save_image(const Tensor& image, const std::string& path) {
  if (!image.defined() || image.rank() != 4 || image.dim(0) != 1 || !is_floating(image.dtype()))
    fail("cannot write ", path, ": expected one floating (1, C, H, W) image, got ",
         image.defined() ? image.str() : std::string("an undefined tensor"));
  const int64_t c = image.dim(1), h = image.dim(2), w = image.dim(3);
  if (c != 1 && c != 3 && c != 4) fail("cannot write ", path, ": expected 1, 3 or 4 channels, got ", image.str());
  const std::vector<double> values = image.to_doubles();
  std::vector<uint8_t> hwc(static_cast<size_t>(h * w * c));
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t i = 0; i < h * w; ++i) {
      // Tanh's [-1, 1] onto [0, 255], rounded to nearest.
      const double v = (values[static_cast<size_t>(ch * h * w + i)] + 1.0) * 0.5 * 255.0 + 0.5;
      hwc[static_cast<size_t>(i * c + ch)] = static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
    }
  write_png(path, hwc, w, h, c);
}

Tensor load_png_as_tensor(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) fail("cannot read image ", path, ": ", std::strerror(errno));
  std::string bytes;
  char buffer[1 << 16];
  size_t got;
  while ((got = std::fread(buffer, 1, sizeof buffer, f)) > 0) bytes.append(buffer, got);
  const bool read_failed = std::ferror(f) != 0;
  std::fclose(f);
  if (read_failed) fail("cannot read image ", path, ": read error");
  if (bytes.size() > static_cast<size_t>(INT32_MAX)) fail("cannot read image ", path, ": file too large");

  int w = 0, h = 0, c = 0;
  uint8_t* hwc = stbi_load_from_memory(reinterpret_cast<const stbi_uc*>(bytes.data()), static_cast<int>(bytes.size()),
                                       &w, &h, &c, 0);
  if (!hwc) fail("cannot read image ", path, ": not a valid PNG (", stbi_failure_reason(), ")");
  Tensor out = Tensor::empty({1, c, h, w}, DType::U8);
  uint8_t* nchw = out.data_as<uint8_t>();
  for (int ch = 0; ch < c; ++ch)
    for (int64_t p = 0; p < int64_t(h) * w; ++p) nchw[ch * int64_t(h) * w + p] = hwc[p * c + ch];
  stbi_image_free(hwc);
  return out;
}

}  // namespace ge
