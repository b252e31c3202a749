// `ganengine convert IN OUT.safetensors`: a state_dict from a .pth written by torch.save (or
// from a safetensors file) into the safetensors file our commands and PyTorch's safetensors
// library read. Tensors keep their names and dtypes; DataParallel's "module." prefix is dropped.
#include <cstdio>
#include <cxxopts.hpp>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "ganengine/safetensors.h"
#include "ganengine/state_dict.h"

namespace ge::cli {

int run_convert(int argc, char** argv) {
  cxxopts::Options o("ganengine convert",
                     "Convert a state_dict (.pth of torch.save, ZIP or legacy format) into a .safetensors file.");
  // clang-format off
  o.add_options()
    ("input", "the .pth (or .safetensors) to read", cxxopts::value<std::string>())
    ("output", "the .safetensors file to write", cxxopts::value<std::string>())
    ("h,help", "show this help");
  // clang-format on
  o.parse_positional({"input", "output"});
  o.positional_help("IN.pth OUT.safetensors");
  Arguments args = normalise_arguments(argc, argv, {});
  const std::optional<cxxopts::ParseResult> parsed = parse_command_line(o, args, "convert");
  if (!parsed) return 0;
  const cxxopts::ParseResult& r = *parsed;
  if (!r.count("input") || !r.count("output")) fail("expected two files: ganengine convert IN.pth OUT.safetensors");
  const std::string in = r["input"].as<std::string>();
  const std::string out = r["output"].as<std::string>();
  if (in == out) fail("convert ", in, " onto itself: give another output file");
  const nn::StateDict sd = nn::load_state_dict_file(in);
  save_safetensors(out, sd, {{"converted_from", in}});
  std::printf("wrote %zu tensors from %s to %s\n", sd.size(), in.c_str(), out.c_str());
  return 0;
}

}  // namespace ge::cli
