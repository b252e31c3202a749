// From --dataset flags to batches: download when asked, open the dataset, put it behind the
// on-disk cache when asked, and choose where batches are built (host workers or the GPU).
#pragma once
#include <memory>
#include <string>

#include "ganengine/batch_source.h"
#include "ganengine/data.h"

namespace ge {

enum class DataPlacement { Auto, Host, Gpu };
DataPlacement parse_data_placement(const std::string& s);  // "auto" | "host" | "gpu"

struct DataPipelineOptions {
  std::string dataset = "cifar10";
  std::string dataroot = "./";
  std::string classes = "bedroom";
  int image_size = 64;
  uint64_t seed = 2809;
  int workers = 2;
  int64_t batch_size = 64;
  bool skip_bad_images = false;
  bool download = false;
  std::string mirror;     // base URL for --download ("" = GANENGINE_DATASET_MIRROR, then the official ones)
  std::string cache_dir;  // decoded-image cache for folder-like and LSUN datasets ("" = none)
  DataPlacement placement = DataPlacement::Auto;
  Device device = Device::cpu();
  DType gpu_dtype = DType::F32;                  // what GPU-resident batches are built in (the compute dtype)
  MemoryFormat gpu_format = MemoryFormat::NHWC;  // and their layout (the networks' placement)
};

struct DataPipeline {
  std::unique_ptr<Dataset> dataset;
  std::unique_ptr<BatchSource> source;
};

DataPipeline open_data_pipeline(const DataPipelineOptions& opt);
// Its two halves, for a caller that builds several sources over one dataset (`bench --dataset`,
// one per configuration): the dataset (downloaded, cached as asked), then a source over it
// (placement, batch size, seed, workers, device and GPU dtype/layout from opt; dataset must
// outlive it).
std::unique_ptr<Dataset> open_pipeline_dataset(const DataPipelineOptions& opt);
std::unique_ptr<BatchSource> open_batch_source(const Dataset& dataset, const DataPipelineOptions& opt);

// Auto placement keeps a dataset on the GPU when its decoded bytes fit this budget.
int64_t gpu_resident_budget_bytes(Device device);

}  // namespace ge
