#include "train/checkpoint_set.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "ganengine/error.h"
#include "ganengine/safetensors.h"
#include "io/atomic_file.h"

namespace ge {

namespace {

std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string directory_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// The temporaries written so far. Any still there at the end (the set was not published, or a
// rename failed half-way) are removed; a renamed one is no longer under its temporary name.
class StagedFiles {
 public:
  StagedFiles() = default;
  StagedFiles(const StagedFiles&) = delete;
  StagedFiles& operator=(const StagedFiles&) = delete;
  ~StagedFiles() {
    for (const auto& entry : from_to_) ::unlink(entry.first.c_str());
  }
  void add(const std::string& temporary, const std::string& target) { from_to_.emplace_back(temporary, target); }
  void publish() const { rename_in_order(from_to_); }

 private:
  std::vector<std::pair<std::string, std::string>> from_to_;
};

}  // namespace

std::string new_checkpoint_id(int64_t global_step) {
  std::random_device entropy;
  char tag[32];
  std::snprintf(tag, sizeof tag, "%08x%08x", entropy(), entropy());
  return "step" + std::to_string(global_step) + "-" + tag;
}

void write_checkpoint_set(std::vector<CheckpointFile> files, const std::string& checkpoint_id) {
  if (files.empty()) return;
  std::string manifest;
  for (size_t i = 0; i + 1 < files.size(); ++i) manifest += (i ? "," : "") + base_name(files[i].path);
  files.back().metadata[kCheckpointFilesKey] = manifest;
  StagedFiles staged;
  for (CheckpointFile& f : files) {
    f.metadata[kCheckpointIdKey] = checkpoint_id;
    const std::string temporary = temporary_path_for(f.path);
    save_safetensors(temporary, f.tensors, f.metadata);
    staged.add(temporary, f.path);
  }
  staged.publish();
}

void verify_checkpoint_set(const std::string& state_path, const std::map<std::string, std::string>& state_metadata) {
  const auto id = state_metadata.find(kCheckpointIdKey);
  const auto listed = state_metadata.find(kCheckpointFilesKey);
  if (id == state_metadata.end() || listed == state_metadata.end()) return;
  size_t pos = 0;
  const std::string& names = listed->second;
  while (pos < names.size()) {
    const size_t end = std::min(names.find(',', pos), names.size());
    const std::string name = names.substr(pos, end - pos);
    pos = end + 1;
    if (name.empty() || name.find('/') != std::string::npos)
      fail(state_path, ": its list of checkpoint files is damaged (entry '", name, "')");
    const std::string path = directory_of(state_path) + name;
    if (!file_exists(path)) continue;  // deleted to save space: the state holds its own copy of the weights
    const auto meta = load_safetensors(path).metadata;
    const auto other = meta.find(kCheckpointIdKey);
    const std::string other_id = other == meta.end() ? "(none)" : other->second;
    if (other_id != id->second)
      fail("the checkpoint in ", directory_of(state_path).empty() ? "." : directory_of(state_path), " is mixed: ", path,
           " belongs to save ", other_id, " but ", state_path, " to save ", id->second,
           " (a save was interrupted, or a file was copied in). Resume needs only the training state: move ", path,
           " away to resume from ", state_path, ", or restore the matching file");
  }
}

}  // namespace ge
