// Datasets and the Loader: FakeDataset's determinism, the per-epoch shuffle (a permutation,
// a pure function of (seed, epoch)), batch sizes, ToTensor + Normalize values, worker-count
// independence, prefetch correctness, and open_dataset's messages.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <set>

#include "ganengine/data.h"
#include "ganengine/error.h"
#include "support/test_util.h"

using namespace ge;
using doctest::Contains;
using test::same_bytes;

namespace {

std::vector<uint8_t> read_image(const Dataset& ds, int64_t index) {
  std::vector<uint8_t> hwc(static_cast<size_t>(ds.image_size()) * ds.image_size() * ds.channels());
  ds.read(index, hwc.data());
  return hwc;
}

float normalised(uint8_t v) { return (static_cast<float>(v) / 255.0f - 0.5f) / 0.5f; }

// Image i is filled with the byte (i * 37 + position) mod 256: every byte value occurs.
class PatternDataset : public Dataset {
 public:
  int64_t size() const override { return 10; }
  int channels() const override { return 3; }
  int image_size() const override { return 16; }
  void read(int64_t index, uint8_t* hwc_out) const override {
    for (int p = 0; p < 16 * 16 * 3; ++p) hwc_out[p] = static_cast<uint8_t>((index * 37 + p) % 256);
  }
  std::string name() const override { return "pattern"; }
};

// PatternDataset whose images `bad_a` and `bad_b` cannot be read.
class TwoBadImagesDataset : public PatternDataset {
 public:
  TwoBadImagesDataset(int64_t bad_a, int64_t bad_b) : bad_a_(bad_a), bad_b_(bad_b) {}
  void read(int64_t index, uint8_t* hwc_out) const override {
    if (index == bad_a_ || index == bad_b_) fail("image ", index, " is damaged");
    PatternDataset::read(index, hwc_out);
  }

 private:
  int64_t bad_a_, bad_b_;
};

}  // namespace

TEST_CASE("FakeDataset: image i depends only on (seed i)") {
  const FakeDataset ds(1000, 8, 3, 42);
  CHECK(ds.size() == 1000);
  CHECK(ds.image_size() == 8);
  CHECK(ds.channels() == 3);
  CHECK(ds.name() == "fake");

  const auto a5 = read_image(ds, 5);
  const auto a7 = read_image(ds, 7);
  const FakeDataset again(1000, 8, 3, 42);
  CHECK(read_image(again, 7) == a7);  // read in the other order, by another instance
  CHECK(read_image(again, 5) == a5);
  CHECK(read_image(ds, 5) == a5);
  CHECK(a5 != a7);
  CHECK(read_image(FakeDataset(1000, 8, 3, 43), 5) != a5);

  // Bytes look uniform: both ends of the range occur and the mean is near 127.5.
  std::vector<uint8_t> all;
  for (int64_t i = 0; i < 50; ++i) {
    const auto img = read_image(ds, i);
    all.insert(all.end(), img.begin(), img.end());
  }
  CHECK(*std::min_element(all.begin(), all.end()) == 0);
  CHECK(*std::max_element(all.begin(), all.end()) == 255);
  const double mean = std::accumulate(all.begin(), all.end(), 0.0) / all.size();
  CHECK(mean == doctest::Approx(127.5).epsilon(0.02));

  CHECK_THROWS_AS(FakeDataset(1000, 0, 3, 1), Error);
  CHECK_THROWS_AS(read_image(ds, 1000), Error);
}

TEST_CASE("Loader: each epoch is a permutation a pure function of (seed epoch)") {
  const FakeDataset ds(1000, 4, 3, 1);
  const Loader loader(ds, 64, 7, 1);
  std::vector<int64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), 0);

  const auto e0 = loader.order(0), e1 = loader.order(1);
  for (const auto& order : {e0, e1}) {
    auto sorted = order;
    std::sort(sorted.begin(), sorted.end());
    CHECK(sorted == identity);  // every index exactly once
  }
  CHECK(e0 != identity);
  CHECK(e0 != e1);
  CHECK(Loader(ds, 64, 7, 1).order(0) == e0);  // same seed, same order: a resumed run matches
  CHECK(Loader(ds, 32, 7, 3).order(1) == e1);  // batch size and workers do not matter
  CHECK(Loader(ds, 64, 8, 1).order(0) != e0);  // another seed, another order
}

