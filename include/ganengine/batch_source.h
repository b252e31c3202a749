// Where training batches come from. The host Loader (data.h) decodes on worker threads and
// hands out f32 CPU batches; the GPU-resident source (gpu_resident.h) keeps a whole decoded
// dataset on the device and assembles each batch there. Both serve the same images in the same
// per-epoch order for a given seed, so the choice never changes what a run trains on.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ganengine/tensor.h"

namespace ge {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // ceil(size / batch size), or with drop_last floor: the DataLoader's drop_last=True, which
  // `bench --dataset` sets so that every step has one shape (and the host loader's prefetch
  // after an epoch's last full batch is the next epoch's first).
  virtual int64_t batches_per_epoch() const = 0;
  void set_drop_last(bool drop) { drop_last_ = drop; }
  // Batch `index` of epoch `epoch`: (n, C, S, S) with values (float(u8) / 255 - 0.5) / 0.5,
  // n = batch size except perhaps for the last batch (never with drop_last). The dtype, layout
  // and device are the source's (see describe()); the trainer converts whatever it gets.
  virtual Tensor batch(int64_t epoch, int64_t index) = 0;
  virtual std::string describe() const = 0;  // one line for the console

 protected:
  int64_t batches_of(int64_t images, int64_t batch_size) const {
    return drop_last_ ? images / batch_size : (images + batch_size - 1) / batch_size;
  }

 private:
  bool drop_last_ = false;
};

// The per-epoch permutation of 0..size-1 both sources use: a pure function of (seed, epoch),
// so a resumed run sees the batches an uninterrupted one would have.
std::vector<int64_t> epoch_order(int64_t size, uint64_t seed, int64_t epoch);

}  // namespace ge
