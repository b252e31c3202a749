// A logged step as `train` writes it: one metrics.jsonl record and the same values as TensorBoard
// scalars. Both come from here so that they cannot drift apart; tools/check_tensorboard.py holds
// the tag -> metrics.jsonl key table it checks them with.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ganengine/trainer.h"

namespace ge {

struct LoggedStep {
  int64_t step = 0, epoch = 0, iteration = 0;
  StepRecord record;
  double images_per_s = 0;  // rounded to 0.1, as metrics.jsonl shows it
  double wall_time = 0;     // seconds since the Unix epoch, when the record reached the host
  double elapsed_s = 0;     // seconds since this run (process) started training
  double lr_G = 0, lr_D = 0;
};

// One metrics.jsonl line (no newline). Floats of the record with 9 significant digits (exact as
// f32), "time" and "elapsed_s" to the microsecond.
std::string metrics_record(const LoggedStep& s);

// TensorBoard scalar tags and values: every number of metrics_record but the step's position
// and times (the event carries the step and its wall time).
std::vector<std::pair<std::string, float>> tensorboard_scalars(const LoggedStep& s);

}  // namespace ge
