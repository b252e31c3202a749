// The Dataset interface and --dataset name resolution (through the registry).
#include "data/dataset_registry.h"
#include "ganengine/data.h"

namespace ge {

Dataset::~Dataset() = default;

std::string Dataset::fingerprint() const {
  return name() + " size=" + std::to_string(size()) + " image_size=" + std::to_string(image_size()) +
         " channels=" + std::to_string(channels());
}

int dataset_channels(const std::string& name) { return dataset_entry(name).channels; }

std::unique_ptr<Dataset> open_dataset(const std::string& name, const std::string& dataroot, int image_size,
                                      const std::string& classes, uint64_t seed, bool skip_bad_images) {
  return dataset_entry(name).open({name, dataroot, image_size, classes, seed, skip_bad_images});
}

}  // namespace ge
