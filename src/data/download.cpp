// download_dataset: the fetch -> verify -> rename -> unpack sequence that never leaves a
// partial file in place. The official files of each dataset are in its registry entry.
#include "data/download.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <ostream>
#include <system_error>

#include "data/dataset_registry.h"
#include "data/http_fetch.h"
#include "data/md5.h"
#include "data/tar_gz.h"
#include "ganengine/error.h"
#include "io/atomic_file.h"

namespace ge {
namespace {

namespace fs = std::filesystem;

std::string join_url(const std::string& base, const std::string& name) {
  return base.empty() || base.back() == '/' ? base + name : base + "/" + name;
}

bool path_exists(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

void remove_quietly(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
}

// The mirrors to try: the caller's, else the environment's, else the plan's own.
std::vector<std::string> mirrors_for(const DownloadPlan& plan, const std::string& mirror) {
  if (!mirror.empty()) return {mirror};
  const char* env = std::getenv(kDatasetMirrorVariable);
  if (env && *env) return {env};
  return plan.mirrors;
}

// Fetches one file from the first mirror that serves it with the right MD5. On every failure
// the .part file is removed; dest appears only complete and verified.
void fetch_verified(const DownloadPlan& plan, const DownloadFile& file, const fs::path& dest,
                    const std::vector<std::string>& mirrors, std::ostream* log) {
  const fs::path part = dest.string() + ".part";
  std::string errors;
  for (const std::string& base : mirrors) {
    const std::string url = join_url(base, file.name);
    if (log) *log << "Downloading " << url << " to " << dest.string() << std::endl;
    try {
      fetch_url_to_file(url, part.string());
      const std::string actual = md5_of_file(part.string());
      if (actual != file.md5)
        fail("cannot download ", url, ": MD5 mismatch: expected ", file.md5, ", got ", actual,
             " (a damaged download, or not the file published for ", plan.dataset, ")");
      std::error_code ec;
      fs::rename(part, dest, ec);
      if (ec)
        fail("cannot download ", url, ": cannot rename ", part.string(), " to ", dest.string(), ": ", ec.message());
      return;
    } catch (const Error& e) {
      remove_quietly(part);
      errors += std::string("\n  ") + e.what();
    }
  }
  fail(plan.dataset, ": cannot download ", file.name, " from any mirror:", errors, "\n(set ", kDatasetMirrorVariable,
       " to a base URL that serves ", file.name, ", or put the file into ", dest.parent_path().string(), " by hand)");
}

// Moves every file under from into the same place under to, replacing what is there.
void move_tree(const fs::path& from, const fs::path& to) {
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(from)) {
    const fs::path target = to / fs::relative(entry.path(), from);
    std::error_code ec;
    if (entry.is_directory()) {
      fs::create_directories(target, ec);
    } else {
      fs::rename(entry.path(), target, ec);
    }
    if (ec) fail("cannot move ", entry.path().string(), " to ", target.string(), ": ", ec.message());
  }
}

// Unpacks archive into a scratch directory beside the data, checks that it holds what the
// plan expects, and only then moves its files into place.
void unpack(const DownloadPlan& plan, const fs::path& archive, const fs::path& dataroot, std::ostream* log) {
  const fs::path scratch =
      dataroot / (".ganengine-unpack-" + archive.filename().string() + "." + std::to_string(::getpid()));
  if (log) *log << "Extracting " << archive.string() << " to " << dataroot.string() << std::endl;
  remove_quietly(scratch);
  try {
    ensure_directory(scratch.string());
    extract_tar_gz(archive.string(), scratch.string());
    std::string missing;
    for (const std::string& p : plan.present_when.empty() ? std::vector<std::string>{} : plan.present_when.front())
      if (!path_exists(scratch / p) && !path_exists(dataroot / p)) missing += "\n  " + p;
    if (!missing.empty())
      fail(plan.dataset, ": ", archive.string(), " does not hold the expected files; missing:", missing);
    move_tree(scratch, dataroot);
  } catch (...) {
    remove_quietly(scratch);
    throw;
  }
  remove_quietly(scratch);
}

bool all_present(const fs::path& dataroot, const std::vector<std::string>& paths) {
  for (const std::string& p : paths)
    if (!path_exists(dataroot / p)) return false;
  return true;
}

}  // namespace

DownloadPlan official_download_plan(const std::string& dataset) {
  const DatasetEntry* entry = find_dataset(dataset);
  if (!entry || !entry->downloadable())
    fail("--download: no download for --dataset '", dataset, "'; ganengine downloads ",
         join_names(dataset_names(is_downloadable), ", ", " and "),
         " (put the other datasets under --dataroot by hand)");
  DownloadPlan plan = entry->download_plan();
  plan.dataset = dataset;
  return plan;
}

bool dataset_has_download(const std::string& dataset) {
  const DatasetEntry* entry = find_dataset(dataset);
  return entry && entry->downloadable();
}

void download_dataset(const DownloadPlan& plan, const std::string& dataroot, const std::string& mirror,
                      std::ostream* log) {
  const fs::path root = dataroot.empty() ? fs::path(".") : fs::path(dataroot);
  ensure_directory(root.string());
  for (const auto& alternative : plan.present_when)
    if (all_present(root, alternative)) {
      if (log) *log << plan.dataset << ": files already present in " << root.string() << std::endl;
      return;
    }

  const fs::path folder = plan.folder.empty() ? root : root / plan.folder;
  ensure_directory(folder.string());
  const std::vector<std::string> mirrors = mirrors_for(plan, mirror);
  for (const DownloadFile& file : plan.files) {
    const fs::path dest = folder / file.name;
    if (path_exists(dest) && md5_of_file(dest.string()) == file.md5) {
      if (log) *log << "Using " << dest.string() << " (already downloaded and verified)" << std::endl;
    } else {
      fetch_verified(plan, file, dest, mirrors, log);
    }
    if (plan.extract) unpack(plan, dest, root, log);
  }
  if (!plan.present_when.empty() && !all_present(root, plan.present_when.front())) {
    std::string missing;
    for (const std::string& p : plan.present_when.front())
      if (!path_exists(root / p)) missing += "\n  " + (root / p).string();
    fail(plan.dataset, ": the downloaded files do not hold what was expected; missing:", missing);
  }
}

void download_dataset(const std::string& dataset, const std::string& dataroot, const std::string& mirror,
                      std::ostream* log) {
  download_dataset(official_download_plan(dataset), dataroot, mirror, log);
}

}  // namespace ge
