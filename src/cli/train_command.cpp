// `ganengine train`: main_amp.py's flags (camelCase as the example spells them, kebab-case too)
// plus ours, parsed and checked by cli/train_flags.h; here what depends on the machine (the
// device, the threads, the files named) and the run.
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "cli/out_of_memory.h"
#include "cli/train_flags.h"
#include "core/backend.h"
#include "core/cpu_backend.h"
#include "core/process_group.h"
#include "data/dataset_registry.h"
#include "ganengine/data.h"
#include "ganengine/train_loop.h"

namespace ge::cli {

int run_train(int argc, char** argv) {
  std::optional<TrainFlags> flags = parse_train_flags(argc, argv);
  if (!flags) return 0;  // --help
  TrainOptions& opt = flags->options;

  // Under a multi-process launcher the topology's own message (drop --ngpu) is the one to give.
  if (opt.ngpu > 1 && flags->device.empty() && !cuda_available() && detect_process_group().size == 1)
    fail("--ngpu ", opt.ngpu, " trains on ", opt.ngpu, " GPUs, but there is no usable GPU here",
         built_with_cuda() ? "" : " (this build has no CUDA)", "; use --ngpu 1 to train on the CPU");
  opt.device = resolve_device(flags->device, "train", /*warn_on_cpu=*/true);
  set_cpu_threads(flags->threads);
  set_cpu_bf16_compute(true);  // bf16 convolutions in bf16 where the CPU has it (core/cpu_backend.h)
  if (flags->cuda_graph && !opt.device.is_cuda())
    fail("--cuda-graph needs a CUDA device (training runs on ", opt.device.str(), ")");
  // On by default on a GPU; the forced-overflow test hook needs host decisions, so it runs eagerly.
  opt.cuda_graph = opt.device.is_cuda() && !flags->no_cuda_graph && opt.force_overflow.empty();
  if (!opt.download) require_dataroot(opt.dataset, opt.dataroot, /*offer_download=*/true);
  for (const auto* flag : {&opt.netG, &opt.netD}) {
    if (flag->empty()) continue;
    std::FILE* f = std::fopen(flag->c_str(), "rb");
    if (!f)
      fail(flag == &opt.netG ? "--netG" : "--netD", " '", *flag, "': cannot open it (", std::strerror(errno), ")");
    std::fclose(f);
  }
  check_bound_fits_host_memory(opt, channels_for_estimate(opt.dataset));
  if (flags->print_precision) {
    return naming_sizes_when_out_of_memory(opt, [&] {
      print_precision(opt, dataset_channels(opt.dataset));
      return 0;
    });
  }
  return naming_sizes_when_out_of_memory(opt, [&] { return run_training(opt); });
}

}  // namespace ge::cli
