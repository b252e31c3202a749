// Cifar10Dataset: both official layouts reduce to "image i is 3072 planar bytes at a known
// offset of a known file", so reading is one pread and a transpose whatever the layout.
#include "ganengine/cifar10_dataset.h"

#include <sys/stat.h>

#include "data/cifar10_pickle.h"
#include "data/file_stamp.h"
#include "data/image_fit.h"
#include "data/read_only_file.h"
#include "ganengine/error.h"

namespace ge {
namespace {

constexpr int64_t kPlane = Cifar10Dataset::kSide * Cifar10Dataset::kSide;
constexpr int64_t kImageBytes = 3 * kPlane;
constexpr int64_t kBinRecordBytes = 1 + kImageBytes;  // the label byte, then the image

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string join(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : (dir.back() == '/' ? dir + name : dir + "/" + name);
}

std::string batch_name(int b, bool binary) { return "data_batch_" + std::to_string(b + 1) + (binary ? ".bin" : ""); }

std::string download_hint() {
  return "add --download to fetch the binary version (https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz, "
         "extracted into --dataroot)";
}

std::unique_ptr<ReadOnlyFile> open_batch(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    fail("cifar10: missing ", path, ": expected the 5 training batches data_batch_1 .. data_batch_5 beside it; ",
         download_hint());
  return std::make_unique<ReadOnlyFile>(path);
}

}  // namespace

Cifar10Dataset::Cifar10Dataset(const std::string& dataroot, int image_size) : image_size_(image_size) {
  if (image_size < 1) fail("cifar10: expected --imageSize >= 1, got ", image_size);
  const std::string bin_dir = join(dataroot, "cifar-10-batches-bin");
  const std::string py_dir = join(dataroot, "cifar-10-batches-py");
  const bool binary = is_directory(bin_dir);
  if (!binary && !is_directory(py_dir))
    fail("cifar10: no CIFAR-10 under --dataroot '", dataroot, "': expected ", bin_dir,
         "/data_batch_1.bin .. data_batch_5.bin (the binary version) or ", py_dir,
         "/data_batch_1 .. data_batch_5 (the python version); ", download_hint());

  for (int b = 0; b < kBatches; ++b) {
    Batch batch;
    batch.file = open_batch(join(binary ? bin_dir : py_dir, batch_name(b, binary)));
    const ReadOnlyFile& file = *batch.file;
    if (binary) {
      // No header to check: the size is the whole format (10000 records of 3073 bytes).
      if (file.size() != kImagesPerBatch * kBinRecordBytes)
        fail("cifar10: ", file.path(), " has ", file.size(), " bytes, expected ", kImagesPerBatch * kBinRecordBytes,
             " (", kImagesPerBatch, " records of 1 label byte + ", kImageBytes,
             " image bytes); the file is truncated or not a CIFAR-10 binary batch");
      batch.first_image = 1;
      batch.stride = kBinRecordBytes;
    } else {
      const PickledImageRows rows = locate_pickled_cifar_data(file, kImagesPerBatch, kImageBytes);
      batch.first_image = rows.offset;
      batch.stride = kImageBytes;
    }
    batches_.push_back(std::move(batch));
  }
}

Cifar10Dataset::~Cifar10Dataset() = default;

std::string Cifar10Dataset::fingerprint() const {
  std::string f = Dataset::fingerprint() + "\n";
  for (const Batch& b : batches_) f += file_stamp_line(b.file->path());
  return f;
}

void Cifar10Dataset::read(int64_t index, uint8_t* hwc_out) const {
  GE_CHECK(index >= 0 && index < size(), "cifar10: index ", index, " out of range [0, ", size(), ")");
  const Batch& batch = batches_[static_cast<size_t>(index / kImagesPerBatch)];
  const int64_t item = index % kImagesPerBatch;
  uint8_t planar[kImageBytes];
  batch.file->read_at(batch.first_image + item * batch.stride, planar, kImageBytes);
  uint8_t hwc[kImageBytes];
  for (int64_t p = 0; p < kPlane; ++p)
    for (int64_t c = 0; c < 3; ++c) hwc[p * 3 + c] = planar[c * kPlane + p];
  fit_image(hwc, kSide, kSide, 3, image_size_, false, batch.file->path() + " image " + std::to_string(item), hwc_out);
}

}  // namespace ge
