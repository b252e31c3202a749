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
  virtual int64_t batches_per_epoch() const = 0;
  // Batch `index` of epoch `epoch`: (n, C, S, S) with values (float(u8) / 255 - 0.5) / 0.5,
  // n = batch size except perhaps for the last batch. The dtype, layout and device are the
  // source's (see describe()); the trainer converts whatever it gets.
  virtual Tensor batch(int64_t epoch, int64_t index) = 0;
  virtual std::string describe() const = 0;  // one line for the console
};

// The per-epoch permutation of 0..size-1 both sources use: a pure function of (seed, epoch),
// so a resumed run sees the batches an uninterrupted one would have.
std::vector<int64_t> epoch_order(int64_t size, uint64_t seed, int64_t epoch);

}  // namespace ge
