// A checkpoint set: the epoch's netG and netD weights and the training state, published so that
// a reader never mixes files of two saves. Every file is first written whole to its temporary
// beside the target; only when all are on disk are they renamed over the targets, the training
// state last. A failure while writing (a full disk) therefore leaves the previous set as it
// was. Each file's metadata carries the save's checkpoint id, and the state lists the files
// of its set (the manifest), so a set that is still mixed (a rename failed half-way, a file
// copied in from elsewhere) is detected at resume and the mismatching file named.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "ganengine/tensor.h"

namespace ge {

struct CheckpointFile {
  std::string path;
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;
};

// Metadata keys: the id every file of a set carries, and the state's list of the other files
// (names relative to the state's directory, comma-separated).
constexpr const char* kCheckpointIdKey = "checkpoint_id";
constexpr const char* kCheckpointFilesKey = "checkpoint_files";

// An id no other save of this or another run shares: the global step plus a random tag.
std::string new_checkpoint_id(int64_t global_step);

// Writes the set; the last file is the training state, which gets the manifest. Each file's
// directory must be the state's. Throws ge::Error (and leaves no temporary) when a write fails.
void write_checkpoint_set(std::vector<CheckpointFile> files, const std::string& checkpoint_id);

// At resume: each file the state's manifest lists must, where it still exists beside the state,
// carry the state's checkpoint id; otherwise a ge::Error names the file and both saves. A state
// without a manifest (written by --checkpoint-every mid-epoch, or by an older version) passes.
void verify_checkpoint_set(const std::string& state_path, const std::map<std::string, std::string>& state_metadata);

}  // namespace ge
