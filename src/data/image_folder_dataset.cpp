// ImageFolderDataset: the files list_image_folder finds, each decoded and transformed on read.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "data/file_stamp.h"
#include "data/image_decode.h"
#include "data/image_folder_scan.h"
#include "data/image_transform.h"
#include "data/md5.h"
#include "ganengine/data.h"
#include "ganengine/error.h"

namespace ge {

struct ImageFolderDataset::ReadFailures {
  std::mutex mutex;
  std::set<int64_t> items;  // indices whose file failed to decode
  bool contains(int64_t i) {
    std::lock_guard<std::mutex> lock(mutex);
    return items.count(i) > 0;
  }
  void add(int64_t i) {
    std::lock_guard<std::mutex> lock(mutex);
    items.insert(i);
  }
  int64_t count() {
    std::lock_guard<std::mutex> lock(mutex);
    return static_cast<int64_t>(items.size());
  }
};

namespace {

// probe_image on every file, on a few threads (a big tree is mostly waiting on the disk).
// Returns the reason each bad file failed, empty for good ones.
std::vector<std::string> probe_all(const std::vector<std::pair<std::string, int>>& images) {
  std::vector<std::string> reasons(images.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < images.size(); i = next++) {
      try {
        probe_image(images[i].first);
      } catch (const Error& e) {
        reasons[i] = e.what();
      }
    }
  };
  const size_t threads = std::min<size_t>(8, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads && t < images.size(); ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  return reasons;
}

}  // namespace

ImageFolderDataset::ImageFolderDataset(const std::string& dataroot, int image_size, bool skip_bad_images,
                                       const std::string& name)
    : name_(name),
      root_(dataroot),
      image_size_(image_size),
      skip_bad_images_(skip_bad_images),
      read_failures_(std::make_unique<ReadFailures>()) {
  if (image_size < 1) fail("--dataset ", name, ": expected --imageSize >= 1, got ", image_size);
  ImageFolderListing listing = list_image_folder(dataroot, name);
  classes_ = std::move(listing.classes);
  const std::vector<std::string> reasons =
      skip_bad_images ? probe_all(listing.images) : std::vector<std::string>(listing.images.size());
  for (size_t i = 0; i < listing.images.size(); ++i) {
    if (reasons[i].empty())
      items_.push_back({std::move(listing.images[i].first), listing.images[i].second});
    else
      excluded_.push_back(reasons[i]);  // the message names the file
  }
  if (items_.empty())
    fail("--dataset ", name, ": none of the ", listing.images.size(), " image files under ", dataroot,
         " is readable; the first problem: ", excluded_.front());
}

ImageFolderDataset::~ImageFolderDataset() = default;

const std::string& ImageFolderDataset::path(int64_t index) const {
  GE_CHECK(index >= 0 && index < size(), name_, ": index ", index, " out of range [0, ", size(), ")");
  return items_[size_t(index)].path;
}

int ImageFolderDataset::target(int64_t index) const {
  GE_CHECK(index >= 0 && index < size(), name_, ": index ", index, " out of range [0, ", size(), ")");
  return items_[size_t(index)].target;
}

int64_t ImageFolderDataset::failed_at_read() const { return read_failures_->count(); }

std::string ImageFolderDataset::fingerprint() const {
  // Hashed as we go: a million-file tree would make a fingerprint string of ~100 MB. Paths are
  // relative to dataroot, so a tree moved or copied with its mtimes keeps its fingerprint.
  Md5 files;
  for (const Item& item : items_) {
    const bool under_root = item.path.compare(0, root_.size(), root_) == 0;
    size_t start = under_root ? root_.size() : 0;
    while (under_root && start < item.path.size() && item.path[start] == '/') ++start;
    const FileStamp st = file_stamp(item.path);
    // '\0' cannot occur in a path, so the fields of one file never run into the next.
    const std::string line = item.path.substr(start) + '\0' +
                             (st.exists ? std::to_string(st.size) + ' ' + std::to_string(st.mtime_ns) : "missing") +
                             '\0';
    files.update(line.data(), line.size());
  }
  return Dataset::fingerprint() + (skip_bad_images_ ? " skip_bad_images" : "") + " files_md5=" + files.hex_digest();
}

namespace {

// transforms.Compose([Resize(s), CenterCrop(s)]) on the decoded file, into hwc_out.
void load_transformed(const std::string& path, int size, uint8_t* hwc_out) {
  const DecodedImage image = center_crop(resize_shorter_side(decode_image(path), size), size);
  std::memcpy(hwc_out, image.hwc.data(), image.hwc.size());
}

}  // namespace

void ImageFolderDataset::read(int64_t index, uint8_t* hwc_out) const {
  const std::string& first = path(index);  // checks the range
  if (!skip_bad_images_) return load_transformed(first, image_size_, hwc_out);
  // The first good item at or after index: a pure function of index, whichever thread
  // found a bad file first.
  std::string first_error;
  for (int64_t k = 0; k < size(); ++k) {
    const int64_t i = (index + k) % size();
    if (read_failures_->contains(i)) continue;
    try {
      return load_transformed(items_[size_t(i)].path, image_size_, hwc_out);
    } catch (const Error& e) {
      read_failures_->add(i);
      if (first_error.empty()) first_error = e.what();
    }
  }
  fail("--dataset ", name_, ": no image under ", root_, " decodes any more",
       first_error.empty() ? std::string() : "; for example: " + first_error);
}

}  // namespace ge
