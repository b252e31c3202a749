// FakeDataset: random images drawn from Philox, so that training runs (and tests) need no files.
#include <cmath>

#include "ganengine/data.h"
#include "ganengine/error.h"
#include "ganengine/ops.h"

namespace ge {

FakeDataset::FakeDataset(int64_t size, int image_size, int channels, uint64_t seed)
    : size_(size), image_size_(image_size), channels_(channels), seed_(seed) {
  if (size < 0) fail("fake dataset: expected a size >= 0, got ", size);
  if (image_size < 1) fail("fake dataset: expected --imageSize >= 1, got ", image_size);
  if (channels < 1) fail("fake dataset: expected at least one channel, got ", channels);
  // Each image owns the counters [i << 32, (i + 1) << 32) of the stream; one image must fit.
  const int64_t bytes = int64_t(image_size) * image_size * channels;
  if (ops::philox_counters_for(bytes) > (uint64_t(1) << 32))
    fail("fake dataset: a ", image_size, " x ", image_size, " x ", channels, " image is too large");
}

void FakeDataset::read(int64_t index, uint8_t* hwc_out) const {
  GE_CHECK(index >= 0 && index < size_, "fake dataset: index ", index, " out of range [0, ", size_, ")");
  const int64_t bytes = int64_t(image_size_) * image_size_ * channels_;
  Tensor uniforms = Tensor::empty({bytes}, DType::F32);
  ops::fill_uniform(uniforms, seed_, static_cast<uint64_t>(index) << 32);
  const float* u = uniforms.data_as<float>();
  // u < 1, and u * 256 is exact (a power of two), so every byte value is equally likely.
  for (int64_t i = 0; i < bytes; ++i) hwc_out[i] = static_cast<uint8_t>(std::floor(u[i] * 256.0f));
}

}  // namespace ge
