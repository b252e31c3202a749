// Logged steps whose records are still on their way from the device (async_readback.h), handed
// to a callback in step order once they have landed. `train` queues a logged step's copy right
// behind the step and goes on queueing steps; only when kDepth copies are in flight does it wait
// for the oldest. The log lags the device by a few steps instead of stalling it at every one.
#pragma once
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "ganengine/trainer.h"
#include "runtime/async_readback.h"

namespace ge {

struct PendingLog {
  int64_t step = 0, epoch = 0, iteration = 0;
  int64_t images = 0;  // images trained on in this run up to and including the step
};

class PendingLogs {
 public:
  using Handler = std::function<void(const PendingLog&, const StepRecord&)>;
  PendingLogs(const DcganTrainer& trainer, Handler on_record);
  // Queues the copy of the trainer's latest record, then hands over every record that has landed.
  void push(int64_t step, int64_t epoch, int64_t iteration, int64_t images);
  // Waits for every queued record and hands them over.
  void drain();

 private:
  static constexpr size_t kDepth = 4;
  void hand_over_oldest();  // waits for it if need be
  const DcganTrainer& trainer_;
  Handler on_record_;
  std::vector<std::unique_ptr<AsyncReadback>> slots_;  // used in turn, so freed in turn
  size_t next_slot_ = 0;
  std::deque<std::pair<PendingLog, AsyncReadback*>> queue_;
};

}  // namespace ge
