#include "train/output_folder.h"

#include <cstdio>
#include <filesystem>
#include <system_error>

#include "ganengine/error.h"
#include "io/atomic_file.h"

namespace ge {

namespace {

std::string state_path_in(const std::string& outf) {
  if (outf.empty() || outf == ".") return "training_state.safetensors";
  return outf.back() == '/' ? outf + "training_state.safetensors" : outf + "/training_state.safetensors";
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  return std::filesystem::equivalent(a, b, ec) && !ec;
}

}  // namespace

void prepare_output_folder(const TrainOptions& opt) {
  const std::string state = state_path_in(opt.outf);
  std::error_code ec;
  if (std::filesystem::exists(state, ec) && !opt.overwrite && !(!opt.resume.empty() && same_file(opt.resume, state)))
    fail("--outf ", opt.outf, " already holds a run's training state (", state, "): continue that run with --resume ",
         state, ", or pass --overwrite to start a new run there");
  const std::vector<std::string> removed = remove_stale_temporaries(opt.outf);
  if (removed.empty()) return;
  std::string names;
  for (size_t i = 0; i < removed.size() && i < 5; ++i) names += (i ? ", " : "") + removed[i];
  if (removed.size() > 5) names += ", ...";
  std::fprintf(stderr, "ganengine train: removed %zu unfinished file%s a killed run left in %s: %s\n", removed.size(),
               removed.size() == 1 ? "" : "s", opt.outf.c_str(), names.c_str());
}

}  // namespace ge
