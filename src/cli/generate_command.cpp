// `ganengine generate`: images from a saved generator. The network's shape (nz, ngf, nc,
// imageSize) is read off the weights, so only the file is needed.
#include <cstdio>
#include <cxxopts.hpp>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "core/backend.h"
#include "ganengine/image_grid.h"
#include "ganengine/safetensors.h"
#include "ganengine/state_dict.h"
#include "io/atomic_file.h"

namespace ge::cli {

namespace {

// main.0.weight is (nz, ngf*mult, 4, 4); the last ConvTranspose2d is (ngf, nc, 4, 4); with k
// transposed convolutions the image side is 2^(k+1).
nn::NetConfig infer_generator_config(const nn::StateDict& sd, const std::string& path) {
  auto first = sd.find("main.0.weight");
  if (first == sd.end() || first->second.rank() != 4)
    fail(path, " has no 4-D 'main.0.weight': not a DCGAN generator's state_dict");
  int transposed = 0;
  const Tensor* last = nullptr;
  for (int i = 0; i < 64; i += 3) {
    auto it = sd.find("main." + std::to_string(i) + ".weight");
    if (it == sd.end() || it->second.rank() != 4) break;
    ++transposed;
    last = &it->second;
  }
  nn::NetConfig cfg;
  cfg.nz = first->second.dim(0);
  cfg.ngf = last->dim(0);
  cfg.nc = last->dim(1);
  cfg.image_size = 1 << (transposed + 1);
  if (transposed < 3)
    fail(path, ": found ", transposed, " transposed convolutions; a DCGAN generator has at least 3 (16x16 images)");
  return cfg;
}

}  // namespace

int run_generate(int argc, char** argv) {
  cxxopts::Options o("ganengine generate", "Generate images with a trained generator (netG_epoch_*.safetensors).");
  // clang-format off
  o.add_options()
    ("netG", "generator weights (.safetensors, PyTorch state_dict names)", cxxopts::value<std::string>())
    ("n,num", "number of images", cxxopts::value<int64_t>()->default_value("64"))
    ("seed", "seed of the noise (Philox, as in training)", cxxopts::value<uint64_t>()->default_value("2809"))
    ("noise", "take the noise from this .safetensors file (tensor 'noise', N x nz x 1 x 1) instead", cxxopts::value<std::string>())
    ("o,output", "a .png file for one 8-wide grid, or a directory for one PNG per image", cxxopts::value<std::string>())
    ("save-tensor", "also write the images (f32, [-1, 1]) and noise to this .safetensors file", cxxopts::value<std::string>())
    ("bn-batch-stats", "BatchNorm with the batch's statistics (training mode) instead of the running ones")
    ("device", "cpu | cuda | cuda:K (default: the GPU when there is one)", cxxopts::value<std::string>()->default_value(""))
    ("h,help", "show this help");
  // clang-format on
  Arguments args = normalise_arguments(argc, argv, {{"net-g", "netG"}});
  const std::optional<cxxopts::ParseResult> parsed = parse_command_line(o, args, "generate");
  if (!parsed) return 0;
  const cxxopts::ParseResult& r = *parsed;
  if (!r.count("netG")) fail("--netG FILE is required (a netG_epoch_*.safetensors written by ganengine train)");
  if (!r.count("output")) fail("-o FILE.png or -o DIR is required");
  const std::string path = r["netG"].as<std::string>();
  const std::string output = r["output"].as<std::string>();
  const Device device = resolve_device(r["device"].as<std::string>(), "generate", /*warn_on_cpu=*/false);

  const nn::StateDict sd = load_safetensors(path).tensors;
  const nn::NetConfig cfg = infer_generator_config(sd, path);
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
    if (noise.rank() == 2) noise = noise.reshape({noise.dim(0), noise.dim(1), 1, 1});
    if (noise.rank() != 4 || noise.dim(1) != cfg.nz || noise.dim(2) != 1 || noise.dim(3) != 1)
      fail(npath, ": 'noise' is ", noise.str(), ", expected N x ", cfg.nz, " x 1 x 1 for this generator");
    noise = ops::converted(noise, DType::F32, MemoryFormat::NCHW, device);
  } else {
    const int64_t n = r["num"].as<int64_t>();
    if (n < 1 || n > 100000) fail("-n ", n, " (expected 1..100000)");
    noise = Tensor::empty({n, cfg.nz, 1, 1}, DType::F32, device);
    ops::fill_normal(noise, r["seed"].as<uint64_t>(), 0);
  }
  const bool batch_stats = r.count("bn-batch-stats") > 0;
  if (batch_stats && noise.dim(0) < 2) fail("--bn-batch-stats needs at least 2 images");
  Tensor images = G->forward(noise, batch_stats);

  const bool grid = output.size() > 4 && output.compare(output.size() - 4, 4, ".png") == 0;
  if (grid) {
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
