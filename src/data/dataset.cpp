// The Dataset interface and --dataset name resolution.
#include <algorithm>
#include <iterator>

#include "ganengine/data.h"
#include "ganengine/error.h"

namespace ge {

Dataset::~Dataset() = default;

namespace {

// The reference's --dataset choices, in its help text's order.
const char* const kDatasetNames[] = {"cifar10", "lsun", "mnist", "imagenet", "folder", "lfw", "fake"};

}  // namespace

int dataset_channels(const std::string& name) {
  if (std::find(std::begin(kDatasetNames), std::end(kDatasetNames), name) == std::end(kDatasetNames))
    open_dataset(name, "", 64, "", 0);  // throws the error that lists the accepted names
  return name == "mnist" ? 1 : 3;
}

std::unique_ptr<Dataset> open_dataset(const std::string& name, const std::string& dataroot, int image_size,
                                      const std::string& classes, uint64_t seed) {
  (void)dataroot;  // used by the file-backed datasets, once they exist
  (void)classes;
  if (name == "fake") return std::make_unique<FakeDataset>(1000, image_size, 3, seed);
  const bool known = std::find(std::begin(kDatasetNames), std::end(kDatasetNames), name) != std::end(kDatasetNames);
  if (known)
    fail("--dataset ", name, " is not available yet in this version of ganengine (only 'fake' is); see README.md");
  std::string accepted;
  for (const char* n : kDatasetNames) accepted += (accepted.empty() ? "" : " | ") + std::string(n);
  fail("--dataset '", name, "' is not a dataset ganengine knows; expected one of ", accepted);
}

}  // namespace ge
