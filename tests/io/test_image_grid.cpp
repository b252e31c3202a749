// save_image_grid against torchvision.utils.save_image(normalize=True): grid geometry,
// padding, min-max normalisation, grey -> RGB, the u8 rounding (including half precision and
// the GPU's division by reciprocal), and the PNG round trip through load_png_as_tensor.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/backend.h"
#include "ganengine/error.h"
#include "ganengine/image_grid.h"
#include "support/golden.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

using namespace ge;
using doctest::Contains;
using ge::test::TempDir;

namespace {

// A saved grid read back: u8 (1, C, H, W).
struct Png {
  Tensor t;
  int64_t channels() const { return t.dim(1); }
  int64_t height() const { return t.dim(2); }
  int64_t width() const { return t.dim(3); }
  int at(int64_t c, int64_t y, int64_t x) const { return t.data_as<uint8_t>()[(c * height() + y) * width() + x]; }
};

Png save_and_load(const Tensor& images, const TempDir& tmp, int nrow = 8, int padding = 2) {
  const std::string path = tmp.file("grid.png");
  save_image_grid(images, path, nrow, padding);
  return {load_png_as_tensor(path)};
}

// save_image's u8 for a value already normalised to [0, 1], in float as PyTorch does it.
int expected_u8(float normalised) {
  const float scaled = normalised * 255.0f;
  const float rounded = scaled + 0.5f;
  return static_cast<int>(std::min(std::max(rounded, 0.0f), 255.0f));
}

}  // namespace

TEST_CASE("image grid: two images padding black each pixel where make_grid puts it") {
  TempDir tmp("ge_grid");
  // Image 0 is all 1 (-> 255); image 1 all 0 (-> 128) but for one -1 (-> 0) at channel 2,
  // row 1, column 2. The batch's min is -1 and max 1, so x -> (x + 1) / 2.
  const int64_t N = 2, C = 3, H = 2, W = 3;
  std::vector<float> v(N * C * H * W, 0.0f);
  for (int64_t i = 0; i < C * H * W; ++i) v[i] = 1.0f;
  v[((1 * C + 2) * H + 1) * W + 2] = -1.0f;
  const Png png = save_and_load(Tensor::from_floats(v, {N, C, H, W}, DType::F32), tmp);

  REQUIRE(png.channels() == 3);
  REQUIRE(png.height() == 1 * (H + 2) + 2);  // 6
  REQUIRE(png.width() == 2 * (W + 2) + 2);   // 12
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t y = 0; y < png.height(); ++y)
      for (int64_t x = 0; x < png.width(); ++x) {
        int expected = 0;  // padding
        const bool in_row = y >= 2 && y < 2 + H;
        if (in_row && x >= 2 && x < 2 + W) expected = 255;     // image 0 at (2, 2)
        if (in_row && x >= 7 && x < 7 + W) expected = 128;     // image 1 at (2, 7)
        if (c == 2 && y == 2 + 1 && x == 7 + 2) expected = 0;  // image 1's -1
        CAPTURE(c);
        CAPTURE(y);
        CAPTURE(x);
        CHECK(png.at(c, y, x) == expected);
      }
}

