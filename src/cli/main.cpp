// ganengine: the command-line entry point. Each subcommand lives in its own file.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "cli/commands.h"
#include "cli/error_text.h"
#include "ganengine/error.h"

namespace {

void print_usage() {
  std::printf(
      "ganengine %s — DCGAN training on cuDNN, cuBLAS and hand-written CUDA kernels\n\n"
      "usage: ganengine <command> [options]\n\n"
      "commands:\n"
      "  train      train the DCGAN (Apex main_amp.py's flags; --opt-level O0..O4)\n"
      "  generate   images from a trained generator\n"
      "  bench      ms/step, images/s and TFLOP/s of the training step on the GPU\n"
      "  bench-data images/s of the input pipeline for a dataset\n"
      "  convert    a PyTorch .pth state_dict into a .safetensors file\n"
      "  export     a generator as an ONNX model\n"
      "  info       build configuration and the devices this machine offers\n"
      "\nRun 'ganengine <command> --help' for a command's options.\n",
      ge::cli::version());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  try {
    if (cmd == "--version") {
      std::printf("ganengine %s\n", ge::cli::version());
      return 0;
    }
    if (cmd == "train") return ge::cli::run_train(argc - 1, argv + 1);
    if (cmd == "generate") return ge::cli::run_generate(argc - 1, argv + 1);
    if (cmd == "bench") return ge::cli::run_bench(argc - 1, argv + 1);
    if (cmd == "bench-data") return ge::cli::run_bench_data(argc - 1, argv + 1);
    if (cmd == "info") return ge::cli::run_info(argc - 1, argv + 1);
    if (cmd == "convert") return ge::cli::run_convert(argc - 1, argv + 1);
    if (cmd == "export") return ge::cli::run_export(argc - 1, argv + 1);
    std::fprintf(
        stderr,
        "ganengine: unknown command '%s' (expected train, generate, bench, bench-data, convert, export or info). See "
        "'ganengine --help'.\n",
        cmd.c_str());
    return 2;
  } catch (const ge::Error& e) {
    std::fprintf(stderr, "ganengine %s: error: %s\n", cmd.c_str(), ge::cli::error_text_for_user(e.what()).c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ganengine %s: error: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}
