#include "ganengine/data_pipeline.h"

#include <iostream>

#include "data/dataset_cache.h"
#include "data/dataset_registry.h"
#include "data/download.h"
#include "data/gpu_resident.h"
#include "ganengine/error.h"

#ifdef GE_WITH_CUDA
#include "runtime/cuda_check.h"
#endif

namespace ge {

DataPlacement parse_data_placement(const std::string& s) {
  if (s == "auto") return DataPlacement::Auto;
  if (s == "host" || s == "cpu") return DataPlacement::Host;
  if (s == "gpu" || s == "device") return DataPlacement::Gpu;
  fail("--data-on '", s, "' (expected auto, host or gpu)");
}

int64_t gpu_resident_budget_bytes(Device device) {
#ifdef GE_WITH_CUDA
  if (device.is_cuda()) {
    size_t free_bytes = 0, total = 0;
    CUDA_CHECK(cudaSetDevice(device.index));
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
    // A quarter of what is free, at most 16 GiB: the training step keeps the rest.
    return std::min<int64_t>(static_cast<int64_t>(free_bytes / 4), int64_t(16) << 30);
  }
#endif
  (void)device;
  return 0;
}

std::unique_ptr<Dataset> open_pipeline_dataset(const DataPipelineOptions& opt) {
  if (opt.download) {
    if (!dataset_has_download(opt.dataset))
      fail("--download works for ", join_names(dataset_names(is_downloadable), ", ", " and "), ", not for --dataset ",
           opt.dataset);
    download_dataset(opt.dataset, opt.dataroot, opt.mirror, &std::cerr);
  }
  std::unique_ptr<Dataset> dataset =
      open_dataset(opt.dataset, opt.dataroot, opt.image_size, opt.classes, opt.seed, opt.skip_bad_images);
  if (!opt.cache_dir.empty()) {
    if (!dataset_entry(opt.dataset).image_files)
      fail("--cache-dir is for datasets decoded from image files (", join_names(dataset_names(is_image_files), ", "),
           "), not ", opt.dataset);
    dataset = std::make_unique<CachedDataset>(std::move(dataset), opt.cache_dir, opt.workers);
  }
  return dataset;
}

std::unique_ptr<BatchSource> open_batch_source(const Dataset& dataset, const DataPipelineOptions& opt) {
  bool on_gpu = false;
  if (opt.device.is_cuda()) {
    const int64_t need = GpuResidentSource::bytes_needed(dataset);
    if (opt.placement == DataPlacement::Gpu) {
      on_gpu = true;
    } else if (opt.placement == DataPlacement::Auto) {
      on_gpu = need <= gpu_resident_budget_bytes(opt.device);
    }
  } else if (opt.placement == DataPlacement::Gpu) {
    fail("--data-on gpu needs a CUDA device (--device cuda)");
  }
  if (on_gpu)
    return std::make_unique<GpuResidentSource>(dataset, opt.batch_size, opt.seed, opt.workers, opt.device,
                                               opt.gpu_dtype, opt.gpu_format);
  return std::make_unique<Loader>(dataset, opt.batch_size, opt.seed, opt.workers, /*pinned=*/opt.device.is_cuda());
}

DataPipeline open_data_pipeline(const DataPipelineOptions& opt) {
  DataPipeline p;
  p.dataset = open_pipeline_dataset(opt);
  p.source = open_batch_source(*p.dataset, opt);
  return p;
}

}  // namespace ge