TEST_CASE("image grid: geometry of partial and multi-row grids and a single image") {
  TempDir tmp("ge_grid");
  const int64_t H = 4, W = 6;
  SUBCASE("N=5, nrow 8: one row of five") {
    const Png png = save_and_load(test::random_tensor({5, 3, H, W}, DType::F32), tmp);
    CHECK(png.width() == 5 * (W + 2) + 2);
    CHECK(png.height() == H + 2 + 2);
  }
  SUBCASE("N=10, nrow 4: three rows, the last two cells black") {
    std::vector<float> v(10 * 3 * H * W, 0.5f);
    v[0] = 0.0f;  // the min, so that 0.5 is not black
    v[1] = 1.0f;
    const Png png = save_and_load(Tensor::from_floats(v, {10, 3, H, W}, DType::F32), tmp, 4);
    CHECK(png.width() == 4 * (W + 2) + 2);
    CHECK(png.height() == 3 * (H + 2) + 2);
    const int64_t third_row = 2 * (H + 2) + 2;
    CHECK(png.at(0, third_row + 1, 1 * (W + 2) + 2 + 1) == 128);  // image 9
    CHECK(png.at(0, third_row + 1, 2 * (W + 2) + 2 + 1) == 0);    // no image 10
    CHECK(png.at(0, third_row + 1, 3 * (W + 2) + 2 + 1) == 0);    // no image 11
  }
  SUBCASE("padding 0 and nrow 1") {
    const Png png = save_and_load(test::random_tensor({3, 3, H, W}, DType::F32), tmp, 1, 0);
    CHECK(png.width() == W);
    CHECK(png.height() == 3 * H);
  }
  SUBCASE("a single image is written without padding, as make_grid returns it bare") {
    const Png png = save_and_load(test::random_tensor({1, 3, H, W}, DType::F32), tmp);
    CHECK(png.width() == W);
    CHECK(png.height() == H);
  }
}

TEST_CASE("image grid: min-max normalisation over the whole batch") {
  TempDir tmp("ge_grid");
  SUBCASE("known values: min -> 0, max -> 255, middle -> 128") {
    const Png png = save_and_load(Tensor::from_floats({2, 4, 4, 6}, {1, 1, 2, 2}, DType::F32), tmp);
    CHECK(png.at(0, 0, 0) == 0);
    CHECK(png.at(1, 0, 1) == 128);
    CHECK(png.at(2, 1, 0) == 128);
    CHECK(png.at(0, 1, 1) == 255);
  }
  SUBCASE("random values match the float formula everywhere, across images") {
    const int64_t N = 3, C = 3, H = 5, W = 5;
    const Tensor images = test::random_tensor({N, C, H, W}, DType::F32, Device::cpu(), MemoryFormat::NHWC, -3.0, 7.0);
    const std::vector<float> v = images.to_floats();
    const float lo = *std::min_element(v.begin(), v.end());
    const float hi = *std::max_element(v.begin(), v.end());
    const float range = static_cast<float>(static_cast<double>(hi) - static_cast<double>(lo));
    const Png png = save_and_load(images, tmp);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t y = 0; y < H; ++y)
          for (int64_t x = 0; x < W; ++x) {
            const float value = v[((n * C + c) * H + y) * W + x];
            CHECK(png.at(c, 2 + y, 2 + n * (W + 2) + x) == expected_u8((value - lo) / range));
          }
  }
  SUBCASE("a constant batch divides by 1e-5, not 0: all black") {
    const Png png = save_and_load(Tensor::from_floats(std::vector<float>(12, 0.3f), {1, 3, 2, 2}, DType::F32), tmp);
    for (int64_t c = 0; c < 3; ++c) CHECK(png.at(c, 1, 1) == 0);
  }
}

TEST_CASE("image grid: one channel becomes grey RGB") {
  TempDir tmp("ge_grid");
  const Png png = save_and_load(Tensor::from_floats({0, 1, 2, 3, 4, 5, 6, 7}, {2, 1, 2, 2}, DType::F32), tmp);
  REQUIRE(png.channels() == 3);
  REQUIRE(png.width() == 2 * 4 + 2);
  for (int64_t c = 0; c < 3; ++c) {
    CHECK(png.at(c, 2, 2) == 0);                         // value 0: the min
    CHECK(png.at(c, 3, 6 + 1) == 255);                   // value 7: the max, image 1 at (2, 6)
    CHECK(png.at(c, 2, 6) == expected_u8(4.0f / 7.0f));  // value 4
  }
}

TEST_CASE("image grid: u8 rounding follows PyTorch's per-op rounding for half batches") {
  TempDir tmp("ge_grid");
  // 0.00196075439453125 is an f16 value; with min 0 and max 1, save_image computes in f16
  // v * 255 -> 0.5 (rounded to half), + 0.5 -> 1.0, giving u8 1, where float arithmetic
  // would give 0.999... -> 0.
  const std::vector<float> v = {0.0f, 1.0f, 0.00196075439453125f, 0.0f};
  CHECK(save_and_load(Tensor::from_floats(v, {1, 1, 2, 2}, DType::F16), tmp).at(0, 1, 0) == 1);
  CHECK(save_and_load(Tensor::from_floats(v, {1, 1, 2, 2}, DType::F32), tmp).at(0, 1, 0) == 0);
}

