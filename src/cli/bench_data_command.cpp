// `ganengine bench-data`: how fast the input pipeline delivers images — decoding and resizing
// on one thread, then whole batches from the source training would use (host workers or
// GPU-resident), so a slow dataset shows up before it slows training.
#include <chrono>
#include <cstdio>
#include <cxxopts.hpp>
#include <vector>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "core/backend.h"
#include "ganengine/data_pipeline.h"

namespace ge::cli {

int run_bench_data(int argc, char** argv) {
  cxxopts::Options o("ganengine bench-data", "Measure the input pipeline's images/s for a dataset.");
  // clang-format off
  o.add_options()
    ("dataset", dataset_choices(), cxxopts::value<std::string>()->default_value("fake"))
    ("dataroot", "path to dataset", cxxopts::value<std::string>()->default_value("./"))
    ("classes", "lsun classes", cxxopts::value<std::string>()->default_value("bedroom"))
    ("imageSize", "image side", cxxopts::value<std::string>()->default_value("64"))
    ("batchSize", "batch size", cxxopts::value<std::string>()->default_value("64"))
    ("workers", "decoding threads", cxxopts::value<std::string>()->default_value("2"))
    ("data-on", "auto | host | gpu: where batches are assembled", cxxopts::value<std::string>()->default_value("auto"))
    ("cache-dir", "decoded-image cache (folder-like and lsun datasets)", cxxopts::value<std::string>()->default_value(""))
    ("skip-bad-images", "skip undecodable images instead of stopping")
    ("device", "cpu | cuda | cuda:K", cxxopts::value<std::string>()->default_value(""))
    ("seconds", "how long to time each part", cxxopts::value<std::string>()->default_value("5"))
    ("h,help", "show this help");
  // clang-format on
  Arguments args = normalise_arguments(argc, argv, {{"batch-size", "batchSize"}, {"image-size", "imageSize"}});
  const std::optional<cxxopts::ParseResult> parsed = parse_command_line(o, args, "bench-data");
  if (!parsed) return 0;
  const cxxopts::ParseResult& r = *parsed;
  DataPipelineOptions d = read_data_flags(r);
  d.image_size = int_flag(r, "imageSize", "a power of two from 16 to 512");
  d.batch_size = int64_flag(r, "batchSize", "a positive number");
  d.device = resolve_device(r["device"].as<std::string>(), "bench-data", /*warn_on_cpu=*/false);
  d.gpu_dtype = DType::F16;
  const double seconds = real_flag(r, "seconds", "a positive number of seconds");
  if (!(seconds > 0)) fail("--seconds must be positive");
  if (d.batch_size < 1) fail("--batchSize must be positive");

  using clock = std::chrono::steady_clock;
  DataPipeline p = open_data_pipeline(d);
  const Dataset& ds = *p.dataset;
  std::printf("dataset %s: %lld images, %dx%d, %d channels\n", ds.name().c_str(), static_cast<long long>(ds.size()),
              ds.image_size(), ds.image_size(), ds.channels());

  // 1. Reading one image at a time on this thread: decode + resize + crop, the per-worker rate.
  std::vector<uint8_t> img(static_cast<size_t>(ds.image_size()) * ds.image_size() * ds.channels());
  int64_t n = 0;
  auto t0 = clock::now();
  while (std::chrono::duration<double>(clock::now() - t0).count() < seconds) ds.read(n++ % ds.size(), img.data());
  const double per_thread = n / std::chrono::duration<double>(clock::now() - t0).count();
  std::printf("read (decode + resize), 1 thread: %.0f images/s\n", per_thread);

  // 2. Whole batches from the source training would use, the device's work included.
  std::printf("source: %s\n", p.source->describe().c_str());
  const int64_t per_epoch = p.source->batches_per_epoch();
  Tensor b = p.source->batch(0, 0);  // warm-up (and the prefetch of the next batch)
  int64_t images = 0, k = 1;
  t0 = clock::now();
  while (std::chrono::duration<double>(clock::now() - t0).count() < seconds) {
    b = p.source->batch(k / per_epoch, k % per_epoch);
    images += b.dim(0);
    ++k;
  }
  synchronize(b.device());  // the GPU source only enqueues work: count it done
  const double batch_rate = images / std::chrono::duration<double>(clock::now() - t0).count();
  std::printf("batches (%lld per batch, %d workers): %.0f images/s\n", static_cast<long long>(d.batch_size), d.workers,
              batch_rate);
  return 0;
}

}  // namespace ge::cli
