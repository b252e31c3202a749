// LSUN scene categories from their official LMDB releases, as torchvision's LSUN serves them
// in the example: classes "bedroom,tower" read <dataroot>/bedroom_train_lmdb then
// <dataroot>/tower_train_lmdb, each in key order; every image is decoded to RGB, resized so
// its shorter side is --imageSize, and centre-cropped to a square (Resize, CenterCrop).
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "ganengine/data.h"

namespace ge {

class LmdbReader;

class LsunDataset : public Dataset {
 public:
  // classes: --classes, comma separated. Each name gets torchvision's "_train" suffix unless
  // it already ends in "_train" or "_val". Every database is opened and its keys listed here;
  // a missing one throws ge::Error naming the expected directory.
  // skip_bad_images: a value that does not decode is skipped (the next decodable image of the
  // dataset is served in its place) and counted, instead of throwing.
  LsunDataset(const std::string& dataroot, const std::string& classes, int image_size, bool skip_bad_images = false);
  ~LsunDataset() override;

  int64_t size() const override { return size_; }
  int channels() const override { return 3; }
  int image_size() const override { return image_size_; }
  // Throws ge::Error naming the database and key when the value is not a decodable image
  // (WebP as released, or JPEG/PNG), unless skip_bad_images.
  void read(int64_t index, uint8_t* hwc_out) const override;
  std::string name() const override { return "lsun"; }
  // Per database: its path, its data file's size and mtime, and its entry count.
  std::string fingerprint() const override;

  // How many reads so far fell on an undecodable value and were served the next image.
  int64_t bad_images_skipped() const { return bad_images_skipped_.load(); }

  // The database directory names for --classes: "bedroom,tower" -> bedroom_train_lmdb, tower_train_lmdb.
  static std::vector<std::string> database_names(const std::string& classes);

 private:
  // Decodes image `index`; returns false (and the reason) instead of throwing when it is bad.
  bool try_read(int64_t index, uint8_t* hwc_out, std::string* why) const;

  int image_size_;
  bool skip_bad_images_;
  std::vector<std::unique_ptr<LmdbReader>> databases_;
  std::vector<int64_t> first_index_;  // dataset index of each database's first key
  int64_t size_ = 0;
  mutable std::atomic<int64_t> bad_images_skipped_{0};
};

}  // namespace ge
