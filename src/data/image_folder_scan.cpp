// torchvision's ImageFolder discovery, reproduced for its order:
//   classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
//   for each class: for dirpath, _, files in sorted(os.walk(root/class, followlinks=True)):
//                       for f in sorted(files): keep f if it has an image extension
// is_dir() follows symlinks, so linked directories are classes and are walked into; anything
// else (files, links to files, broken links) counts as a file. Unreadable subdirectories are
// skipped, as os.walk skips them. Unlike os.walk we visit a directory once even when symlinks
// form a loop.
#include "data/image_folder_scan.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <system_error>

#include "ganengine/error.h"

namespace ge {

namespace fs = std::filesystem;

namespace {

const char* const kImageExtensions[] = {".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"};

std::string extension_list() {
  std::string list;
  for (const char* e : kImageExtensions) list += (list.empty() ? "" : " ") + std::string(e);
  return list;
}

struct DirectoryEntries {
  std::vector<std::string> dirs, files;  // names, sorted
};

DirectoryEntries read_directory(const fs::path& dir, std::error_code& ec) {
  DirectoryEntries out;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    const bool is_dir = fs::is_directory(it->path(), type_ec);  // follows symlinks, like is_dir()
    (is_dir ? out.dirs : out.files).push_back(it->path().filename().string());
  }
  std::sort(out.dirs.begin(), out.dirs.end());
  std::sort(out.files.begin(), out.files.end());
  return out;
}

// Every directory under top (top included) with its file names, in os.walk's discovery.
void walk(const fs::path& dir, std::set<std::pair<dev_t, ino_t>>& visited,
          std::vector<std::pair<std::string, std::vector<std::string>>>& found) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !visited.insert({st.st_dev, st.st_ino}).second) return;
  std::error_code ec;
  DirectoryEntries entries = read_directory(dir, ec);
  if (ec) return;
  found.emplace_back(dir.string(), std::move(entries.files));
  for (const std::string& sub : entries.dirs) walk(dir / sub, visited, found);
}

}  // namespace

bool has_image_extension(const std::string& file_name) {
  std::string lower = file_name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  for (const char* e : kImageExtensions) {
    const size_t n = std::char_traits<char>::length(e);
    if (lower.size() >= n && lower.compare(lower.size() - n, n, e) == 0) return true;
  }
  return false;
}

ImageFolderListing list_image_folder(const std::string& dataroot, const std::string& dataset) {
  const std::string layout =
      "expected the ImageFolder layout " + (fs::path(dataroot) / "<class>" / "<image>.jpg").string() +
      ": one subdirectory per class (any name; a single class is fine) with the images inside it "
      "or below it";
  if (dataroot.empty())
    fail("--dataset ", dataset, " needs --dataroot: the directory that holds the class directories");
  std::error_code ec;
  if (!fs::exists(dataroot, ec)) fail("--dataset ", dataset, ": --dataroot ", dataroot, " does not exist; ", layout);
  if (!fs::is_directory(dataroot, ec))
    fail("--dataset ", dataset, ": --dataroot ", dataroot, " is not a directory; ", layout);

  const DirectoryEntries top = read_directory(dataroot, ec);
  if (ec) fail("--dataset ", dataset, ": cannot list --dataroot ", dataroot, " (", ec.message(), ")");
  ImageFolderListing listing;
  listing.classes = top.dirs;
  if (listing.classes.empty()) {
    size_t images = 0;
    for (const std::string& f : top.files) images += has_image_extension(f);
    fail("--dataset ", dataset, ": no class directories in ", dataroot, " (found ", top.files.size(), " files, ",
         images, " of them images, and 0 subdirectories); ", layout);
  }

  std::vector<std::string> empty_classes;
  size_t files_seen = 0;
  for (size_t c = 0; c < listing.classes.size(); ++c) {
    std::vector<std::pair<std::string, std::vector<std::string>>> dirs;
    std::set<std::pair<dev_t, ino_t>> visited;  // per class: two classes may share a linked tree
    walk(fs::path(dataroot) / listing.classes[c], visited, dirs);
    std::sort(dirs.begin(), dirs.end());  // sorted(os.walk(...)): by directory path
    const size_t before = listing.images.size();
    for (const auto& [dir, files] : dirs) {
      files_seen += files.size();
      for (const std::string& f : files)
        if (has_image_extension(f)) listing.images.emplace_back((fs::path(dir) / f).string(), int(c));
    }
    if (listing.images.size() == before) empty_classes.push_back(listing.classes[c]);
  }
  if (!empty_classes.empty()) {
    std::string names;
    for (const std::string& n : empty_classes) names += (names.empty() ? "" : ", ") + n;
    fail("--dataset ", dataset, ": found no image in the class directories ", names, " of ", dataroot, " (",
         listing.classes.size(), " class directories, ", files_seen, " files in all; image extensions are ",
         extension_list(), "); ", layout);
  }
  return listing;
}

}  // namespace ge
