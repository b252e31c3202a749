// The per-epoch shuffle shared by every BatchSource: Fisher-Yates driven by a Philox stream
// keyed by (seed, epoch), so the order is a pure function of those two numbers.
#include <cstdint>
#include <utility>
#include <vector>

#include "core/philox.h"
#include "ganengine/batch_source.h"
#include "ganengine/error.h"

namespace ge {
namespace {

// 64-bit words from Philox under key = seed. The epoch and a tag sit in the counter's high
// words, which the engine's other streams (block_at: noise, fake images) keep at zero, so
// the shuffle never reuses numbers drawn elsewhere from the same seed.
class ShuffleStream {
 public:
  ShuffleStream(uint64_t seed, int64_t epoch) : seed_(seed), epoch_(static_cast<uint32_t>(epoch)) {}

  uint64_t next64() {
    if (word_ == 4) {
      const philox::Block counter{{static_cast<uint32_t>(block_), static_cast<uint32_t>(block_ >> 32), epoch_, kTag}};
      current_ = philox::philox4x32_10(counter, static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32));
      ++block_;
      word_ = 0;
    }
    const uint64_t hi = current_.w[word_], lo = current_.w[word_ + 1];
    word_ += 2;
    return (hi << 32) | lo;
  }

  // Uniform in [0, bound) without modulo bias: draws from the top, incomplete run of
  // 2^64 mod bound values are rejected and redrawn.
  uint64_t below(uint64_t bound) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    for (;;) {
      const uint64_t x = next64();
      if (x < limit) return x % bound;
    }
  }

 private:
  static constexpr uint32_t kTag = 0x53687566u;  // "Shuf"
  uint64_t seed_;
  uint32_t epoch_;
  uint64_t block_ = 0;
  int word_ = 4;
  philox::Block current_{};
};

}  // namespace

std::vector<int64_t> epoch_order(int64_t size, uint64_t seed, int64_t epoch) {
  // The epoch is one 32-bit counter word: a larger one would silently repeat an order.
  GE_CHECK(epoch >= 0 && epoch <= int64_t(UINT32_MAX), "epoch ", epoch, " out of range");
  GE_CHECK(size >= 0, "epoch_order: negative dataset size ", size);
  std::vector<int64_t> perm(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) perm[size_t(i)] = i;
  ShuffleStream stream(seed, epoch);
  for (int64_t i = size - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(stream.below(static_cast<uint64_t>(i) + 1));
    std::swap(perm[size_t(i)], perm[size_t(j)]);
  }
  return perm;
}

}  // namespace ge
