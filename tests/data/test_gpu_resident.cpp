// The GPU-resident batch source against the host Loader: the same images in the same order,
// and bitwise the Loader's f32 batch (after ops::cast to the output dtype and layout), for
// image shapes that take each of the kernel's paths (16-, 4- and 1-byte rows; 4- and 1-pixel
// plane groups; trivial channel or pixel axes) and batch sizes that leave a partial last batch.
// Also the shared epoch_order, the CPU-side refusals, re-uploads at epoch changes, a poisoned
// output block, no cudaMalloc in steady state, and progress reporting.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <numeric>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "data/gpu_resident.h"
#include "ganengine/allocator.h"
#include "ganengine/batch_source.h"
#include "ganengine/data.h"
#include "ganengine/error.h"
#include "ganengine/ops.h"
#include "support/test_util.h"

using namespace ge;
using doctest::Contains;
using test::same_bytes;

namespace {

const Device kGpu = Device::cuda(0);
constexpr DType kDTypes[] = {DType::F32, DType::F16, DType::BF16};
constexpr MemoryFormat kFormats[] = {MemoryFormat::NCHW, MemoryFormat::NHWC};

// Image i of a 1x1 dataset is one pixel whose channel c holds byte (i + 85 c) mod 256: every
// byte value in every channel.
class EveryByteDataset : public Dataset {
 public:
  explicit EveryByteDataset(int channels) : channels_(channels) {}
  int64_t size() const override { return 256; }
  int channels() const override { return channels_; }
  int image_size() const override { return 1; }
  void read(int64_t index, uint8_t* hwc_out) const override {
    for (int c = 0; c < channels_; ++c) hwc_out[c] = static_cast<uint8_t>((index + 85 * c) % 256);
  }
  std::string name() const override { return "every-byte"; }

 private:
  int channels_;
};

// FakeDataset images that take their time (or fail), for progress and error reporting.
class SlowDataset : public Dataset {
 public:
  SlowDataset(int64_t size, int millis_per_image, int64_t failing_index = -1)
      : fake_(size, 4, 3, 5), millis_(millis_per_image), failing_(failing_index) {}
  int64_t size() const override { return fake_.size(); }
  int channels() const override { return 3; }
  int image_size() const override { return 4; }
  void read(int64_t index, uint8_t* hwc_out) const override {
    if (index == failing_) fail("slow dataset: image ", index, " is unreadable");
    std::this_thread::sleep_for(std::chrono::milliseconds(millis_));
    fake_.read(index, hwc_out);
  }
  std::string name() const override { return "slow"; }

