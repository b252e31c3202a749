// Finding an ImageFolder's images the way torchvision does (find_classes + make_dataset),
// private to src/data.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace ge {

struct ImageFolderListing {
  std::vector<std::string> classes;                 // sorted
  std::vector<std::pair<std::string, int>> images;  // (path, class index), torchvision's order
};

// Throws ge::Error when dataroot is not a directory, holds no class directory, or a class
// holds no image; the message names `dataset` (the --dataset name) and shows the layout.
ImageFolderListing list_image_folder(const std::string& dataroot, const std::string& dataset);

// torchvision's IMG_EXTENSIONS test on a file name, ignoring case.
bool has_image_extension(const std::string& file_name);

}  // namespace ge
