// PNG image grids, pixel for pixel what the reference writes with
// torchvision.utils.save_image(images, path, normalize=True): real_samples.png,
// fake_samples_epoch_%03d.png and the output of `ganengine generate`.
#pragma once
#include <string>

#include "ganengine/tensor.h"

namespace ge {

// images: (N, C, H, W) floating (f32, f16, bf16, f64), any device and memory format; C is 1
// (written as grey RGB, as torchvision repeats the channel), 3 (RGB) or 4 (RGBA).
// The values are min-max normalised over the whole batch, laid out nrow to a row with padding
// black pixels around and between the images (a single image is written alone, unpadded), and
// rounded to u8 as save_image does (x * 255 + 0.5, clamped to [0, 255], truncated). The
// arithmetic rounds like PyTorch's on the tensor's device and dtype, so even the last bit of
// a half-precision batch agrees. A path ending in .jpg or .jpeg gets a JPEG (quality 95), as
// save_image picks the format by extension; any other a PNG. The file is written atomically
// (src/io/atomic_file.h).
void save_image_grid(const Tensor& images, const std::string& path, int nrow = 8, int padding = 2);

// One image (1, C, H, W) with values in [-1, 1] (the generator's Tanh range), written as it is:
// no min-max stretching, so images generated one by one stay comparable.
void save_image(const Tensor& image, const std::string& path);

// Reads a PNG (or any format stb_image knows) as a u8 CPU tensor (1, C, H, W), C being the
// file's own channel count. Throws ge::Error naming the file when it is missing or corrupt.
Tensor load_png_as_tensor(const std::string& path);

}  // namespace ge
