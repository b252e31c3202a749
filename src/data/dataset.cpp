// The Dataset interface and --dataset name resolution.
#include <algorithm>
#include <iterator>

#include "ganengine/cifar10_dataset.h"
#include "ganengine/data.h"
#include "ganengine/error.h"
#include "ganengine/lsun_dataset.h"
#include "ganengine/mnist_dataset.h"

namespace ge {

Dataset::~Dataset() = default;

std::string Dataset::fingerprint() const {
  return name() + " size=" + std::to_string(size()) + " image_size=" + std::to_string(image_size()) +
         " channels=" + std::to_string(channels());
}

namespace {

// The reference's --dataset choices, in its help text's order, then our additions.
const char* const kDatasetNames[] = {"cifar10", "lsun", "mnist", "imagenet", "folder", "lfw", "fake", "fashion-mnist"};

}  // namespace

int dataset_channels(const std::string& name) {
  if (std::find(std::begin(kDatasetNames), std::end(kDatasetNames), name) == std::end(kDatasetNames))
    open_dataset(name, "", 64, "", 0, false);  // throws the error that lists the accepted names
  return name == "mnist" || name == "fashion-mnist" ? 1 : 3;
}

std::unique_ptr<Dataset> open_dataset(const std::string& name, const std::string& dataroot, int image_size,
                                      const std::string& classes, uint64_t seed, bool skip_bad_images) {
  if (name == "fake") return std::make_unique<FakeDataset>(1000, image_size, 3, seed);
  if (name == "imagenet" || name == "folder" || name == "lfw")  // the reference's dset.ImageFolder
    return std::make_unique<ImageFolderDataset>(dataroot, image_size, skip_bad_images, name);
  if (name == "cifar10") return std::make_unique<Cifar10Dataset>(dataroot, image_size);
  if (name == "mnist") return std::make_unique<MnistDataset>(dataroot, image_size, MnistVariant::Mnist);
  if (name == "fashion-mnist") return std::make_unique<MnistDataset>(dataroot, image_size, MnistVariant::FashionMnist);
  if (name == "lsun") return std::make_unique<LsunDataset>(dataroot, classes, image_size, skip_bad_images);
  const bool known = std::find(std::begin(kDatasetNames), std::end(kDatasetNames), name) != std::end(kDatasetNames);
  if (known)
    fail("--dataset ", name, " is not available yet in this version of ganengine; see README.md");
  std::string accepted;
  for (const char* n : kDatasetNames) accepted += (accepted.empty() ? "" : " | ") + std::string(n);
  fail("--dataset '", name, "' is not a dataset ganengine knows; expected one of ", accepted);
}

}  // namespace ge