TEST_CASE("Loader: batch sizes contents in epoch order and normalisation") {
  const FakeDataset ds(1000, 4, 3, 3);
  Loader loader(ds, 64, 11, 1);
  REQUIRE(loader.batches_per_epoch() == 16);  // drop_last=False: 15 full batches and one of 40

  const auto order = loader.order(2);
  std::multiset<int64_t> seen;
  for (int64_t b = 0; b < 16; ++b) {
    const Tensor batch = loader.batch(2, b);
    const int64_t n = b < 15 ? 64 : 40;
    REQUIRE(batch.shape() == Shape{n, 3, 4, 4});
    CHECK(batch.dtype() == DType::F32);
    CHECK(batch.device().is_cpu());
    CHECK(batch.format() == MemoryFormat::NCHW);
    // Item k is image order[64 b + k], HWC bytes turned into normalised NCHW floats.
    const float* values = batch.data_as<float>();
    for (int64_t k = 0; k < n; ++k) {
      const int64_t index = order[size_t(64 * b + k)];
      seen.insert(index);
      const auto hwc = read_image(ds, index);
      bool match = true;
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t p = 0; p < 16; ++p) match &= values[(k * 3 + c) * 16 + p] == normalised(hwc[size_t(p * 3 + c)]);
      CHECK(match);
    }
  }
  CHECK(seen.size() == 1000);
  CHECK(std::set<int64_t>(seen.begin(), seen.end()).size() == 1000);

  CHECK_THROWS_AS(loader.batch(0, 16), Error);
  CHECK_THROWS_AS(loader.batch(0, -1), Error);
  CHECK_THROWS_AS(Loader(ds, 0, 1, 1), Error);
}

// drop_last (what `bench --dataset` asks for): the same full batches, without the partial one,
// and each epoch's last full batch followed by the next epoch's first.
TEST_CASE("Loader: drop_last serves only the full batches in the same order") {
  const FakeDataset ds(1000, 4, 3, 3);
  Loader all(ds, 64, 11, 2), full(ds, 64, 11, 2);
  full.set_drop_last(true);
  REQUIRE(full.batches_per_epoch() == 15);
  for (int64_t epoch = 0; epoch < 2; ++epoch)
    for (int64_t b = 0; b < 15; ++b) {
      INFO(epoch, " ", b);
      const Tensor mine = full.batch(epoch, b);
      REQUIRE(mine.shape() == Shape{64, 3, 4, 4});
      CHECK(same_bytes(mine, all.batch(epoch, b)));
    }
  CHECK_THROWS_WITH_AS(full.batch(0, 15), doctest::Contains("has 15 batches of 64"), Error);
  Loader too_few(ds, 1024, 11, 1);
  too_few.set_drop_last(true);
  CHECK(too_few.batches_per_epoch() == 0);
}

TEST_CASE("Loader: ToTensor + Normalize(0.5 0.5) computed exactly in float") {
  const PatternDataset ds;
  Loader loader(ds, 10, 5, 1);
  const Tensor batch = loader.batch(0, 0);
  const auto order = loader.order(0);
  const float* values = batch.data_as<float>();
  // Every byte value appears; each maps to exactly (float(u8) / 255.0f - 0.5f) / 0.5f.
  std::set<float> distinct;
  for (int64_t k = 0; k < 10; ++k) {
    const auto hwc = read_image(ds, order[size_t(k)]);
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t p = 0; p < 256; ++p) {
        const float v = values[(k * 3 + c) * 256 + p];
        CHECK(v == normalised(hwc[size_t(p * 3 + c)]));
        distinct.insert(v);
      }
  }
  CHECK(distinct.size() == 256);
  CHECK(normalised(0) == -1.0f);
  CHECK(normalised(255) == 1.0f);
  CHECK(normalised(127) == doctest::Approx(-0.00392157).epsilon(1e-5));
  CHECK(*distinct.begin() == -1.0f);
  CHECK(*distinct.rbegin() == 1.0f);
  CHECK(distinct.count(normalised(127)) == 1);
}

