#include "train/skipped_images.h"

#include "data/dataset_cache.h"
#include "ganengine/lsun_dataset.h"

namespace ge {

namespace {

constexpr size_t kNamesShown = 3;

const Dataset& underlying(const Dataset& d) {
  const auto* cached = dynamic_cast<const CachedDataset*>(&d);
  return cached ? cached->source() : d;
}

}  // namespace

std::string skipped_images_summary(const Dataset& dataset, bool at_end) {
  const Dataset& d = underlying(dataset);
  int64_t count = 0;
  std::string names;
  if (const auto* folder = dynamic_cast<const ImageFolderDataset*>(&d)) {
    if (at_end) {
      count = folder->failed_at_read();
    } else {
      const auto& excluded = folder->excluded_at_scan();
      count = static_cast<int64_t>(excluded.size());
      for (size_t i = 0; i < excluded.size() && i < kNamesShown; ++i) names += "\n  " + excluded[i];
      if (excluded.size() > kNamesShown) names += "\n  ...";
    }
  } else if (const auto* lsun = dynamic_cast<const LsunDataset*>(&d)) {
    if (at_end) count = lsun->bad_images_skipped();
  }
  if (count == 0) return "";
  return "ganengine train: --skip-bad-images: " + std::to_string(count) + " image" + (count == 1 ? "" : "s") +
         (at_end ? " found undecodable while training (each replaced by the next good image)"
                 : " left out of " + std::to_string(d.size() + count) + " because they do not decode:") +
         names;
}

}  // namespace ge