// torchvision.utils.save_image(normalize=True) itself (tools/make_goldens.py, golden_grid): random
// batches of 11 RGB images (two rows, the second partial), 3 grey ones and 10 in half precision,
// every pixel of the PNG.
TEST_CASE("image grid: every pixel is torchvision's save_image") {
  TempDir tmp("ge_grid");
  const SafeTensorsFile& g = test::golden("golden_grid.safetensors");
  for (const char* name : {"rgb_f32", "grey_f32", "rgb_f16"}) {
    CAPTURE(name);
    const Tensor& images = test::golden_tensor(g, std::string(name) + ".images");
    const Tensor& pixels = test::golden_tensor(g, std::string(name) + ".pixels");  // (H, W, 3)
    const Png png = save_and_load(images, tmp);
    REQUIRE(png.channels() == 3);
    REQUIRE(png.height() == pixels.dim(0));
    REQUIRE(png.width() == pixels.dim(1));
    const std::vector<double> want = pixels.to_doubles();
    int64_t wrong = 0;
    for (int64_t y = 0; y < png.height(); ++y)
      for (int64_t x = 0; x < png.width(); ++x)
        for (int64_t c = 0; c < 3; ++c)
          wrong += png.at(c, y, x) != static_cast<int>(want[(y * png.width() + x) * 3 + c]);
    CHECK(wrong == 0);
  }
}

TEST_CASE("image grid: a GPU batch divides by the float reciprocal as PyTorch's CUDA kernel does") {
  GE_REQUIRE_GPU();
  TempDir tmp("ge_grid");
  // Range 3: 0.9f / 3 gives u8 76, 0.9f * (1 / 3.0f) gives 77.
  const std::vector<float> v = {0.0f, 3.0f, 0.9f, 0.0f};
  CHECK(save_and_load(Tensor::from_floats(v, {1, 1, 2, 2}, DType::F32), tmp).at(0, 1, 0) == 76);
  CHECK(save_and_load(Tensor::from_floats(v, {1, 1, 2, 2}, DType::F32, Device::cuda()), tmp).at(0, 1, 0) == 77);
}

TEST_CASE("image grid: PNG round trip and clear errors") {
  TempDir tmp("ge_grid");
  const Png png = save_and_load(test::random_tensor({4, 3, 8, 8}, DType::BF16), tmp);
  CHECK(png.t.dtype() == DType::U8);
  CHECK(png.t.shape() == Shape{1, 3, 12, 4 * 10 + 2});
  // Loading the file again gives the same pixels.
  const Tensor again = load_png_as_tensor(tmp.file("grid.png"));
  CHECK(std::memcmp(again.data(), png.t.data(), png.t.nbytes()) == 0);
  CHECK(tmp.entries() == std::vector<std::string>{"grid.png"});

  const std::string missing = tmp.file("missing.png");
  CHECK_THROWS_WITH_AS(load_png_as_tensor(missing), Contains(missing.c_str()), Error);
  const std::string corrupt = tmp.file("corrupt.png");
  ge::test::write_file_bytes(corrupt, "\x89PNG\r\n\x1a\n but then nothing sensible");
  CHECK_THROWS_WITH_AS(load_png_as_tensor(corrupt), Contains(corrupt.c_str()), Error);

  CHECK_THROWS_WITH_AS(save_image_grid(test::random_tensor({2, 2, 4, 4}, DType::F32), tmp.file("x.png")),
                       Contains("channels"), Error);
  CHECK_THROWS_AS(save_image_grid(Tensor::zeros({2, 3, 4, 4}, DType::U8), tmp.file("x.png")), Error);
  CHECK_THROWS_WITH_AS(save_image_grid(test::random_tensor({2, 3, 4, 4}, DType::F32), tmp.file("nodir/x.png")),
                       Contains("does the directory exist"), Error);
}
