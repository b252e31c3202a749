// run.json, written into --outf beside metrics.jsonl when a run starts: what produced the files
// there, so a run can be compared with another or repeated. Every flag (as given, or its
// default), the resolved device and precision policy, the program's version, the git commit it
// was built from, and the GPU with its driver, CUDA, cuDNN and cuBLAS versions.
#pragma once
#include <cstdint>
#include <string>

#include "ganengine/train_loop.h"

namespace ge {

struct RunFacts {
  PrecisionPolicy policy;
  std::string dataset;  // the dataset's own name
  int64_t dataset_images = 0;
  int64_t batches_per_epoch = 0;
  int64_t start_step = 0;  // where the run begins (0, or the resumed state's step)
  int64_t stop_step = 0;   // the global step it stops before
  int world = 1;           // shares of every batch (GPUs)
  bool resumed = false;
};

// The git commit the build was configured from ("unknown" outside a git checkout).
const char* build_git_commit();

// The document, and its atomic write to `path`.
std::string run_json(const TrainOptions& opt, const RunFacts& facts);
void write_run_json(const std::string& path, const TrainOptions& opt, const RunFacts& facts);

}  // namespace ge
