// Command-line normalisation shared by the subcommands: alternative spellings of a flag are
// rewritten to the one the parser knows.
#pragma once
#include <cstdint>
#include <cxxopts.hpp>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ganengine/data_pipeline.h"
#include "ganengine/dtype.h"

namespace ge::cli {

class Arguments {
 public:
  int argc() const { return static_cast<int>(ptrs_.size()); }
  char** argv() { return ptrs_.data(); }
  std::vector<std::string> words;
  void finish();

 private:
  std::vector<char*> ptrs_;
};

// --device for a command: "" means the GPU when there is one, else the CPU (with a warning on
// stderr when warn_on_cpu); "cuda[:k]" without a usable GPU is an error that says so. "cpu" runs
// CPU ops on the fast backend, "cpu-reference" on the reference loops (core/cpu_backend.h).
Device resolve_device(const std::string& spec, const char* command, bool warn_on_cpu);
// Where --device left out resolves: GPU 0 when one is usable, else the CPU.
Device default_device();

// For the commands' --help, from the dataset registry: every --dataset name as
// "cifar10 | lsun | ...", and those --download fetches as "cifar10, mnist, ...".
std::string dataset_choices();
std::string downloadable_datasets();

// Before any data is read: --dataroot must be a directory for every --dataset that reads files
// (the registry's reads_files: all but fake) and, where the command offers --download, the
// error says it is there for the datasets it fetches.
void require_dataroot(const std::string& dataset, const std::string& dataroot, bool offer_download);

// The input pipeline's flags as bench-data and bench declare them (--dataset, --dataroot,
// --classes, --workers, --data-on, --cache-dir, --skip-bad-images) into its options; --workers
// must be 0..256.
DataPipelineOptions read_data_flags(const cxxopts::ParseResult& r);

// A numeric flag's value: the flag is declared as text (cxxopts::value<std::string>) and read by
// cli/numeric_flag.h, since cxxopts' own readers wrap integers around (4294967360 reads as 64 for
// an int) and stop before trailing garbage ("0.5x" reads as 0.5). `name` is the flag without
// dashes, the error names it with them; `expected` says what it takes.
int int_flag(const cxxopts::ParseResult& r, const std::string& name, const std::string& expected);
int64_t int64_flag(const cxxopts::ParseResult& r, const std::string& name, const std::string& expected);
uint64_t uint64_flag(const cxxopts::ParseResult& r, const std::string& name, const std::string& expected);
double real_flag(const cxxopts::ParseResult& r, const std::string& name, const std::string& expected);

// aliases: spelling without dashes -> canonical name without dashes. boolean_flags: options
// with an implicit value that may be followed by a separate True/False word.
Arguments normalise_arguments(int argc, const char* const* argv, const std::map<std::string, std::string>& aliases,
                              const std::set<std::string>& boolean_flags = {});

// Parses a subcommand's normalised arguments. A parse error or a stray argument fails, pointing
// at 'ganengine <command> --help'. With --help it prints the help (these groups in this order;
// all when none are named) and returns nothing: the command then exits 0.
std::optional<cxxopts::ParseResult> parse_command_line(cxxopts::Options& options, Arguments& args, const char* command,
                                                       const std::vector<std::string>& help_groups = {});

}  // namespace ge::cli
