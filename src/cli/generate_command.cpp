// `ganengine generate`: images from a saved generator. The network's shape (nz, ngf, nc,
// imageSize) is read off the weights, so only the file is needed.
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cxxopts.hpp>
#include <filesystem>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "core/backend.h"
#include "ganengine/image_grid.h"
#include "ganengine/safetensors.h"
#include "ganengine/state_dict.h"
#include "io/atomic_file.h"

namespace ge::cli {

namespace {

enum class OutputKind { Grid, Directory };

std::string lower_extension(const std::string& path) {
  const std::string name = std::filesystem::path(path).filename().string();
  const size_t dot = name.rfind('.');
  std::string ext = dot == std::string::npos || dot == 0 ? "" : name.substr(dot);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

// -o: an image extension means one grid file (PNG or JPEG by extension), anything else a
// directory of one PNG per image. A clash with what is already there is an error, not a
// directory named "out.jpg" or a file overwritten by a directory.
OutputKind output_kind(const std::string& output) {
  const std::string ext = lower_extension(output);
  std::error_code ec;
  const bool is_dir = std::filesystem::is_directory(output, ec);
  const bool exists = std::filesystem::exists(output, ec);
  for (const char* other : {".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm", ".pgm", ".tga"})
    if (ext == other)
      fail("-o ", output, ": generate writes a grid as .png or .jpg (or a directory of PNGs), not ", ext);
  if (ext == ".png" || ext == ".jpg" || ext == ".jpeg") {
    if (is_dir)
      fail("-o ", output, " is an existing directory, but its ", ext,
           " extension asks for one grid image; remove it or name another file");
    return OutputKind::Grid;  // save_image_grid picks PNG or JPEG by the extension
  }
  if (exists && !is_dir)
    fail("-o ", output, " exists and is not a directory; give a directory for one PNG per image, or a .png or .jpg ",
         "file for a grid");
  return OutputKind::Directory;
}

bool is_float_dtype(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64; }

// NaN or infinite noise gives images of NaN, which PNG stores as black: said, not refused, as
// such noise may be what is being examined.
void warn_non_finite(const Tensor& noise, const std::string& path) {
  int64_t bad = 0;
  for (double v : noise.to_doubles()) bad += std::isfinite(v) ? 0 : 1;
  if (bad > 0)
    std::fprintf(stderr,
                 "ganengine generate: warning: %s: %lld of the %lld noise values are NaN or infinite; the images "
                 "made from them will not be finite\n",
                 path.c_str(), static_cast<long long>(bad), static_cast<long long>(noise.numel()));
}

}  // namespace

int run_generate(int argc, char** argv) {
  cxxopts::Options o("ganengine generate", "Generate images with a trained generator (netG_epoch_*.safetensors).");
  // clang-format off
  o.add_options()
    ("netG", "generator weights: .safetensors (PyTorch state_dict names) or a .pth written by torch.save", cxxopts::value<std::string>())
    ("n,num", "number of images", cxxopts::value<std::string>()->default_value("64"))
    ("seed", "seed of the noise (Philox, as in training)", cxxopts::value<std::string>()->default_value("2809"))
    ("noise", "take the noise from this .safetensors file (tensor 'noise', N x nz x 1 x 1) instead", cxxopts::value<std::string>())
    ("o,output", "a .png or .jpg file for one 8-wide grid, or a directory for one PNG per image", cxxopts::value<std::string>())
    ("save-tensor", "also write the images (f32, [-1, 1]) and noise to this .safetensors file", cxxopts::value<std::string>())
    ("bn-batch-stats", "BatchNorm with the batch's statistics (training mode) instead of the running ones")
    ("device", "cpu | cuda | cuda:K (default: the GPU when there is one)", cxxopts::value<std::string>()->default_value(""))
    ("h,help", "show this help");
  // clang-format on
  Arguments args = normalise_arguments(argc, argv, {{"net-g", "netG"}});
  const std::optional<cxxopts::ParseResult> parsed = parse_command_line(o, args, "generate");
  if (!parsed) return 0;
  const cxxopts::ParseResult& r = *parsed;
  if (!r.count("netG"))
    fail("--netG FILE is required (a netG_epoch_*.safetensors written by ganengine train, or a torch.save .pth)");
  if (!r.count("output")) fail("-o FILE.png, -o FILE.jpg or -o DIR is required");
  const std::string path = r["netG"].as<std::string>();
  const std::string output = r["output"].as<std::string>();
  const OutputKind output_as = output_kind(output);
  // Checked before the weights are read, so that a typo fails at once.
  const int64_t n = int64_flag(r, "n", "1..100000");
  if (n < 1 || n > 100000) fail("-n ", n, " (expected 1..100000)");
  const uint64_t seed = uint64_flag(r, "seed", "a seed in 0..18446744073709551615");
  const Device device = resolve_device(r["device"].as<std::string>(), "generate", /*warn_on_cpu=*/false);

  const nn::StateDict sd = nn::load_state_dict_file(path);
  const nn::NetConfig cfg = nn::infer_generator_config(sd, path);
  const PrecisionPolicy policy = resolve_policy(OptLevel::O0);
  auto G = nn::make_generator(cfg, policy, nn::Placement::for_device(device, policy.compute_dtype));
  nn::load_state_dict(*G, sd, path);

  Tensor noise;
  if (r.count("noise")) {
    const std::string npath = r["noise"].as<std::string>();
    auto f = load_safetensors(npath);
    auto it = f.tensors.find("noise");
    if (it == f.tensors.end()) fail(npath, " has no tensor named 'noise'");
    noise = it->second;
    if (!is_float_dtype(noise.dtype()))
      fail(npath, ": 'noise' is ", noise.str(), ", expected floating point (f32, f16, bf16 or f64) noise");
    if (noise.rank() == 2) noise = noise.reshape({noise.dim(0), noise.dim(1), 1, 1});
    if (noise.rank() != 4 || noise.dim(1) != cfg.nz || noise.dim(2) != 1 || noise.dim(3) != 1)
      fail(npath, ": 'noise' is ", noise.str(), ", expected N x ", cfg.nz, " x 1 x 1 for this generator");
    if (noise.dim(0) < 1) fail(npath, ": 'noise' holds no vectors (", noise.str(), "), expected at least one");
    warn_non_finite(noise, npath);
    noise = ops::converted(noise, DType::F32, MemoryFormat::NCHW, device);
  } else {
    noise = Tensor::empty({n, cfg.nz, 1, 1}, DType::F32, device);
    ops::fill_normal(noise, seed, 0);
  }
  const bool batch_stats = r.count("bn-batch-stats") > 0;
  if (batch_stats && noise.dim(0) < 2) fail("--bn-batch-stats needs at least 2 images");
  Tensor images = G->forward(noise, batch_stats);

  if (output_as != OutputKind::Directory) {
    save_image_grid(images, output);
  } else {
    ensure_directory(output);
    const int64_t n = images.dim(0);
    Tensor host = ops::converted(images, DType::F32, MemoryFormat::NCHW, Device::cpu());
    for (int64_t i = 0; i < n; ++i) {
      char name[32];
      std::snprintf(name, sizeof name, "/%06lld.png", static_cast<long long>(i));
      save_image(host.slice0(i, i + 1), output + name);
    }
  }
  if (r.count("save-tensor"))
    save_safetensors(r["save-tensor"].as<std::string>(),
                     {{"images", ops::converted(images, DType::F32, MemoryFormat::NCHW, Device::cpu())},
                      {"noise", noise.to(Device::cpu())}},
                     {{"netG", path}, {"bn", batch_stats ? "batch statistics" : "running statistics"}});
  std::printf("wrote %lld images (%dx%d, %lld channels) to %s\n", static_cast<long long>(images.dim(0)), cfg.image_size,
              cfg.image_size, static_cast<long long>(cfg.nc), output.c_str());
  return 0;
}

}  // namespace ge::cli
