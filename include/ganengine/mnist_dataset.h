// MNIST and Fashion-MNIST training images (60,000 of 28 x 28, one channel), as torchvision's
// MNIST / FashionMNIST(train=True) serve them, each resized to --imageSize (Resize(imageSize)).
#pragma once
#include <string>
#include <vector>

#include "ganengine/data.h"

namespace ge {

enum class MnistVariant { Mnist, FashionMnist };

class MnistDataset : public Dataset {
 public:
  // Reads train-images-idx3-ubyte, plain or .gz, from torchvision's layout
  // (<dataroot>/MNIST/raw/ or <dataroot>/FashionMNIST/raw/) or directly from <dataroot>.
  // The whole file is loaded and checked here (magic number, dimensions, exact size); a
  // missing or wrong file throws ge::Error naming it, what was expected, and `--download`.
  MnistDataset(const std::string& dataroot, int image_size, MnistVariant variant);

  int64_t size() const override { return count_; }
  int channels() const override { return 1; }
  int image_size() const override { return image_size_; }
  void read(int64_t index, uint8_t* hwc_out) const override;
  std::string name() const override;
  // The images file's path, size and mtime.
  std::string fingerprint() const override;

  const std::string& path() const { return path_; }  // the file read
  int source_rows() const { return rows_; }
  int source_cols() const { return cols_; }

  // The directory under dataroot that torchvision (and --download) use: "MNIST/raw" or
  // "FashionMNIST/raw".
  static std::string raw_folder(MnistVariant variant);

 private:
  int image_size_;
  MnistVariant variant_;
  std::string path_;
  int64_t count_ = 0;
  int rows_ = 0;
  int cols_ = 0;
  std::vector<uint8_t> pixels_;
};

}  // namespace ge
