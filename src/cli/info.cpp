// `ganengine info`: what this build can do here, and a smoke test of each backend.
#include <cstdio>

#include "cli/commands.h"
#include "core/backend.h"
#include "core/cpu_backend.h"
#include "core/process_group.h"
#include "core/tuning_policy.h"
#include "ganengine/system_info.h"

#include <random>

namespace ge::cli {

const char* version() { return "0.1.0"; }

int run_info(int, char**) {
  std::printf("ganengine %s\n", version());
  for (const auto& line : system_info_lines()) std::printf("%s\n", line.c_str());
  // `--device cpu` runs the fast backend; `--device cpu-reference` the loops every test checks.
  std::printf("cpu backend (--device cpu): %s\n", describe_cpu_backend().c_str());
  std::printf("cpu features: %s\n", describe_cpu_features().c_str());
  std::printf("tuning policy (GANENGINE_TUNING=key=value,... overrides; docs/performance.md):\n");
  for (const auto& line : tuning().describe()) std::printf("  %s\n", line.c_str());
  std::printf("convolution paths, tried in order (the first that applies runs the pass):\n");
  for (const auto& line : gpu::describe_conv_paths()) std::printf("  %s\n", line.c_str());
  // Under mpirun (or GANENGINE_RANK ...): check the launch before training does, by sharing a
  // random id from rank 0 the way training shares NCCL's; every rank prints the same fingerprint.
  const ProcessGroupInfo pg = detect_process_group();
  if (pg.size > 1) {
    const NcclUniqueId id = share_unique_id(pg, [] {
      NcclUniqueId made{};
      std::random_device rd;
      for (char& c : made) c = static_cast<char>(rd());
      return made;
    });
    uint32_t fingerprint = 2166136261u;  // FNV-1a
    for (char c : id) fingerprint = (fingerprint ^ static_cast<unsigned char>(c)) * 16777619u;
    std::printf("process group: rank %d of %d (%s), local rank %d; rank 0's id reached this rank: fingerprint %08x\n",
                pg.rank, pg.size, pg.launcher.c_str(), pg.local_rank, fingerprint);
  }
  return 0;
}

}  // namespace ge::cli
