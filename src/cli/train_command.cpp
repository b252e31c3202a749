// `ganengine train`: main_amp.py's flags (camelCase as the example spells them, kebab-case too)
// plus ours, validated into TrainOptions.
#include <cstdio>
#include <cstring>
#include <cxxopts.hpp>
#include <map>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "cli/resume_settings.h"
#include "core/backend.h"
#include "core/cpu_backend.h"
#include "core/process_group.h"
#include "data/dataset_registry.h"
#include "ganengine/data.h"
#include "ganengine/train_loop.h"

namespace ge::cli {

namespace {

bool parse_bool(const std::string& flag, const std::string& v) {
  if (v == "True" || v == "true" || v == "1" || v == "yes") return true;
  if (v == "False" || v == "false" || v == "0" || v == "no") return false;
  fail(flag, " '", v, "' (expected True or False)");
}

std::vector<std::pair<int64_t, int>> parse_force_overflow(const std::string& spec) {
  // "STEP:LOSS[,STEP:LOSS...]": a test hook that makes loss LOSS (0 errD_real, 1 errD_fake,
  // 2 errG) overflow at global step STEP.
  std::vector<std::pair<int64_t, int>> out;
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t end = spec.find(',', pos);
    std::string item = spec.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    size_t colon = item.find(':');
    char* e1 = nullptr;
    char* e2 = nullptr;
    long long s = colon == std::string::npos ? -1 : std::strtoll(item.c_str(), &e1, 10);
    long l = colon == std::string::npos ? -1 : std::strtol(item.c_str() + colon + 1, &e2, 10);
    if (colon == std::string::npos || e1 != item.c_str() + colon || *e2 != '\0' || s < 0 || l < 0 || l > 2)
      fail("--debug-force-overflow '", spec, "' (expected STEP:LOSS[,STEP:LOSS...] with LOSS 0, 1 or 2)");
    out.emplace_back(s, static_cast<int>(l));
    pos = end == std::string::npos ? spec.size() : end + 1;
  }
  return out;
}

// "A:B" -> the first and last global step (0-based, inclusive) of the profiler's window.
std::pair<int64_t, int64_t> parse_profile_steps(const std::string& spec) {
  const size_t colon = spec.find(':');
  char* e1 = nullptr;
  char* e2 = nullptr;
  const long long a = colon == std::string::npos ? -1 : std::strtoll(spec.c_str(), &e1, 10);
  const long long b = colon == std::string::npos ? -1 : std::strtoll(spec.c_str() + colon + 1, &e2, 10);
  if (colon == std::string::npos || colon == 0 || e1 != spec.c_str() + colon || e2 == spec.c_str() + colon + 1 ||
      *e2 != '\0' || a < 0 || b < a)
    fail("--profile-steps '", spec, "' (expected A:B, the first and last step to profile, 0 <= A <= B, e.g. 10:14)");
  return {a, b};
}

// --checkpoint-every: "N" steps, "Ns", "Nm" or "Nh" of training time, "0" for epoch ends only.
void parse_checkpoint_every(const std::string& spec, TrainOptions& opt) {
  char* end = nullptr;
  const long long n = std::strtoll(spec.c_str(), &end, 10);
  const std::string unit = end ? end : "";
  const bool digits = !spec.empty() && end != spec.c_str() && spec[0] != '-' && spec[0] != '+';
  if (!digits || n < 0 || (unit != "" && unit != "s" && unit != "m" && unit != "h") || n > (1LL << 40))
    fail("--checkpoint-every '", spec,
         "' (expected N steps, or a time such as 90s, 10m or 2h; 0 saves at epoch ends only)");
  opt.checkpoint_every_steps = unit.empty() ? n : 0;
  const double seconds_per_unit = unit == "s" ? 1 : unit == "m" ? 60 : 3600;
  opt.checkpoint_every_seconds = unit.empty() ? 0 : static_cast<double>(n) * seconds_per_unit;
}

// Every flag of the command with the value it has in this run: as given, else its default
// ("true"/"false" for switches), in the order --help lists them.
std::vector<std::pair<std::string, std::string>> flag_values(const cxxopts::Options& o, const cxxopts::ParseResult& r) {
  std::map<std::string, std::string> given;
  for (const auto& kv : r.arguments()) given[kv.key()] = kv.value();
  std::vector<std::pair<std::string, std::string>> out;
  for (const char* group : {"main_amp.py", "ganengine"})
    for (const auto& d : o.group_help(group).options) {
      const std::string name = d.l.empty() ? d.s : d.l.front();
      if (name == "help") continue;
      auto it = given.find(name);
      if (it != given.end())
        out.emplace_back(name, d.is_boolean && it->second.empty() ? "true" : it->second);
      else
        out.emplace_back(name, d.has_default ? d.default_value : (d.is_boolean ? "false" : ""));
    }
  return out;
}

}  // namespace

