// GPU-resident batches, for datasets whose decoded images fit in GPU memory: every image is
// decoded and resized once, kept as u8 on the device, and each batch is gathered, normalised
// and cast there by one kernel. A training step then costs the host one kernel launch (and,
// once per epoch, the upload of that epoch's order), instead of decoding, normalising and
// copying a float batch.
//
// The values are bitwise those of the host Loader followed by ops::cast to the output dtype:
// (float(u8) / 255.0f - 0.5f) / 0.5f in fp32, rounded once to f32, f16 or bf16.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>

#include "ganengine/batch_source.h"
#include "ganengine/tensor.h"

namespace ge {

class Dataset;

class GpuResidentSource : public BatchSource {
 public:
  // Reads all of ds with `workers` threads (0 or 1: one), uploads it to `device` and from then
  // on serves (n, C, S, S) batches in out_dtype (f32, f16, bf16) laid out in out_format.
  // A preparation taking more than ~2 s reports progress and ETA to `progress` (null: silent).
  // Throws ge::Error for a CPU device, a CPU-only build, or too little GPU memory.
  GpuResidentSource(const Dataset& ds, int64_t batch_size, uint64_t seed, int workers, Device device, DType out_dtype,
                    MemoryFormat out_format, std::ostream* progress = &default_progress());
  ~GpuResidentSource() override;
  GpuResidentSource(const GpuResidentSource&) = delete;
  GpuResidentSource& operator=(const GpuResidentSource&) = delete;

  // Device bytes the resident copy takes: size * S * S * C (for the caller's auto decision).
  static int64_t bytes_needed(const Dataset& ds);

  int64_t batches_per_epoch() const override;  // as the Loader's (BatchSource::set_drop_last)
  // Batch `index` of epoch `epoch`: the images epoch_order(size, seed, epoch) puts there, as a
  // fresh device tensor written by one kernel on the device's context stream. No host sync:
  // the first batch of a new epoch enqueues that epoch's order upload before the kernel.
  Tensor batch(int64_t epoch, int64_t index) override;
  std::string describe() const override;

  int64_t batch_size() const { return batch_size_; }
  Device device() const { return device_; }
  DType out_dtype() const { return out_dtype_; }
  MemoryFormat out_format() const { return out_format_; }

 private:
  static std::ostream& default_progress();  // std::cerr, without <iostream> in this header
  struct OrderStaging;                      // pinned host copy of an epoch's order (CUDA builds)

  std::string name_;
  int64_t size_;
  int channels_;
  int image_size_;
  int64_t batch_size_;
  uint64_t seed_;
  Device device_;
  DType out_dtype_;
  MemoryFormat out_format_;

  Tensor images_;             // u8 (N, C, S, S) NHWC on device_: image i's HWC bytes, contiguous
  Tensor order_;              // i64 (N) on device_: epoch_order(N, seed, order_epoch_)
  int64_t order_epoch_ = -1;  // -1: nothing uploaded yet (or an upload failed midway)
  std::unique_ptr<OrderStaging> staging_;
};

}  // namespace ge
