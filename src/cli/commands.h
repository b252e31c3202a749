// The subcommands of the ganengine program; each returns the process exit code.
#pragma once

namespace ge::cli {
const char* version();
int run_info(int argc, char** argv);
int run_train(int argc, char** argv);
int run_generate(int argc, char** argv);
int run_bench_data(int argc, char** argv);
int run_bench(int argc, char** argv);
int run_convert(int argc, char** argv);
int run_export(int argc, char** argv);
}  // namespace ge::cli
