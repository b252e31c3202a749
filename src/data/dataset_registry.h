// The datasets ganengine knows, in one table: the name --dataset takes, the channels of its
// images, how it is opened, what --download fetches for it, and which of the input pipeline's
// options apply to it. open_dataset, --download, the data pipeline and the CLI's help and
// checks all read this table; nothing else decides by a dataset's name.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/download.h"
#include "ganengine/data.h"

namespace ge {

// What a dataset's factory is given (open_dataset's arguments).
struct DatasetRequest {
  std::string name;  // the entry's name (the folder-like datasets serve it as their name())
  std::string dataroot;
  int image_size = 64;
  std::string classes;  // --classes, for lsun
  uint64_t seed = 0;    // for fake, whose images are a function of it
  bool skip_bad_images = false;
};

struct DatasetEntry {
  const char* name;  // as --dataset spells it
  int channels;      // of every image it serves, known before any file is read
  std::unique_ptr<Dataset> (*open)(const DatasetRequest&);
  // The official files --download fetches (plan.dataset left empty); null: no download.
  DownloadPlan (*download_plan)();
  bool reads_files;  // it reads files under --dataroot (all but fake)
  bool image_files;  // decoded from image files: --cache-dir applies, --skip-bad-images matters

  bool downloadable() const { return download_plan != nullptr; }
};

// Every dataset, in the order help and errors list them: the reference's --dataset choices in
// its help text's order, then ganengine's additions.
const std::vector<DatasetEntry>& dataset_registry();

// The entry called `name`, or null.
const DatasetEntry* find_dataset(const std::string& name);
// The same, but an unknown name throws ge::Error listing the known ones.
const DatasetEntry& dataset_entry(const std::string& name);

// The names of the entries `keep` accepts (every entry when null), in the registry's order.
std::vector<std::string> dataset_names(bool (*keep)(const DatasetEntry&) = nullptr);

// names joined by separator, the last two by last_separator when that is given:
// ({"a", "b", "c"}, ", ", " and ") -> "a, b and c".
std::string join_names(const std::vector<std::string>& names, const std::string& separator,
                       const std::string& last_separator = "");

// Filters for dataset_names.
inline bool is_downloadable(const DatasetEntry& e) { return e.downloadable(); }
inline bool is_image_files(const DatasetEntry& e) { return e.image_files; }

}  // namespace ge
