// CIFAR-10's 50,000 training images, as torchvision's CIFAR10(train=True) serves them: the
// five training batches in order, each image resized to --imageSize (Resize(imageSize)).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ganengine/data.h"

namespace ge {

class ReadOnlyFile;

class Cifar10Dataset : public Dataset {
 public:
  static constexpr int kBatches = 5;
  static constexpr int64_t kImagesPerBatch = 10000;
  static constexpr int kSide = 32;  // images are 32 x 32 RGB

  // Reads <dataroot>/cifar-10-batches-bin/data_batch_{1..5}.bin (the binary version: records
  // of 1 label byte + 3072 bytes, the R, G and B planes), or, when that directory does not
  // exist, <dataroot>/cifar-10-batches-py/data_batch_{1..5} (the python version: pickled
  // dicts). Every file is checked for its exact size or structure here; a missing or wrong
  // file throws ge::Error naming it, what was expected, and `--download`.
  Cifar10Dataset(const std::string& dataroot, int image_size);
  ~Cifar10Dataset() override;

  int64_t size() const override { return kBatches * kImagesPerBatch; }
  int channels() const override { return 3; }
  int image_size() const override { return image_size_; }
  void read(int64_t index, uint8_t* hwc_out) const override;
  std::string name() const override { return "cifar10"; }
  // The five batch files' paths, sizes and mtimes.
  std::string fingerprint() const override;

 private:
  // Image i of a batch is the 3072 planar bytes at first_image + i * stride of its file.
  struct Batch {
    std::unique_ptr<ReadOnlyFile> file;
    int64_t first_image = 0;
    int64_t stride = 0;
  };
  int image_size_;
  std::vector<Batch> batches_;
};

}  // namespace ge