int run_train(int argc, char** argv) {
  cxxopts::Options o(
      "ganengine train",
      "Train the DCGAN of Apex's examples/dcgan/main_amp.py. Flags keep the example's names and "
      "defaults;\nkebab-case spellings work too (--batch-size, --image-size, --opt-level, --manual-seed).");
  // clang-format off
  o.add_options("main_amp.py")
    ("dataset", dataset_choices(), cxxopts::value<std::string>()->default_value("cifar10"))
    ("dataroot", "path to dataset", cxxopts::value<std::string>()->default_value("./"))
    ("workers", "number of data loading threads", cxxopts::value<int>()->default_value("2"))
    ("batchSize", "input batch size", cxxopts::value<int64_t>()->default_value("64"))
    ("imageSize", "height/width of the images (a power of two, 16..512)", cxxopts::value<int>()->default_value("64"))
    ("nz", "size of the latent z vector", cxxopts::value<int64_t>()->default_value("100"))
    ("ngf", "generator width", cxxopts::value<int64_t>()->default_value("64"))
    ("ndf", "discriminator width", cxxopts::value<int64_t>()->default_value("64"))
    ("niter", "number of epochs to train for", cxxopts::value<int>()->default_value("25"))
    ("lr", "learning rate", cxxopts::value<double>()->default_value("0.0002"))
    ("beta1", "beta1 for adam", cxxopts::value<double>()->default_value("0.5"))
    ("ngpu", "GPUs to train on, from --device's on: each takes an equal share of --batchSize, gradients averaged with NCCL", cxxopts::value<int>()->default_value("1"))
    ("sync-bn", "with several GPUs: BatchNorm statistics over the whole global batch (PyTorch's SyncBatchNorm) instead of per replica")
    ("check-replicas", "with --ngpu > 1: check after every step that all replicas hold bitwise the same weights (slow; for debugging)")
    ("netG", "generator weights to continue from (.safetensors, or a .pth of torch.save)", cxxopts::value<std::string>()->default_value(""))
    ("netD", "discriminator weights to continue from (.safetensors, or a .pth of torch.save)", cxxopts::value<std::string>()->default_value(""))
    ("outf", "folder to output images and model checkpoints", cxxopts::value<std::string>()->default_value("."))
    ("manualSeed", "manual seed", cxxopts::value<uint64_t>()->default_value("2809"))
    ("classes", "comma separated list of classes for the lsun data set", cxxopts::value<std::string>()->default_value("bedroom"))
    ("opt_level", "Apex opt level: O0 (fp32) | O1 (mixed) | O2 (half model, fp32 masters) | O3 (pure half)", cxxopts::value<std::string>()->default_value("O1"));
  o.add_options("ganengine")
    ("device", "cpu | cpu-reference | cuda | cuda:K (default: the GPU when there is one, else the CPU with a warning; cpu runs oneDNN, cpu-reference the plain reference loops)", cxxopts::value<std::string>()->default_value(""))
    ("threads", "CPU compute threads (default 0: OMP_NUM_THREADS when set, else every core)", cxxopts::value<int>()->default_value("0"))
    ("half", "what half precision means: fp16 | bf16 (bf16 runs without loss scaling)", cxxopts::value<std::string>()->default_value("fp16"))
    ("keep-batchnorm-fp32", "Apex override: BatchNorm params in fp32 (True/False)", cxxopts::value<std::string>()->implicit_value("True"))
    ("master-weights", "Apex override: fp32 master weights for half models (True/False)", cxxopts::value<std::string>()->implicit_value("True"))
    ("loss-scale", "Apex override: dynamic | <value>", cxxopts::value<std::string>())
    ("min-loss-scale", "floor of the dynamic loss scale; reaching it stops training", cxxopts::value<float>()->default_value("1.52587890625e-05"))
    ("tf32", "let O0's fp32 convolutions use TF32 (off: O0 is true fp32)")
    ("log-interval", "print and log every N iterations", cxxopts::value<int>()->default_value("1"))
    ("sample-interval", "write sample grids every N iterations", cxxopts::value<int>()->default_value("100"))
    ("max-steps", "stop after N steps in total (the epoch's samples and weights are still written); -1: no limit", cxxopts::value<int64_t>()->default_value("-1"))
    ("resume", "continue exactly from a training_state.safetensors, with the settings it records (flags given with it may change only --niter, --max-steps, the intervals, --workers and paths)", cxxopts::value<std::string>()->default_value(""))
    ("overwrite", "start a new run in an --outf that holds another run's training state, replacing its files")
    ("checkpoint-every", "also save the training state inside epochs: every N steps, or every Ns / Nm / Nh of training; 0: only at epoch ends", cxxopts::value<std::string>()->default_value("10m"))
    ("print-precision", "print the dtype each layer stores and computes in, then exit")
    ("no-progress", "no progress line on the terminal")
    ("no-tensorboard", "write no TensorBoard event files (default: under <outf>/tb/, see `tensorboard --logdir <outf>/tb`)")
    ("ema-decay", "keep an exponential moving average of G's weights with this decay (e.g. 0.999), saved as netG_ema_epoch_N.safetensors and used for the sample grids; 0: off", cxxopts::value<double>()->default_value("0"))
    ("download", "fetch the dataset into --dataroot first (" + downloadable_datasets() + "), md5-checked")
    ("download-mirror", "base URL to download from (else $GANENGINE_DATASET_MIRROR, else the official sites)", cxxopts::value<std::string>()->default_value(""))
    ("skip-bad-images", "skip (and count) undecodable images instead of stopping")
    ("cache-dir", "keep decoded images of " + join_names(dataset_names(is_image_files), "/") + " here, reused while the source is unchanged", cxxopts::value<std::string>()->default_value(""))
    ("data-on", "auto | host | gpu: keep the decoded dataset on the GPU and build batches there (auto: when it fits)", cxxopts::value<std::string>()->default_value("auto"))
    ("debug-force-overflow", "test hook: STEP:LOSS[,...] makes loss LOSS (0,1,2) overflow at STEP", cxxopts::value<std::string>())
    ("cuda-graph", "GPU (the default there): after 3 eager warm-up steps, replay each training step as one captured CUDA graph (a batch of another size, like an epoch's last, runs eagerly)")
    ("no-cuda-graph", "run every step eagerly (same results, slower at small batches)")
    ("profile-steps", "A:B: start the CUDA profiler before global step A and stop it after step B (nsys --capture-range=cudaProfilerApi, ncu --profile-from-start off)", cxxopts::value<std::string>())
    ("h,help", "show this help");
  // clang-format on
  Arguments args = normalise_arguments(argc, argv,
                                       {{"batch-size", "batchSize"},
                                        {"image-size", "imageSize"},
                                        {"manual-seed", "manualSeed"},
                                        {"opt-level", "opt_level"},
                                        {"net-g", "netG"},
                                        {"net-d", "netD"},
                                        {"data-root", "dataroot"}},
                                       {"keep-batchnorm-fp32", "master-weights"});
  std::optional<cxxopts::ParseResult> parsed = parse_command_line(o, args, "train", {"main_amp.py", "ganengine"});
  if (!parsed) return 0;
  if (parsed->count("resume")) {  // the settings the state records fill in what was not given
    args = complete_resume_arguments(o, args, *parsed, (*parsed)["resume"].as<std::string>());
    args.finish();
    parsed = parse_command_line(o, args, "train", {"main_amp.py", "ganengine"});
  }
  const cxxopts::ParseResult& r = *parsed;

  TrainOptions opt;
  opt.dataset = r["dataset"].as<std::string>();
  opt.dataroot = r["dataroot"].as<std::string>();
  opt.workers = r["workers"].as<int>();
  opt.batch_size = r["batchSize"].as<int64_t>();
  opt.image_size = r["imageSize"].as<int>();
  opt.nz = r["nz"].as<int64_t>();
  opt.ngf = r["ngf"].as<int64_t>();
  opt.ndf = r["ndf"].as<int64_t>();
  opt.niter = r["niter"].as<int>();
  opt.lr = r["lr"].as<double>();
  opt.beta1 = r["beta1"].as<double>();
  opt.ngpu = r["ngpu"].as<int>();
  opt.check_replicas = r.count("check-replicas") > 0;
  opt.sync_bn = r.count("sync-bn") > 0;
  opt.netG = r["netG"].as<std::string>();
  opt.netD = r["netD"].as<std::string>();
  opt.outf = r["outf"].as<std::string>();
  opt.manual_seed = r["manualSeed"].as<uint64_t>();
  opt.classes = r["classes"].as<std::string>();
  opt.opt_level = parse_opt_level(r["opt_level"].as<std::string>());
  const std::string half = r["half"].as<std::string>();
  if (half == "fp16" || half == "f16")
    opt.amp.half = DType::F16;
  else if (half == "bf16")
    opt.amp.half = DType::BF16;
  else
    fail("--half '", half, "' (expected fp16 or bf16)");
  if (r.count("keep-batchnorm-fp32"))
    opt.amp.keep_batchnorm_fp32 = parse_bool("--keep-batchnorm-fp32", r["keep-batchnorm-fp32"].as<std::string>());
  if (r.count("master-weights"))
    opt.amp.master_weights = parse_bool("--master-weights", r["master-weights"].as<std::string>());
  if (r.count("loss-scale")) opt.amp.loss_scale = r["loss-scale"].as<std::string>();
  opt.amp.min_loss_scale = r["min-loss-scale"].as<float>();
  if (!(opt.amp.min_loss_scale > 0)) fail("--min-loss-scale must be positive");
  opt.amp.allow_tf32 = r.count("tf32") > 0;
  opt.log_interval = r["log-interval"].as<int>();
  opt.sample_interval = r["sample-interval"].as<int>();
  opt.max_steps = r["max-steps"].as<int64_t>();
  if (opt.max_steps < -1) fail("--max-steps ", opt.max_steps, " (expected a number of steps >= 0, or -1 for no limit)");
  opt.resume = r["resume"].as<std::string>();
  opt.overwrite = r.count("overwrite") > 0;
  parse_checkpoint_every(r["checkpoint-every"].as<std::string>(), opt);
  opt.progress = r.count("no-progress") == 0;
  opt.tensorboard = r.count("no-tensorboard") == 0;
  opt.ema_decay = r["ema-decay"].as<double>();
  if (!(opt.ema_decay >= 0 && opt.ema_decay < 1))
    fail("--ema-decay ", opt.ema_decay, " (expected 0 <= decay < 1: 0 turns the average off, 0.999 is typical)");
  opt.version = version();
  opt.flag_values = flag_values(o, r);
  opt.download = r.count("download") > 0;
  opt.download_mirror = r["download-mirror"].as<std::string>();
  opt.skip_bad_images = r.count("skip-bad-images") > 0;
  opt.cache_dir = r["cache-dir"].as<std::string>();
  opt.data_on = parse_data_placement(r["data-on"].as<std::string>());
  if (r.count("debug-force-overflow"))
    opt.force_overflow = parse_force_overflow(r["debug-force-overflow"].as<std::string>());
  if (r.count("profile-steps")) opt.profile_steps = parse_profile_steps(r["profile-steps"].as<std::string>());
  if (r.count("cuda-graph") && r.count("no-cuda-graph")) fail("--cuda-graph and --no-cuda-graph contradict each other");
  const bool graph_asked = r.count("cuda-graph") > 0;
  if (graph_asked && !opt.force_overflow.empty())
    fail(
        "--debug-force-overflow changes steps from the host, which a replayed CUDA graph cannot do: drop --cuda-graph");
  if (opt.workers < 0 || opt.workers > 256) fail("--workers ", opt.workers, " (expected 0..256)");
  if (!(opt.lr >= 0) || opt.lr > 1)
    fail("--lr ", opt.lr, " (expected a learning rate in [0, 1], the example's is 0.0002)");
  if (!(opt.beta1 >= 0 && opt.beta1 < 1))
    fail("--beta1 ", opt.beta1, " (expected 0 <= beta1 < 1, the example's is 0.5)");

  // Under a multi-process launcher the topology's own message (drop --ngpu) is the one to give.
  if (opt.ngpu > 1 && r["device"].as<std::string>().empty() && !cuda_available() && detect_process_group().size == 1)
    fail("--ngpu ", opt.ngpu, " trains on ", opt.ngpu, " GPUs, but there is no usable GPU here",
         built_with_cuda() ? "" : " (this build has no CUDA)", "; use --ngpu 1 to train on the CPU");
  opt.device = resolve_device(r["device"].as<std::string>(), "train", /*warn_on_cpu=*/true);
  set_cpu_threads(r["threads"].as<int>());
  set_cpu_bf16_compute(true);  // bf16 convolutions in bf16 where the CPU has it (core/cpu_backend.h)
  if (graph_asked && !opt.device.is_cuda())
    fail("--cuda-graph needs a CUDA device (training runs on ", opt.device.str(), ")");
  // On by default on a GPU; the forced-overflow test hook needs host decisions, so it runs eagerly.
  opt.cuda_graph = opt.device.is_cuda() && r.count("no-cuda-graph") == 0 && opt.force_overflow.empty();
  // Sizes are checked before any data is touched, so a typo fails at once.
  nn::NetConfig net;
  net.image_size = opt.image_size;
  net.nz = opt.nz;
  net.ngf = opt.ngf;
  net.ndf = opt.ndf;
  nn::validate(net);
  const PrecisionPolicy policy = resolve_policy(opt.opt_level, opt.amp);  // checks the overrides
  (void)policy;
  if (!opt.download) require_dataroot(opt.dataset, opt.dataroot, /*offer_download=*/true);
  for (const auto* flag : {&opt.netG, &opt.netD}) {
    if (flag->empty()) continue;
    std::FILE* f = std::fopen(flag->c_str(), "rb");
    if (!f)
      fail(flag == &opt.netG ? "--netG" : "--netD", " '", *flag, "': cannot open it (", std::strerror(errno), ")");
    std::fclose(f);
  }
  if (r.count("print-precision")) {
    print_precision(opt, dataset_channels(opt.dataset));
    return 0;
  }
  return run_training(opt);
}

}  // namespace ge::cli
