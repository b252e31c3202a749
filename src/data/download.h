// --download, as torchvision's download=True: fetch a dataset's official files into
// --dataroot when they are not there yet, check each against its published MD5, and unpack
// archives, so that open_dataset finds the files where it looks.
//
// Nothing half-written is ever left where a reader would take it for data: each file is
// fetched to "<file>.part" and renamed only after its MD5 matched; an archive is unpacked into
// a scratch directory whose files are moved into place only once all of it unpacked.
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

namespace ge {

// The environment variable naming a base URL that replaces a dataset's official mirrors
// (a local copy of the files, a proxy); the `mirror` parameter, when not empty, wins over it.
constexpr const char* kDatasetMirrorVariable = "GANENGINE_DATASET_MIRROR";

struct DownloadFile {
  std::string name;  // file name: on the server, relative to a mirror; locally, in `folder`
  std::string md5;   // published MD5, 32 lowercase hex digits
};

// Everything download_dataset needs to know about one dataset.
struct DownloadPlan {
  std::string dataset;               // for messages: "cifar10"
  std::vector<std::string> mirrors;  // base URLs, tried in order
  std::string folder;                // where the files go, relative to dataroot ("" for dataroot)
  std::vector<DownloadFile> files;
  bool extract = false;  // files are .tar.gz archives to unpack into dataroot
  // Nothing is done when, for one of these alternatives, all its paths (relative to
  // dataroot) exist; after a download the first alternative must exist.
  std::vector<std::vector<std::string>> present_when;
};

// The official plan of a dataset whose registry entry has one (dataset_registry.h: cifar10's
// binary version, mnist, fashion-mnist), with the mirrors and MD5s torchvision uses. Throws
// ge::Error for a dataset with no download.
DownloadPlan official_download_plan(const std::string& dataset);
bool dataset_has_download(const std::string& dataset);

// Makes dataroot hold the plan's dataset: creates dataroot if needed, does nothing when the
// dataset is present, otherwise fetches each file (kept when already there with the right
// MD5), then unpacks. mirror: see kDatasetMirrorVariable. Progress lines go to log when not
// null. Throws ge::Error with the URL and the reason (HTTP status, MD5 mismatch naming
// expected and actual, corrupt archive) after trying every mirror.
void download_dataset(const DownloadPlan& plan, const std::string& dataroot, const std::string& mirror = "",
                      std::ostream* log = nullptr);
void download_dataset(const std::string& dataset, const std::string& dataroot, const std::string& mirror = "",
                      std::ostream* log = nullptr);

}  // namespace ge
