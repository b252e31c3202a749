// Shared helpers for the doctest suites.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/backend.h"
#include "ganengine/tensor.h"
#include "support/test_skip.h"
#if GE_WITH_CUDA
#include "cuda/conv/conv_phase_dgrad.h"  // gpu::device_is_sm90
#endif

namespace ge::test {

#if GE_WITH_CUDA
// Sets the GPU's one-launch BatchNorm choice (gpu::set_cluster_batchnorm) for a scope.
struct ClusterChoice {
  explicit ClusterChoice(gpu::ClusterBatchNorm c) { gpu::set_cluster_batchnorm(c); }
  ~ClusterChoice() { gpu::set_cluster_batchnorm(gpu::ClusterBatchNorm::Auto); }
};
#endif

// GPU cases call this first (support/test_skip.h: a skip must come before any assertion).
#define GE_REQUIRE_GPU()                                                                         \
  do {                                                                                           \
    if (!::ge::cuda_available()) GE_SKIP_TEST("no CUDA device present (or built without CUDA)"); \
  } while (0)

// Multi-GPU cases: skipped on machines with fewer GPUs.
#define GE_REQUIRE_GPUS(n)                                                  \
  do {                                                                      \
    if (::ge::cuda_device_count() < (n))                                    \
      GE_SKIP_TEST("needs " + std::to_string(n) + " CUDA devices, found " + \
                   std::to_string(::ge::cuda_device_count()));              \
  } while (0)

#if GE_WITH_CUDA
// Cases of the sm_90a warpgroup-MMA kernels (kernels/cuda/conv/sm90a/), which run on compute
// capability 9.0 only: skipped on another GPU.
#define GE_REQUIRE_SM90()                                                                                            \
  do {                                                                                                               \
    if (!::ge::gpu::device_is_sm90(0)) GE_SKIP_TEST("the warpgroup-MMA kernels run on compute capability 9.0 only"); \
  } while (0)
#endif

// Fresh random values for every run unless GE_TEST_SEED is set; printed on failure.
std::mt19937_64& rng();
std::vector<double> random_values(int64_t n, double lo = -1.0, double hi = 1.0);
Tensor random_tensor(const Shape& shape, DType dtype, Device device = Device::cpu(),
                     MemoryFormat format = MemoryFormat::NCHW, double lo = -1.0, double hi = 1.0);

// ||a - b|| / ||b|| over logical values; NaN anywhere gives +inf (never passes).
double rel_error(const std::vector<double>& a, const std::vector<double>& b);
double rel_error(const Tensor& a, const Tensor& b);
double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b);

// Same shape, dtype and memory format, and the same bytes (on any devices): bitwise equality,
// NaNs included.
bool same_bytes(const Tensor& a, const Tensor& b);
// Equal values with equal signs, or NaN in both: the bitwise check for half-precision results,
// whose NaN bits the backends do not share (ops.h).
bool same_values_or_both_nan(const Tensor& a, const Tensor& b);
// An f32 (1) tensor holding v: a scale, scale_inv or amax.
Tensor f32_scalar(float v, Device device = Device::cpu());
// Count, mean and (population) variance of each channel of t (any device and layout), in double,
// two passes.
struct ChannelStats {
  std::vector<double> count, mean, var;
};
ChannelStats exact_channel_stats(const Tensor& t);

// Fills a tensor with NaN (floating) or 0xAB bytes, so an element an op forgot to write fails.
void poison(Tensor& t);
// A new tensor of like's shape, dtype and memory format on `device`, poisoned.
Tensor poisoned_like(const Tensor& like, Device device);

// Tolerance relative to the tensor norm for results computed in dtype.
double tolerance_for(DType t);

std::string data_path(const std::string& name);  // tests/goldens/<name> ($GE_TEST_DATA_DIR overrides)
std::string ganengine_binary();                  // the built CLI ($GE_BINARY overrides)

}  // namespace ge::test
