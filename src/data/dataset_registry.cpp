// The dataset table, with each dataset's factory and, for the downloadable ones, the official
// files (URLs and MD5s as torchvision has them).
#include "data/dataset_registry.h"

#include "ganengine/cifar10_dataset.h"
#include "ganengine/error.h"
#include "ganengine/lsun_dataset.h"
#include "ganengine/mnist_dataset.h"

namespace ge {
namespace {

std::unique_ptr<Dataset> open_cifar10(const DatasetRequest& r) {
  return std::make_unique<Cifar10Dataset>(r.dataroot, r.image_size);
}

std::unique_ptr<Dataset> open_lsun(const DatasetRequest& r) {
  return std::make_unique<LsunDataset>(r.dataroot, r.classes, r.image_size, r.skip_bad_images);
}

std::unique_ptr<Dataset> open_mnist(const DatasetRequest& r) {
  return std::make_unique<MnistDataset>(r.dataroot, r.image_size, MnistVariant::Mnist);
}

std::unique_ptr<Dataset> open_fashion_mnist(const DatasetRequest& r) {
  return std::make_unique<MnistDataset>(r.dataroot, r.image_size, MnistVariant::FashionMnist);
}

// The reference's dset.ImageFolder, for imagenet, folder and lfw alike.
std::unique_ptr<Dataset> open_image_folder(const DatasetRequest& r) {
  return std::make_unique<ImageFolderDataset>(r.dataroot, r.image_size, r.skip_bad_images, r.name);
}

std::unique_ptr<Dataset> open_fake(const DatasetRequest& r) {
  return std::make_unique<FakeDataset>(1000, r.image_size, 3, r.seed);
}

// The binary version, the one Cifar10Dataset reads first.
DownloadPlan cifar10_plan() {
  DownloadPlan plan;
  plan.mirrors = {"https://www.cs.toronto.edu/~kriz/"};
  plan.files = {{"cifar-10-binary.tar.gz", "c32a1d4ab5d03f1284b67883e8d87530"}};
  plan.extract = true;
  std::vector<std::string> batches;
  for (int b = 1; b <= 5; ++b) batches.push_back("cifar-10-batches-bin/data_batch_" + std::to_string(b) + ".bin");
  plan.present_when = {batches};
  return plan;
}

// The gzipped training images into torchvision's folder; present when MnistDataset would find
// them: in that folder (downloaded or extracted), or in dataroot itself.
DownloadPlan idx_images_plan(MnistVariant variant, std::vector<std::string> mirrors, const char* md5) {
  const std::string images = "train-images-idx3-ubyte";
  DownloadPlan plan;
  plan.mirrors = std::move(mirrors);
  plan.folder = MnistDataset::raw_folder(variant);
  plan.files = {{images + ".gz", md5}};
  plan.present_when = {{plan.folder + "/" + images + ".gz"}, {plan.folder + "/" + images}, {images + ".gz"}, {images}};
  return plan;
}

DownloadPlan mnist_plan() {
  return idx_images_plan(MnistVariant::Mnist,
                         {"https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/"},
                         "f68b3c2dcbeaaa9fbdd348bbdeb94873");
}

DownloadPlan fashion_mnist_plan() {
  return idx_images_plan(MnistVariant::FashionMnist, {"http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"},
                         "8d4fb7e6c68d591d4c3dfef9ec88bf0d");
}

}  // namespace

const std::vector<DatasetEntry>& dataset_registry() {
  // name, channels, factory, download, reads_files, image_files
  static const std::vector<DatasetEntry> entries = {
      {"cifar10", 3, open_cifar10, cifar10_plan, true, false},
      {"lsun", 3, open_lsun, nullptr, true, true},
      {"mnist", 1, open_mnist, mnist_plan, true, false},
      {"imagenet", 3, open_image_folder, nullptr, true, true},
      {"folder", 3, open_image_folder, nullptr, true, true},
      {"lfw", 3, open_image_folder, nullptr, true, true},
      {"fake", 3, open_fake, nullptr, false, false},
      {"fashion-mnist", 1, open_fashion_mnist, fashion_mnist_plan, true, false},
  };
  return entries;
}

const DatasetEntry* find_dataset(const std::string& name) {
  for (const DatasetEntry& e : dataset_registry())
    if (name == e.name) return &e;
  return nullptr;
}

const DatasetEntry& dataset_entry(const std::string& name) {
  const DatasetEntry* e = find_dataset(name);
  if (!e)
    fail("--dataset '", name, "' is not a dataset ganengine knows; expected one of ",
         join_names(dataset_names(), " | "));
  return *e;
}

std::vector<std::string> dataset_names(bool (*keep)(const DatasetEntry&)) {
  std::vector<std::string> names;
  for (const DatasetEntry& e : dataset_registry())
    if (!keep || keep(e)) names.push_back(e.name);
  return names;
}

std::string join_names(const std::vector<std::string>& names, const std::string& separator,
                       const std::string& last_separator) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() && !last_separator.empty() ? last_separator : separator;
    out += names[i];
  }
  return out;
}

}  // namespace ge