TEST_CASE("Loader: worker threads and prefetch never change a batch") {
  const FakeDataset ds(300, 8, 3, 9);
  Loader reference(ds, 64, 21, 1);
  Loader threaded(ds, 64, 21, 4);
  REQUIRE(reference.batches_per_epoch() == 5);

  // Straight through two epochs: the prefetched batch is the one asked for, across the
  // epoch boundary too.
  std::vector<Tensor> expected;
  for (int64_t e = 0; e < 2; ++e)
    for (int64_t b = 0; b < 5; ++b) {
      expected.push_back(reference.batch(e, b));
      CHECK(same_bytes(threaded.batch(e, b), expected.back()));
    }

  // Jumping around: a fresh Loader (prefetching the wrong batch each time) still agrees.
  Loader jumping(ds, 64, 21, 2);
  for (const auto& [e, b] : std::vector<std::pair<int64_t, int64_t>>{{1, 3}, {0, 4}, {0, 0}, {1, 4}, {0, 1}, {0, 1}})
    CHECK(same_bytes(jumping.batch(e, b), expected[size_t(e * 5 + b)]));
}

// The workers are kept from batch to batch; a batch with two bad images always reports the
// one the lowest worker met, however the workers are scheduled, and the Loader goes on serving.
TEST_CASE("Loader: kept workers report a bad image the same way every time") {
  const PatternDataset good;
  const std::vector<int64_t> order = Loader(good, 10, 3, 1).order(0);
  // Worker w of 4 takes items w, w + 4, ...: items 5 and 2 of the batch go to workers 1 and 2.
  const TwoBadImagesDataset ds(order[5], order[2]);
  Loader loader(ds, 10, 3, 4);
  for (int attempt = 0; attempt < 20; ++attempt) {
    INFO(attempt);
    CHECK_THROWS_WITH_AS(loader.batch(0, 0), ("image " + std::to_string(order[5]) + " is damaged").c_str(), Error);
  }
  Loader healthy(good, 4, 3, 4), single(good, 4, 3, 1);
  for (int64_t b = 0; b < 3; ++b) CHECK(same_bytes(healthy.batch(1, b), single.batch(1, b)));
}

TEST_CASE("open_dataset: fake works and unknown names list what is available") {
  const auto fake = open_dataset("fake", "", 32, "bedroom", 4);
  CHECK(fake->name() == "fake");
  CHECK(fake->size() == 1000);
  CHECK(fake->image_size() == 32);
  CHECK(fake->channels() == 3);
  CHECK(read_image(*fake, 3) == read_image(FakeDataset(1000, 32, 3, 4), 3));

  for (const char* name : {"imagenet", "folder", "lfw"}) {  // real readers: a missing folder says so
    CAPTURE(name);
    CHECK_THROWS_WITH_AS(open_dataset(name, "no-such-data/", 64, "bedroom", 1), Contains("does not exist"), Error);
  }
  CHECK_THROWS_WITH_AS(open_dataset("cifar100", "data/", 64, "", 1),
                       Contains("cifar10 | lsun | mnist | imagenet | folder | lfw | fake"), Error);
  CHECK_THROWS_WITH_AS(open_dataset("cifar100", "data/", 64, "", 1), Contains("cifar100"), Error);
}

TEST_CASE("Loader: pinned batches hold the same values in page-locked memory") {
  const FakeDataset ds(100, 8, 3, 21);
  Loader plain(ds, 16, 5, 2), pinned(ds, 16, 5, 2, /*pinned=*/true);
  for (int64_t i : {0, 3, 6}) {  // 6 is the partial last batch
    const Tensor a = plain.batch(1, i), b = pinned.batch(1, i);
    CHECK_FALSE(a.is_pinned());
    CHECK(b.is_pinned());
    REQUIRE(a.shape() == b.shape());
    CHECK(std::memcmp(a.data(), b.data(), a.nbytes()) == 0);
    if (ge::cuda_available()) {  // and they reach the GPU intact
      const Tensor on_gpu = b.to(ge::Device::cuda(0));
      CHECK(ge::test::rel_error(on_gpu.to_doubles(), a.to_doubles()) == 0);
    }
  }
  CHECK(pinned.describe().find("pinned") != std::string::npos);
}
