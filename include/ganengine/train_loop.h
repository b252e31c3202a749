// `ganengine train`: main_amp.py's loop around DcganTrainer — data, noise, console lines,
// sample grids, per-epoch weights, the training-state file for exact resume, metrics.jsonl.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ganengine/amp.h"
#include "ganengine/data_pipeline.h"
#include "ganengine/trainer.h"

namespace ge {

struct TrainOptions {
  std::string dataset = "cifar10";
  std::string dataroot = "./";
  int workers = 2;
  int64_t batch_size = 64;
  int image_size = 64;
  int64_t nz = 100, ngf = 64, ndf = 64;
  int niter = 25;
  double lr = 0.0002;
  double beta1 = 0.5;
  int ngpu = 1;                 // replicas in this process, one per GPU from --device on (data parallel)
  bool check_replicas = false;  // --check-replicas: compare every replica's weights after each step
  bool sync_bn = false;         // --sync-bn: BatchNorm statistics over all replicas (TrainerConfig::sync_batchnorm)
  std::string netG, netD;       // continue from these weights
  std::string outf = ".";
  uint64_t manual_seed = 2809;
  std::string classes = "bedroom";
  OptLevel opt_level = OptLevel::O1;
  AmpOverrides amp;
  Device device = Device::cpu();
  int log_interval = 1;  // the example prints every iteration
  int sample_interval = 100;
  int64_t max_steps = -1;  // stop early (after this many steps in total, resumed ones included)
  std::string resume;      // training-state file
  bool overwrite = false;  // --overwrite: start a new run in an --outf that holds another run's state
  // --checkpoint-every: the training state is also saved inside epochs, every N global steps
  // when steps > 0, else after this much training time since the last save (0: never).
  int64_t checkpoint_every_steps = 0;
  double checkpoint_every_seconds = 600;
  bool progress = true;     // the progress line (only drawn on a terminal)
  bool tensorboard = true;  // TensorBoard event files under <outf>/tb/ (--no-tensorboard)
  double ema_decay = 0;     // --ema-decay: TrainerConfig::ema_decay (0: no moving average)
  // For run.json: the program's version and every flag, as given or defaulted (name, value).
  std::string version;
  std::vector<std::pair<std::string, std::string>> flag_values;
  std::vector<std::pair<int64_t, int>> force_overflow;  // test hook: (global step, loss id)
  std::pair<int64_t, int64_t> profile_steps{-1, -1};    // --profile-steps A:B (global steps, inclusive)
  bool cuda_graph = false;  // TrainerConfig::cuda_graph (the CLI turns it on for GPUs unless --no-cuda-graph)
  // The input pipeline's own flags: --download, --download-mirror, --skip-bad-images,
  // --cache-dir, --data-on.
  bool download = false;
  std::string download_mirror;
  bool skip_bad_images = false;
  std::string cache_dir;
  DataPlacement data_on = DataPlacement::Auto;
};

// Runs training; returns the process exit code (0; 3 when a loss scale hit its floor; 128 + the
// signal, 130 for SIGINT and 143 for SIGTERM, when stopped by one, after saving the training state).
int run_training(const TrainOptions& opt);

// Prints, for each layer of both networks, the dtype it stores and computes in.
void print_precision(const TrainOptions& opt, int nc);

}  // namespace ge
