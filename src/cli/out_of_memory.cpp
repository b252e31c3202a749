#include "cli/out_of_memory.h"

#include <unistd.h>

#include <cstdio>

#include "data/dataset_registry.h"

namespace ge::cli {

namespace {

// The networks of nn/dcgan.cpp, in weights of their convolutions (4 x 4 kernels); doubles, so
// that no flag value can overflow the count.
double convolution_weights(const TrainOptions& opt, int channels) {
  const double k = 16, nz = double(opt.nz), ngf = double(opt.ngf), ndf = double(opt.ndf), nc = channels;
  double g = 0, d = 0;
  double mult = opt.image_size / 8.0;  // a power of two from 16: a whole number
  g += nz * ngf * mult * k;
  for (; mult > 1; mult /= 2) g += ngf * mult * (ngf * mult / 2) * k;
  g += ngf * nc * k;
  d += nc * ndf * k;
  mult = 1;
  for (int size = opt.image_size / 2; size > 4; size /= 2, mult *= 2) d += ndf * mult * (ndf * mult * 2) * k;
  d += ndf * mult * k;
  return g + d;
}

std::string gib(double bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return text;
}

double batch_bytes(const TrainOptions& opt, int channels) {
  return double(opt.batch_size) * channels * opt.image_size * opt.image_size * 4;
}

}  // namespace

int channels_for_estimate(const std::string& dataset) {
  const DatasetEntry* entry = find_dataset(dataset);
  return entry ? entry->channels : 3;
}

void check_bound_fits_host_memory(const TrainOptions& opt, int channels) {
  if (!opt.device.is_cpu()) return;
  const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return;  // unknown: left to the allocators
  const double physical = double(pages) * double(page_size);
  if (batch_bytes(opt, channels) + convolution_weights(opt, channels) * 4 > physical)
    fail(out_of_memory_message(opt, channels, "out of host memory (this machine has " + gib(physical) + ")"));
}

std::string out_of_memory_message(const TrainOptions& opt, int channels, const std::string& failure) {
  const double batch = batch_bytes(opt, channels);
  const double weight_bytes = convolution_weights(opt, channels) * 4;
  return failure + ": this run's sizes need more memory than this machine has: --batchSize " +
         std::to_string(opt.batch_size) + " of " + std::to_string(opt.image_size) + " x " +
         std::to_string(opt.image_size) + " images (--imageSize) needs at least " + gib(batch) +
         " for one batch in f32, and --nz " + std::to_string(opt.nz) + ", --ngf " + std::to_string(opt.ngf) +
         ", --ndf " + std::to_string(opt.ndf) + " at least " + gib(weight_bytes) +
         " for the two networks' f32 weights, before activations, gradients and the optimiser's state; lower " +
         (weight_bytes > batch ? "--ngf and --ndf (or --imageSize)" : "--batchSize (or --imageSize)");
}

}  // namespace ge::cli
