// `ganengine export --netG FILE -o g.onnx`: the generator as an ONNX model (src/io/onnx_generator.h)
// for onnxruntime and other inference engines. The weights are first loaded into our own
// generator, so a file that does not fit a DCGAN generator fails here with the same message as
// generate gives, and what is exported is what generate runs (BatchNorm's running statistics).
#include <cstdio>
#include <cxxopts.hpp>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "core/backend.h"
#include "ganengine/state_dict.h"
#include "io/atomic_file.h"
#include "io/onnx_generator.h"

namespace ge::cli {

int run_export(int argc, char** argv) {
  cxxopts::Options o("ganengine export", "Export a trained generator as an ONNX model (batch size left free).");
  // clang-format off
  o.add_options()
    ("netG", "generator weights: .safetensors or a .pth written by torch.save", cxxopts::value<std::string>())
    ("o,output", "the .onnx file to write", cxxopts::value<std::string>())
    ("opset", "ONNX operator set (17..23)", cxxopts::value<std::string>()->default_value("17"))
    ("h,help", "show this help");
  // clang-format on
  Arguments args = normalise_arguments(argc, argv, {{"net-g", "netG"}});
  const std::optional<cxxopts::ParseResult> parsed = parse_command_line(o, args, "export");
  if (!parsed) return 0;
  const cxxopts::ParseResult& r = *parsed;
  if (!r.count("netG")) fail("--netG FILE is required (generator weights: .safetensors or .pth)");
  if (!r.count("output")) fail("-o FILE.onnx is required");
  const std::string path = r["netG"].as<std::string>();
  const std::string output = r["output"].as<std::string>();
  const int opset = int_flag(r, "opset", "17..23");
  if (opset < 17 || opset > 23) fail("--opset ", opset, " (expected 17..23)");

  const nn::StateDict file = nn::load_state_dict_file(path);
  const nn::NetConfig cfg = nn::infer_generator_config(file, path);
  const PrecisionPolicy policy = resolve_policy(OptLevel::O0);
  auto G = nn::make_generator(cfg, policy, nn::Placement::for_device(Device::cpu(), policy.compute_dtype));
  nn::load_state_dict(*G, file, path);
  const onnx::Graph graph = onnx::generator_graph(nn::state_dict(*G), cfg, path);
  write_file_atomically(output, onnx::encode_model(graph, opset, version()));
  std::printf("wrote %s: generator z (N, %lld, 1, 1) -> image (N, %lld, %d, %d), opset %d\n", output.c_str(),
              static_cast<long long>(cfg.nz), static_cast<long long>(cfg.nc), cfg.image_size, cfg.image_size, opset);
  return 0;
}

}  // namespace ge::cli
