// LsunDataset: the concatenation of one LMDB per class, decoded and fitted on read.
#include "ganengine/lsun_dataset.h"

#include <algorithm>

#include "data/file_stamp.h"
#include "data/image_decode.h"
#include "data/image_fit.h"
#include "data/lmdb_reader.h"
#include "ganengine/error.h"

namespace ge {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string trimmed(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
}

std::string join(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : (dir.back() == '/' ? dir + name : dir + "/" + name);
}

// After this many undecodable values in a row, skipping stops being plausible: the database
// is not an image database at all.
constexpr int kMaxConsecutiveBadImages = 100;

}  // namespace

std::vector<std::string> LsunDataset::database_names(const std::string& classes) {
  std::vector<std::string> names;
  size_t start = 0;
  for (;;) {
    const size_t comma = classes.find(',', start);
    const std::string c =
        trimmed(classes.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (c.empty())
      fail("lsun: --classes '", classes, "': expected comma-separated category names such as bedroom,tower");
    const bool has_split = ends_with(c, "_train") || ends_with(c, "_val");
    names.push_back(c + (has_split ? "" : "_train") + "_lmdb");
    if (comma == std::string::npos) return names;
    start = comma + 1;
  }
}

LsunDataset::LsunDataset(const std::string& dataroot, const std::string& classes, int image_size, bool skip_bad_images)
    : image_size_(image_size), skip_bad_images_(skip_bad_images) {
  if (image_size < 1) fail("lsun: expected --imageSize >= 1, got ", image_size);
  for (const std::string& name : database_names(classes)) {
    const std::string path = join(dataroot, name);
    try {
      databases_.push_back(std::make_unique<LmdbReader>(path));
    } catch (const Error& e) {
      fail("lsun: ", e.what(), "\nexpected the LMDB database of each class in --classes '", classes,
           "' under --dataroot, as LSUN's download script names them (e.g. bedroom_train_lmdb, unzipped)");
    }
    first_index_.push_back(size_);
    size_ += databases_.back()->size();
  }
  if (size_ == 0) fail("lsun: the LMDB databases for --classes '", classes, "' under ", dataroot, " hold no images");
}

LsunDataset::~LsunDataset() = default;

std::string LsunDataset::fingerprint() const {
  std::string f = Dataset::fingerprint() + (skip_bad_images_ ? " skip_bad_images" : "") + "\n";
  for (const auto& db : databases_) {
    // LmdbReader opens either a directory holding data.mdb or the data file itself.
    const std::string data = file_stamp(db->path() + "/data.mdb").exists ? db->path() + "/data.mdb" : db->path();
    f += file_stamp_line(data) + "entries=" + std::to_string(db->size()) + "\n";
  }
  return f;
}

bool LsunDataset::try_read(int64_t index, uint8_t* hwc_out, std::string* why) const {
  const size_t db =
      static_cast<size_t>(std::upper_bound(first_index_.begin(), first_index_.end(), index) - first_index_.begin()) - 1;
  const LmdbReader& reader = *databases_[db];
  const int64_t item = index - first_index_[db];
  const std::string what = reader.path() + " key " + reader.printable_key(item);
  const std::vector<uint8_t> bytes = reader.value(item);  // a read error is never skipped
  DecodedImage image;
  try {
    image = decode_image_bytes(bytes.data(), bytes.size(), what);
  } catch (const Error& e) {
    *why = std::string(e.what()) + " (expected an encoded image: WebP as LSUN releases it, or JPEG or PNG)";
    return false;
  }
  fit_image(image.hwc.data(), image.width, image.height, image.channels, image_size_, true, what, hwc_out);
  return true;
}

void LsunDataset::read(int64_t index, uint8_t* hwc_out) const {
  GE_CHECK(index >= 0 && index < size_, "lsun: index ", index, " out of range [0, ", size_, ")");
  std::string why;
  if (try_read(index, hwc_out, &why)) return;
  if (!skip_bad_images_) fail("lsun: ", why, "; --skip-bad-images skips and counts such values instead");
  // The next image stands in, so the batch stays full and the choice depends only on index.
  for (int tries = 1; tries <= kMaxConsecutiveBadImages && tries < size_; ++tries) {
    bad_images_skipped_.fetch_add(1);
    std::string next_why;
    if (try_read((index + tries) % size_, hwc_out, &next_why)) return;
  }
  fail("lsun: ", why, "; and the ", std::min<int64_t>(kMaxConsecutiveBadImages, size_ - 1),
       " values after it do not decode either: is this an LSUN image database?");
}

}  // namespace ge