 private:
  FakeDataset fake_;
  int millis_;
  int64_t failing_;
};

struct Case {
  int64_t size;
  int image_size;
  int channels;
  int64_t batch_size;
};

// Row bytes S*S*C: 768 and 256 take 16-byte loads, 12 and 36 4-byte loads, 75 and 49 single
// bytes; planes of 256, 16 and 4 pixels take 4-pixel groups in NCHW, 25 single pixels.
// Every batch size leaves a smaller last batch.
const Case kCases[] = {
    {37, 16, 3, 16}, {37, 16, 1, 10}, {300, 4, 3, 64}, {23, 5, 3, 4}, {19, 7, 1, 5}, {41, 2, 3, 8}, {29, 6, 1, 6},
};

std::string case_name(const Case& c) {
  return std::to_string(c.size) + " images " + std::to_string(c.image_size) + "x" + std::to_string(c.image_size) + "x" +
         std::to_string(c.channels) + " batch " + std::to_string(c.batch_size);
}

// (epoch, index) pairs that jump between epochs (each change re-uploads the order) and
// include the last, partial batch.
std::vector<std::pair<int64_t, int64_t>> visits(int64_t batches) {
  const int64_t last = batches - 1;
  return {{0, 0}, {0, last}, {1, std::min<int64_t>(1, last)}, {0, 1 % batches}, {2, last}, {1, 0}, {1, last}, {0, 0}};
}

bool all_finite(const Tensor& t) {
  const std::vector<double> v = t.to_doubles();
  return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

// The GPU source's batches against the Loader's, cast on the host, at every visit.
void check_against_loader(const Dataset& ds, int64_t batch_size, DType dtype, MemoryFormat format) {
  constexpr uint64_t seed = 1234;
  Loader loader(ds, batch_size, seed, 1);
  GpuResidentSource source(ds, batch_size, seed, 3, kGpu, dtype, format, nullptr);
  REQUIRE(source.batches_per_epoch() == loader.batches_per_epoch());
  for (const auto& visit : visits(loader.batches_per_epoch())) {
    const int64_t epoch = visit.first;
    const int64_t index = visit.second;
    CAPTURE(epoch);
    CAPTURE(index);
    const Tensor got = source.batch(epoch, index);
    CHECK(got.device() == kGpu);
    CHECK(got.dtype() == dtype);
    CHECK(got.format() == format);
    const Tensor expected = ops::converted(loader.batch(epoch, index), dtype, format, Device::cpu());
    CHECK(all_finite(got));
    CHECK(same_bytes(got, expected));
  }
}

}  // namespace

TEST_CASE("epoch_order: equals Loader order and is a permutation") {
  for (const int64_t size : std::vector<int64_t>{1, 2, 37, 1000}) {
    CAPTURE(size);
    const FakeDataset ds(size, 2, 1, 3);
    std::vector<int64_t> identity(static_cast<size_t>(size));
    std::iota(identity.begin(), identity.end(), 0);
    for (const uint64_t seed : std::vector<uint64_t>{0, 7, 0x123456789abcdefull}) {
      const Loader loader(ds, 16, seed, 1);
      for (const int64_t epoch : std::vector<int64_t>{0, 1, 5, int64_t(UINT32_MAX)}) {
        const std::vector<int64_t> order = epoch_order(size, seed, epoch);
        CHECK(order == loader.order(epoch));
        std::vector<int64_t> sorted = order;
        std::sort(sorted.begin(), sorted.end());
        CHECK(sorted == identity);
      }
    }
  }
  CHECK(epoch_order(0, 1, 0).empty());
  CHECK(epoch_order(1000, 7, 0) != epoch_order(1000, 7, 1));
  CHECK_THROWS_AS(epoch_order(10, 1, -1), Error);
  CHECK_THROWS_AS(epoch_order(10, 1, int64_t(UINT32_MAX) + 1), Error);
}

TEST_CASE("Loader: is a BatchSource and describes itself") {
  const FakeDataset ds(37, 4, 3, 2);
  std::unique_ptr<BatchSource> source = std::make_unique<Loader>(ds, 16, 9, 2);
  CHECK(source->batches_per_epoch() == 3);
  CHECK(source->batch(0, 2).shape() == Shape{5, 3, 4, 4});
  CHECK_MESSAGE(source->describe().find("host loader: 2 worker threads") == 0, source->describe());
}

TEST_CASE("GpuResidentSource: a CPU device or CPU-only build is refused clearly") {
  const FakeDataset ds(37, 16, 3, 1);
  CHECK(GpuResidentSource::bytes_needed(ds) == 37 * 16 * 16 * 3);
  CHECK(GpuResidentSource::bytes_needed(FakeDataset(50000, 64, 3, 1)) == int64_t(50000) * 64 * 64 * 3);
  // A CUDA build names the device, a CPU-only build the missing CUDA: both start the same way.
  CHECK_THROWS_WITH_AS(GpuResidentSource(ds, 16, 1, 1, Device::cpu(), DType::F32, MemoryFormat::NCHW, nullptr),
                       Contains("GPU-resident data needs a CUDA"), Error);
  if (!built_with_cuda())
    CHECK_THROWS_WITH_AS(GpuResidentSource(ds, 16, 1, 1, kGpu, DType::F32, MemoryFormat::NCHW, nullptr),
                         Contains("GPU-resident data needs a CUDA build"), Error);
}

TEST_CASE("GpuResidentSource: bad arguments are refused") {
  GE_REQUIRE_GPU();
  const FakeDataset ds(37, 4, 3, 1);
  CHECK_THROWS_AS(GpuResidentSource(ds, 0, 1, 1, kGpu, DType::F32, MemoryFormat::NCHW, nullptr), Error);
  CHECK_THROWS_AS(GpuResidentSource(ds, 16, 1, -1, kGpu, DType::F32, MemoryFormat::NCHW, nullptr), Error);
  CHECK_THROWS_WITH_AS(GpuResidentSource(ds, 16, 1, 1, kGpu, DType::U8, MemoryFormat::NCHW, nullptr),
                       Contains("f32, f16 or bf16"), Error);
  GpuResidentSource source(ds, 16, 1, 1, kGpu, DType::F32, MemoryFormat::NCHW, nullptr);
  CHECK_THROWS_AS(source.batch(0, 3), Error);
  CHECK_THROWS_AS(source.batch(0, -1), Error);
  CHECK_THROWS_AS(source.batch(-1, 0), Error);
  // A read error on a worker thread reaches the caller, naming the image.
  const SlowDataset failing(40, 0, 17);
  CHECK_THROWS_WITH_AS(GpuResidentSource(failing, 8, 1, 4, kGpu, DType::F32, MemoryFormat::NCHW, nullptr),
                       Contains("image 17 is unreadable"), Error);
}

TEST_CASE("GpuResidentSource: f32 NCHW batches equal the host Loader batches bitwise") {
  GE_REQUIRE_GPU();
  for (const Case& c : kCases) {
    INFO(case_name(c));
    const FakeDataset ds(c.size, c.image_size, c.channels, 77);
    check_against_loader(ds, c.batch_size, DType::F32, MemoryFormat::NCHW);
  }
}

TEST_CASE("GpuResidentSource: f16 bf16 and NHWC batches equal ops::cast of the host batch bitwise") {
  GE_REQUIRE_GPU();
  for (const Case& c : kCases) {
    const FakeDataset ds(c.size, c.image_size, c.channels, 78);
    for (const DType dtype : kDTypes)
      for (const MemoryFormat format : kFormats) {
        if (dtype == DType::F32 && format == MemoryFormat::NCHW) continue;  // the case above
        INFO(case_name(c), " ", dtype_name(dtype), " ", format_name(format));
        check_against_loader(ds, c.batch_size, dtype, format);
      }
  }
}

TEST_CASE("GpuResidentSource: every byte value normalises exactly as on the host") {
  GE_REQUIRE_GPU();
  for (const int channels : {1, 3}) {
    const EveryByteDataset ds(channels);
    for (const DType dtype : kDTypes)
      for (const MemoryFormat format : kFormats) {
        INFO(channels, " channels ", dtype_name(dtype), " ", format_name(format));
        check_against_loader(ds, 100, dtype, format);  // 100, 100, 56
      }
  }
}

TEST_CASE("GpuResidentSource: epoch changes re-upload the order") {
  GE_REQUIRE_GPU();
  const FakeDataset ds(64, 4, 3, 5);
  GpuResidentSource source(ds, 64, 31, 2, kGpu, DType::F32, MemoryFormat::NHWC, nullptr);
  REQUIRE(source.batches_per_epoch() == 1);
  // One batch is the whole epoch: only the order tells epochs apart.
  const Tensor e0 = source.batch(0, 0);
  const Tensor e1 = source.batch(1, 0);  // enqueued while e0's kernel may still run
  const Tensor e0_again = source.batch(0, 0);
  const Tensor e7 = source.batch(7, 0);
  CHECK(!same_bytes(e1, e0.to(Device::cpu())));
  CHECK(same_bytes(e0_again, e0.to(Device::cpu())));
  Loader loader(ds, 64, 31, 1);
  for (const auto& visit : std::vector<std::pair<int64_t, Tensor>>{{0, e0}, {1, e1}, {7, e7}}) {
    const int64_t epoch = visit.first;
    const Tensor& got = visit.second;
    CAPTURE(epoch);
    CHECK(same_bytes(got, ops::converted(loader.batch(epoch, 0), DType::F32, MemoryFormat::NHWC, Device::cpu())));
  }
}

TEST_CASE("GpuResidentSource: the kernel overwrites every element of a poisoned block") {
  GE_REQUIRE_GPU();
  const FakeDataset ds(37, 16, 3, 6);
  Loader loader(ds, 16, 3, 1);
  for (const DType dtype : kDTypes)
    for (const MemoryFormat format : kFormats) {
      INFO(dtype_name(dtype), " ", format_name(format));
      GpuResidentSource source(ds, 16, 3, 1, kGpu, dtype, format, nullptr);
      (void)source.batch(1, 2);  // uploads epoch 1's order: the next call allocates only its output
      // With the cache emptied, the poisoned block is the only free one of the output's size,
      // so the caching allocator hands exactly it to batch().
      cuda_allocator_release_cached(0);
      Tensor bait = Tensor::empty({5, 3, 16, 16}, dtype, kGpu, format);
      test::poison(bait);
      const void* poisoned = bait.data();
      bait = Tensor();
      const Tensor got = source.batch(1, 2);
      CHECK(got.data() == poisoned);
      CHECK(all_finite(got));
      CHECK(same_bytes(got, ops::converted(loader.batch(1, 2), dtype, format, Device::cpu())));
    }
}

TEST_CASE("GpuResidentSource: steady state needs no cudaMalloc and describes itself") {
  GE_REQUIRE_GPU();
  const FakeDataset ds(300, 8, 3, 8);
  GpuResidentSource source(ds, 64, 4, 2, kGpu, DType::F16, MemoryFormat::NHWC, nullptr);
  CHECK_MESSAGE(
      source.describe() == "GPU-resident: 300 images (0.1 MB u8) on cuda:0, f16 NHWC batches built on the device",
      source.describe());
  CHECK(source.device() == kGpu);
  CHECK(source.out_dtype() == DType::F16);
  CHECK(source.out_format() == MemoryFormat::NHWC);
  CHECK(source.batch_size() == 64);
  for (int64_t b = 0; b < source.batches_per_epoch(); ++b) (void)source.batch(0, b);  // warms both sizes
  const size_t mallocs = cuda_allocator_stats(0).cuda_malloc_calls;
  for (int64_t epoch = 1; epoch < 3; ++epoch)
    for (int64_t b = 0; b < source.batches_per_epoch(); ++b) (void)source.batch(epoch, b);
  CHECK(cuda_allocator_stats(0).cuda_malloc_calls == mallocs);
}

TEST_CASE("GpuResidentSource: a slow preparation reports progress and ETA") {
  GE_REQUIRE_GPU();
  const SlowDataset ds(26, 100, -1);  // 2.6 s on one thread: one progress line after 2 s
  std::ostringstream progress;
  const FakeDataset same_images(26, 4, 3, 5);
  GpuResidentSource source(ds, 8, 2, 1, kGpu, DType::F32, MemoryFormat::NCHW, &progress);
  const std::string text = progress.str();
  INFO(text);
  CHECK(text.find("preparing slow on cuda:0: ") == 0);
  CHECK(text.find(" images, ETA 0m0") != std::string::npos);
  CHECK(text.find("preparing slow on cuda:0: 26/26 images, done in 0m0") != std::string::npos);
  // Quick preparations stay silent.
  std::ostringstream quiet;
  GpuResidentSource quick(same_images, 8, 2, 1, kGpu, DType::F32, MemoryFormat::NCHW, &quiet);
  CHECK(quiet.str().empty());
  CHECK(same_bytes(source.batch(0, 3), quick.batch(0, 3).to(Device::cpu())));
}
