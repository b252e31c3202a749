#include "cli/train_flags.h"

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cstdlib>
#include <cxxopts.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "cli/numeric_flag.h"
#include "cli/resume_settings.h"
#include "core/checked_size.h"
#include "data/dataset_registry.h"
#include "ganengine/amp.h"
#include "ganengine/error.h"
#include "ganengine/nn.h"
#include "train/training_noise.h"

namespace ge::cli {

namespace {

bool parse_bool(const std::string& flag, const std::string& v) {
  if (v == "True" || v == "true" || v == "1" || v == "yes") return true;
  if (v == "False" || v == "false" || v == "0" || v == "no") return false;
  fail(flag, " '", v, "' (expected True or False)");
}

int parse_int(const std::string& flag, const std::string& text, const std::string& expected) {
  return static_cast<int>(parse_integer_flag(flag, text, INT_MIN, INT_MAX, expected));
}

// A count written in plain decimal digits (no sign, no 0x) of at most `max`; nothing otherwise.
std::optional<int64_t> plain_count(const std::string& text, int64_t max) {
  if (text.empty()) return std::nullopt;
  int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9' || __builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, c - '0', &v))
      return std::nullopt;
  }
  if (v > max) return std::nullopt;
  return v;
}

std::vector<std::pair<int64_t, int>> parse_force_overflow(const std::string& spec) {
  // "STEP:LOSS[,STEP:LOSS...]": a test hook that makes loss LOSS (0 errD_real, 1 errD_fake,
  // 2 errG) overflow at global step STEP.
  std::vector<std::pair<int64_t, int>> out;
  auto refuse = [&] {
    fail("--debug-force-overflow '", spec, "' (expected STEP:LOSS[,STEP:LOSS...] with LOSS 0, 1 or 2)");
  };
  if (spec.empty()) refuse();
  size_t pos = 0;
  while (pos <= spec.size()) {
    const size_t end = std::min(spec.find(',', pos), spec.size());
    const std::string item = spec.substr(pos, end - pos);
    const size_t colon = item.find(':');
    if (colon == std::string::npos) refuse();
    const auto step = plain_count(item.substr(0, colon), INT64_MAX);
    const auto loss = plain_count(item.substr(colon + 1), 2);
    if (!step || !loss) refuse();
    out.emplace_back(*step, static_cast<int>(*loss));
    pos = end + 1;
  }
  return out;
}

// "A:B" -> the first and last global step (0-based, inclusive) of the profiler's window.
std::pair<int64_t, int64_t> parse_profile_steps(const std::string& spec) {
  const size_t colon = spec.find(':');
  const auto a = colon == std::string::npos ? std::nullopt : plain_count(spec.substr(0, colon), INT64_MAX);
  const auto b = colon == std::string::npos ? std::nullopt : plain_count(spec.substr(colon + 1), INT64_MAX);
  if (!a || !b || *b < *a)
    fail("--profile-steps '", spec, "' (expected A:B, the first and last step to profile, 0 <= A <= B, e.g. 10:14)");
  return {*a, *b};
}

// --checkpoint-every: "N" steps, "Ns", "Nm" or "Nh" of training time, "0" for epoch ends only.
void parse_checkpoint_every(const std::string& spec, TrainOptions& opt) {
  const char last = spec.empty() ? '\0' : spec.back();
  const bool timed = last == 's' || last == 'm' || last == 'h';
  const auto n = plain_count(timed ? spec.substr(0, spec.size() - 1) : spec, int64_t(1) << 40);
  if (!n)
    fail("--checkpoint-every '", spec,
         "' (expected N steps, or a time such as 90s, 10m or 2h; 0 saves at epoch ends only)");
  opt.checkpoint_every_steps = timed ? 0 : *n;
  const double seconds_per_unit = last == 's' ? 1 : last == 'm' ? 60 : 3600;
  opt.checkpoint_every_seconds = timed ? static_cast<double>(*n) * seconds_per_unit : 0;
}

// --loss-scale: "dynamic" or a positive number a float holds (the scale is applied in f32).
void check_loss_scale(const std::string& v) {
  if (v == "dynamic") return;
  const double scale = is_decimal_number(v) ? std::strtod(v.c_str(), nullptr) : 0;
  if (!(scale <= FLT_MAX && static_cast<float>(scale) > 0))
    fail("--loss-scale '", v, "' (expected 'dynamic' or a positive number such as 128)");
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

// Numeric flags are declared as text and read by cli/numeric_flag.h: cxxopts' own readers
// wrap integers around (4294967360 reads as 64 for an int) and take "0.5x" as 0.5.
cxxopts::Options train_options() {
  cxxopts::Options o(
      "ganengine train",
      "Train the DCGAN of Apex's examples/dcgan/main_amp.py. Flags keep the example's names and "
      "defaults;\nkebab-case spellings work too (--batch-size, --image-size, --opt-level, --manual-seed).");
  auto number = [](const char* default_value) { return cxxopts::value<std::string>()->default_value(default_value); };
  // clang-format off
  o.add_options("main_amp.py")
    ("dataset", dataset_choices(), cxxopts::value<std::string>()->default_value("cifar10"))
    ("dataroot", "path to dataset", cxxopts::value<std::string>()->default_value("./"))
    ("workers", "number of data loading threads", number("2"))
    ("batchSize", "input batch size", number("64"))
    ("imageSize", "height/width of the images (a power of two, 16..512)", number("64"))
    ("nz", "size of the latent z vector", number("100"))
    ("ngf", "generator width", number("64"))
    ("ndf", "discriminator width", number("64"))
    ("niter", "number of epochs to train for", number("25"))
    ("lr", "learning rate", number("0.0002"))
    ("beta1", "beta1 for adam", number("0.5"))
    ("ngpu", "GPUs to train on, from --device's on: each takes an equal share of --batchSize, gradients averaged with NCCL", number("1"))
    ("sync-bn", "with several GPUs: BatchNorm statistics over the whole global batch (PyTorch's SyncBatchNorm) instead of per replica")
    ("check-replicas", "with --ngpu > 1: check after every step that all replicas hold bitwise the same weights (slow; for debugging)")
    ("netG", "generator weights to continue from (.safetensors, or a .pth of torch.save)", cxxopts::value<std::string>()->default_value(""))
    ("netD", "discriminator weights to continue from (.safetensors, or a .pth of torch.save)", cxxopts::value<std::string>()->default_value(""))
    ("outf", "folder to output images and model checkpoints", cxxopts::value<std::string>()->default_value("."))
    ("manualSeed", "manual seed", number("2809"))
    ("classes", "comma separated list of classes for the lsun data set", cxxopts::value<std::string>()->default_value("bedroom"))
    ("opt_level", "Apex opt level: O0 (fp32) | O1 (mixed) | O2 (half model, fp32 masters) | O3 (pure half) | O4 (O2 with FP8 convolution operands, E4M3 forward and E5M2 gradients; on Hopper D's second and G's fourth layer on FP8 Tensor Cores, D's and G's third layers' forwards and input gradients too, the other passes in half on operands rounded to FP8)", cxxopts::value<std::string>()->default_value("O1"));
  o.add_options("ganengine")
    ("device", "cpu | cpu-reference | cuda | cuda:K (default: the GPU when there is one, else the CPU with a warning; cpu runs oneDNN, cpu-reference the plain reference loops)", cxxopts::value<std::string>()->default_value(""))
    ("threads", "CPU compute threads (default 0: OMP_NUM_THREADS when set, else every core)", number("0"))
    ("half", "what half precision means: fp16 | bf16 (bf16 runs without loss scaling)", cxxopts::value<std::string>()->default_value("fp16"))
    ("keep-batchnorm-fp32", "Apex override: BatchNorm params in fp32 (True/False)", cxxopts::value<std::string>()->implicit_value("True"))
    ("master-weights", "Apex override: fp32 master weights for half models (True/False)", cxxopts::value<std::string>()->implicit_value("True"))
    ("loss-scale", "Apex override: dynamic | <value>", cxxopts::value<std::string>())
    ("min-loss-scale", "floor of the dynamic loss scale; reaching it stops training", number("1.52587890625e-05"))
    ("tf32", "let O0's fp32 convolutions use TF32 (off: O0 is true fp32)")
    ("log-interval", "print and log every N iterations", number("1"))
    ("sample-interval", "write sample grids every N iterations", number("100"))
    ("max-steps", "stop after N steps in total (the epoch's samples and weights are still written); -1: no limit", number("-1"))
    ("resume", "continue exactly from a training_state.safetensors, with the settings it records (flags given with it may change only --niter, --max-steps, the intervals, --workers and paths)", cxxopts::value<std::string>()->default_value(""))
    ("overwrite", "start a new run in an --outf that holds another run's training state, replacing its files")
    ("checkpoint-every", "also save the training state inside epochs: every N steps, or every Ns / Nm / Nh of training; 0: only at epoch ends", cxxopts::value<std::string>()->default_value("10m"))
    ("print-precision", "print the dtype each layer stores and computes in, then exit")
    ("no-progress", "no progress line on the terminal")
    ("no-tensorboard", "write no TensorBoard event files (default: under <outf>/tb/, see `tensorboard --logdir <outf>/tb`)")
    ("ema-decay", "keep an exponential moving average of G's weights with this decay (e.g. 0.999), saved as netG_ema_epoch_N.safetensors and used for the sample grids; 0: off", number("0"))
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
  return o;
}

// The size flags, checked before any memory is sized by them.
void check_sizes(const TrainOptions& opt) {
  if (opt.batch_size < 1) fail("--batchSize ", opt.batch_size, " (expected a positive number)");
  nn::NetConfig net;
  net.image_size = opt.image_size;
  net.nz = opt.nz;
  net.ngf = opt.ngf;
  net.ndf = opt.ndf;
  nn::validate(net);
  const int64_t noise_values = checked_mul(opt.batch_size, opt.nz, "--batchSize x --nz (noise values per step)");
  if (noise_values > kMaxNoiseValuesPerStep)
    fail("--batchSize x --nz is too large (", noise_values, " noise values per step, at most ", kMaxNoiseValuesPerStep,
         ": with --nz ", opt.nz, ", --batchSize at most ", kMaxNoiseValuesPerStep / opt.nz, ")");
  // Four channels is the most any image has (nn::validate's nc).
  checked_product({opt.batch_size, 4, opt.image_size, opt.image_size},
                  "--batchSize x channels x --imageSize x --imageSize (values in a batch)");
}

TrainOptions read_options(const cxxopts::Options& o, const cxxopts::ParseResult& r) {
  auto text = [&](const char* name) { return r[name].as<std::string>(); };
  TrainOptions opt;
  opt.dataset = text("dataset");
  opt.dataroot = text("dataroot");
  opt.workers = parse_int("--workers", text("workers"), "0..256");
  if (opt.workers < 0 || opt.workers > 256) fail("--workers ", opt.workers, " (expected 0..256)");
  opt.batch_size = parse_integer_flag("--batchSize", text("batchSize"), INT64_MIN, INT64_MAX, "a positive number");
  opt.image_size = parse_int("--imageSize", text("imageSize"), "a power of two from 16 to 512");
  opt.nz = parse_integer_flag("--nz", text("nz"), INT64_MIN, INT64_MAX, "1..100000");
  opt.ngf = parse_integer_flag("--ngf", text("ngf"), INT64_MIN, INT64_MAX, "1..4096");
  opt.ndf = parse_integer_flag("--ndf", text("ndf"), INT64_MIN, INT64_MAX, "1..4096");
  check_sizes(opt);
  opt.niter = parse_int("--niter", text("niter"), "a number of epochs, at least 1");
  if (opt.niter < 1) fail("--niter ", opt.niter, " (expected at least 1)");
  opt.lr = parse_real_flag("--lr", text("lr"), "a learning rate in [0, 1], the example's is 0.0002");
  if (!(opt.lr >= 0) || opt.lr > 1)
    fail("--lr ", opt.lr, " (expected a learning rate in [0, 1], the example's is 0.0002)");
  opt.beta1 = parse_real_flag("--beta1", text("beta1"), "0 <= beta1 < 1, the example's is 0.5");
  if (!(opt.beta1 >= 0 && opt.beta1 < 1))
    fail("--beta1 ", opt.beta1, " (expected 0 <= beta1 < 1, the example's is 0.5)");
  opt.ngpu = parse_int("--ngpu", text("ngpu"), "1..64");
  if (opt.ngpu < 1 || opt.ngpu > 64) fail("--ngpu ", opt.ngpu, " (expected 1..64)");
  opt.check_replicas = r.count("check-replicas") > 0;
  opt.sync_bn = r.count("sync-bn") > 0;
  opt.netG = text("netG");
  opt.netD = text("netD");
  opt.outf = text("outf");
  opt.manual_seed = parse_unsigned_flag("--manualSeed", text("manualSeed"), "a seed in 0..18446744073709551615");
  opt.classes = text("classes");
  opt.opt_level = parse_opt_level(text("opt_level"));
  const std::string half = text("half");
  if (half == "fp16" || half == "f16")
    opt.amp.half = DType::F16;
  else if (half == "bf16")
    opt.amp.half = DType::BF16;
  else
    fail("--half '", half, "' (expected fp16 or bf16)");
  if (r.count("keep-batchnorm-fp32"))
    opt.amp.keep_batchnorm_fp32 = parse_bool("--keep-batchnorm-fp32", text("keep-batchnorm-fp32"));
  if (r.count("master-weights")) opt.amp.master_weights = parse_bool("--master-weights", text("master-weights"));
  if (r.count("loss-scale")) {
    check_loss_scale(text("loss-scale"));
    opt.amp.loss_scale = text("loss-scale");
  }
  const double min_loss_scale =
      parse_real_flag("--min-loss-scale", text("min-loss-scale"), "a positive number a float holds", FLT_MAX);
  opt.amp.min_loss_scale = static_cast<float>(min_loss_scale);
  if (!(opt.amp.min_loss_scale > 0))
    fail("--min-loss-scale ", text("min-loss-scale"), " must be positive (and at least ", FLT_TRUE_MIN,
         ", the smallest positive float)");
  opt.amp.allow_tf32 = r.count("tf32") > 0;
  opt.log_interval = parse_int("--log-interval", text("log-interval"), "a number of iterations, at least 1");
  if (opt.log_interval < 1) fail("--log-interval ", opt.log_interval, " (expected at least 1)");
  opt.sample_interval = parse_int("--sample-interval", text("sample-interval"), "a number of iterations, at least 1");
  if (opt.sample_interval < 1) fail("--sample-interval ", opt.sample_interval, " (expected at least 1)");
  opt.max_steps = parse_integer_flag("--max-steps", text("max-steps"), INT64_MIN, INT64_MAX,
                                     "a number of steps >= 0, or -1 for no limit");
  if (opt.max_steps < -1) fail("--max-steps ", opt.max_steps, " (expected a number of steps >= 0, or -1 for no limit)");
  opt.resume = text("resume");
  opt.overwrite = r.count("overwrite") > 0;
  parse_checkpoint_every(text("checkpoint-every"), opt);
  opt.progress = r.count("no-progress") == 0;
  opt.tensorboard = r.count("no-tensorboard") == 0;
  opt.ema_decay = parse_real_flag("--ema-decay", text("ema-decay"), "0 <= decay < 1: 0 turns the average off");
  if (!(opt.ema_decay >= 0 && opt.ema_decay < 1))
    fail("--ema-decay ", opt.ema_decay, " (expected 0 <= decay < 1: 0 turns the average off, 0.999 is typical)");
  opt.version = version();
  opt.flag_values = flag_values(o, r);
  opt.download = r.count("download") > 0;
  opt.download_mirror = text("download-mirror");
  opt.skip_bad_images = r.count("skip-bad-images") > 0;
  opt.cache_dir = text("cache-dir");
  opt.data_on = parse_data_placement(text("data-on"));
  if (r.count("debug-force-overflow")) opt.force_overflow = parse_force_overflow(text("debug-force-overflow"));
  if (r.count("profile-steps")) opt.profile_steps = parse_profile_steps(text("profile-steps"));
  (void)resolve_policy(opt.opt_level, opt.amp);  // checks the Apex overrides together
  return opt;
}

}  // namespace

std::optional<TrainFlags> parse_train_flags(int argc, const char* const* argv) {
  cxxopts::Options o = train_options();
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
  if (!parsed) return std::nullopt;
  if (parsed->count("resume")) {  // the settings the state records fill in what was not given
    args = complete_resume_arguments(o, args, *parsed, (*parsed)["resume"].as<std::string>());
    args.finish();
    parsed = parse_command_line(o, args, "train", {"main_amp.py", "ganengine"});
  }
  const cxxopts::ParseResult& r = *parsed;

  TrainFlags flags;
  flags.options = read_options(o, r);
  const TrainOptions& opt = flags.options;
  flags.device = r["device"].as<std::string>();
  flags.threads = parse_int("--threads", r["threads"].as<std::string>(), "a count of threads, 0: every core");
  if (flags.threads < 0) fail("--threads ", flags.threads, " (expected a count of threads, 0: every core)");
  flags.cuda_graph = r.count("cuda-graph") > 0;
  flags.no_cuda_graph = r.count("no-cuda-graph") > 0;
  flags.print_precision = r.count("print-precision") > 0;
  if (flags.cuda_graph && flags.no_cuda_graph) fail("--cuda-graph and --no-cuda-graph contradict each other");
  if (flags.cuda_graph && !opt.force_overflow.empty())
    fail(
        "--debug-force-overflow changes steps from the host, which a replayed CUDA graph cannot do: drop --cuda-graph");
  return flags;
}

}  // namespace ge::cli
