// MnistDataset: find the images file where torchvision or a plain download would put it, load it.
#include "ganengine/mnist_dataset.h"

#include <sys/stat.h>

#include "data/file_stamp.h"
#include "data/idx_images.h"
#include "data/image_fit.h"
#include "ganengine/error.h"

namespace ge {
namespace {

constexpr const char* kImagesFile = "train-images-idx3-ubyte";

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string join(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : (dir.back() == '/' ? dir + name : dir + "/" + name);
}

// Where the file may be, in the order looked at: torchvision's extracted copy, its download,
// then the same two directly in dataroot.
std::vector<std::string> candidates(const std::string& dataroot, MnistVariant variant) {
  const std::string raw = join(dataroot, MnistDataset::raw_folder(variant));
  return {join(raw, kImagesFile), join(raw, std::string(kImagesFile) + ".gz"), join(dataroot, kImagesFile),
          join(dataroot, std::string(kImagesFile) + ".gz")};
}

}  // namespace

std::string MnistDataset::raw_folder(MnistVariant variant) {
  return variant == MnistVariant::Mnist ? "MNIST/raw" : "FashionMNIST/raw";
}

std::string MnistDataset::name() const { return variant_ == MnistVariant::Mnist ? "mnist" : "fashion-mnist"; }

MnistDataset::MnistDataset(const std::string& dataroot, int image_size, MnistVariant variant)
    : image_size_(image_size), variant_(variant) {
  if (image_size < 1) fail(name(), ": expected --imageSize >= 1, got ", image_size);
  const std::vector<std::string> paths = candidates(dataroot, variant);
  for (const std::string& p : paths)
    if (is_file(p)) {
      path_ = p;
      break;
    }
  if (path_.empty()) {
    std::string looked;
    for (const std::string& p : paths) looked += "\n  " + p;
    fail(name(), ": no training images under --dataroot '", dataroot, "': expected one of", looked,
         "\nadd --download to fetch them");
  }
  IdxImages images = read_idx_images(path_);
  count_ = images.count;
  rows_ = images.rows;
  cols_ = images.cols;
  pixels_ = std::move(images.pixels);
}

std::string MnistDataset::fingerprint() const { return Dataset::fingerprint() + "\n" + file_stamp_line(path_); }

void MnistDataset::read(int64_t index, uint8_t* hwc_out) const {
  GE_CHECK(index >= 0 && index < count_, name(), ": index ", index, " out of range [0, ", count_, ")");
  const int64_t plane = int64_t(rows_) * cols_;
  fit_image(pixels_.data() + index * plane, cols_, rows_, 1, image_size_, false,
            path_ + " image " + std::to_string(index), hwc_out);
}

}  // namespace ge
