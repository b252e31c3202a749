#include "train/pending_logs.h"

namespace ge {

PendingLogs::PendingLogs(const DcganTrainer& trainer, Handler on_record)
    : trainer_(trainer), on_record_(std::move(on_record)) {
  for (size_t k = 0; k < kDepth; ++k)
    slots_.push_back(std::make_unique<AsyncReadback>(DcganTrainer::kRecordValues * sizeof(float)));
}

void PendingLogs::push(int64_t step, int64_t epoch, int64_t iteration, int64_t images) {
  if (queue_.size() == kDepth) hand_over_oldest();
  AsyncReadback* slot = slots_[next_slot_].get();
  next_slot_ = (next_slot_ + 1) % kDepth;
  slot->start(trainer_.record_tensor());
  queue_.emplace_back(PendingLog{step, epoch, iteration, images}, slot);
  while (!queue_.empty() && queue_.front().second->ready()) hand_over_oldest();
}

void PendingLogs::drain() {
  while (!queue_.empty()) hand_over_oldest();
}

void PendingLogs::hand_over_oldest() {
  const auto [at, slot] = queue_.front();
  queue_.pop_front();
  const StepRecord r = DcganTrainer::decode_record(static_cast<const float*>(slot->take()));
  on_record_(at, r);
}

}  // namespace ge
