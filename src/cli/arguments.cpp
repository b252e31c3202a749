#include "cli/arguments.h"

#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstdio>

#include "cli/numeric_flag.h"
#include "core/backend.h"
#include "core/cpu_backend.h"
#include "data/dataset_registry.h"
#include "data/download.h"
#include "ganengine/error.h"

namespace ge::cli {

void Arguments::finish() {
  ptrs_.clear();
  for (auto& w : words) ptrs_.push_back(w.data());
}

std::string dataset_choices() { return join_names(dataset_names(), " | "); }

std::string downloadable_datasets() { return join_names(dataset_names(is_downloadable), ", "); }

void require_dataroot(const std::string& dataset, const std::string& dataroot, bool offer_download) {
  // An unknown name is left to open_dataset, which lists the known ones.
  const DatasetEntry* entry = find_dataset(dataset);
  if (entry && !entry->reads_files) return;
  struct stat st {};
  if (stat(dataroot.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    fail("--dataroot '", dataroot, "' is not a directory (", dataset, " reads its files from there; --dataset ",
         join_names(dataset_names([](const DatasetEntry& e) { return !e.reads_files; }), " or "), " needs none",
         offer_download && dataset_has_download(dataset) ? "; or add --download" : "", ")");
}

namespace {
std::string dashed(const std::string& name) { return (name.size() == 1 ? "-" : "--") + name; }
}  // namespace

int int_flag(const cxxopts::ParseResult& r, const std::string& name, const std::string& expected) {
  return static_cast<int>(parse_integer_flag(dashed(name), r[name].as<std::string>(), INT_MIN, INT_MAX, expected));
}

int64_t int64_flag(const cxxopts::ParseResult& r, const std::string& name, const std::string& expected) {
  return parse_integer_flag(dashed(name), r[name].as<std::string>(), INT64_MIN, INT64_MAX, expected);
}

uint64_t uint64_flag(const cxxopts::ParseResult& r, const std::string& name, const std::string& expected) {
  return parse_unsigned_flag(dashed(name), r[name].as<std::string>(), expected);
}

double real_flag(const cxxopts::ParseResult& r, const std::string& name, const std::string& expected) {
  return parse_real_flag(dashed(name), r[name].as<std::string>(), expected);
}

DataPipelineOptions read_data_flags(const cxxopts::ParseResult& r) {
  DataPipelineOptions d;
  d.dataset = r["dataset"].as<std::string>();
  d.dataroot = r["dataroot"].as<std::string>();
  d.classes = r["classes"].as<std::string>();
  d.workers = int_flag(r, "workers", "0..256");
  if (d.workers < 0 || d.workers > 256) fail("--workers ", d.workers, " (expected 0..256)");
  d.placement = parse_data_placement(r["data-on"].as<std::string>());
  d.cache_dir = r["cache-dir"].as<std::string>();
  d.skip_bad_images = r.count("skip-bad-images") > 0;
  return d;
}

Device default_device() { return cuda_available() ? Device::cuda(0) : Device::cpu(); }

Device resolve_device(const std::string& spec, const char* command, bool warn_on_cpu) {
  const char* why = built_with_cuda() ? "" : " (this build has no CUDA)";
  if (spec.empty()) {
    const Device d = default_device();
    if (d.is_cpu() && warn_on_cpu)
      std::fprintf(stderr,
                   "ganengine %s: warning: no usable GPU found%s; running on the CPU (slow). "
                   "Pass --device cpu to silence this.\n",
                   command, why);
    return d;
  }
  // cpu runs the fast backend (oneDNN, when built), cpu-reference the reference loops.
  if (spec == "cpu-reference") {
    set_cpu_backend(CpuBackend::Reference);
    return Device::cpu();
  }
  const Device d = Device::parse(spec);
  if (d.is_cuda() && !cuda_available()) fail("--device ", spec, ": no usable CUDA GPU here", why, "; use --device cpu");
  if (d.is_cpu()) set_cpu_backend(CpuBackend::Fast);
  return d;
}

Arguments normalise_arguments(int argc, const char* const* argv, const std::map<std::string, std::string>& aliases,
                              const std::set<std::string>& boolean_flags) {
  Arguments a;
  for (int i = 0; i < argc; ++i) {
    std::string w = argv[i];
    if (i > 0 && w.rfind("--", 0) == 0) {
      const size_t eq = w.find('=');
      std::string name = w.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      const std::string rest = eq == std::string::npos ? "" : w.substr(eq);
      auto it = aliases.find(name);
      if (it != aliases.end()) name = it->second;
      w = "--" + name + rest;
      // Apex spells boolean overrides "--keep-batchnorm-fp32 False": glue the value on, since an
      // option with an implicit value would not take the next word.
      if (rest.empty() && boolean_flags.count(name) && i + 1 < argc) {
        const std::string next = argv[i + 1];
        if (next.rfind('-', 0) != 0) {  // a value, right or wrong: the flag's parser judges it
          w += "=" + next;
          ++i;
        }
      }
    }
    a.words.push_back(w);
  }
  a.finish();
  return a;
}

namespace {

// cxxopts reports a value that does not parse as "Argument 'V' failed to parse", without the
// flag: find the flag that V was given to, and say what it takes.
std::string describe_bad_value(const Arguments& args, const std::string& cxxopts_message) {
  // cxxopts quotes with U+2018 and U+2019 where the terminal takes UTF-8, else with '.
  const bool curly = cxxopts_message.find("\u2018") != std::string::npos;
  const std::string lquote = curly ? "\u2018" : "'", rquote = curly ? "\u2019" : "'";
  const size_t open = cxxopts_message.find(lquote);
  const size_t close = cxxopts_message.rfind(rquote);
  if (open == std::string::npos || close == std::string::npos || close <= open) return cxxopts_message;
  const std::string value = cxxopts_message.substr(open + lquote.size(), close - open - lquote.size());
  std::string flag;
  for (size_t i = 1; i < args.words.size() && flag.empty(); ++i) {
    const std::string& w = args.words[i];
    const size_t eq = w.find('=');
    if (w.rfind('-', 0) == 0 && eq != std::string::npos && w.substr(eq + 1) == value)
      flag = w.substr(0, eq);
    else if (w.rfind('-', 0) == 0 && eq == std::string::npos && i + 1 < args.words.size() && args.words[i + 1] == value)
      flag = w;
  }
  const bool integer = !value.empty() && value.find_first_not_of("+-0123456789") == std::string::npos;
  const std::string expected = integer ? "is out of range for this flag (expected a smaller whole number)"
                                       : "is not a valid value (expected a number; true or false for a switch)";
  return (flag.empty() ? std::string("a value") : flag) + " '" + value + "' " + expected;
}

}  // namespace

std::optional<cxxopts::ParseResult> parse_command_line(cxxopts::Options& options, Arguments& args, const char* command,
                                                       const std::vector<std::string>& help_groups) {
  const std::string see = std::string(" (see 'ganengine ") + command + " --help')";
  // cxxopts matches each word with std::regex, whose recursion in libstdc++ grows with the
  // word's length: a word of 32 KiB overflows an 8 MiB stack. No path (PATH_MAX) or value is
  // longer than this.
  constexpr size_t kLongestWord = 4096;
  for (size_t i = 1; i < args.words.size(); ++i) {
    const std::string& w = args.words[i];
    if (w.size() <= kLongestWord) continue;
    const std::string& flag = w.rfind('-', 0) == 0 ? w : args.words[i - 1];
    const std::string name = flag.rfind('-', 0) == 0 ? flag.substr(0, std::min(flag.find('='), size_t(64))) : "";
    fail(name.empty() ? std::string("an argument") : "the value of " + name, " is ", w.size(),
         " characters long (at most ", kLongestWord, ")", see);
  }
  std::optional<cxxopts::ParseResult> r;
  try {
    r = options.parse(args.argc(), args.argv());
  } catch (const cxxopts::exceptions::incorrect_argument_type& e) {
    fail(describe_bad_value(args, e.what()), see);
  } catch (const cxxopts::exceptions::exception& e) {
    fail(e.what(), see);
  }
  if (r->count("help")) {
    std::printf("%s\n", options.help(help_groups).c_str());
    return std::nullopt;
  }
  if (!r->unmatched().empty()) fail("unexpected argument '", r->unmatched()[0], "'", see);
  return r;
}

}  // namespace ge::cli
