#include "cli/resume_settings.h"

#include <cstdio>
#include <cstdlib>
#include <map>

#include "ganengine/error.h"
#include "ganengine/safetensors.h"
#include "train/run_flags.h"

namespace ge::cli {

namespace {

bool is_true(const std::string& v) { return v == "true" || v == "True" || v == "1" || v == "yes"; }
bool is_false(const std::string& v) { return v == "false" || v == "False" || v == "0" || v == "no"; }

// Two spellings of one value: "0.0002" and "2e-4", "True" and "true".
bool same_value(const std::string& a, const std::string& b) {
  if (a == b) return true;
  if ((is_true(a) && is_true(b)) || (is_false(a) && is_false(b))) return true;
  char* end_a = nullptr;
  char* end_b = nullptr;
  const double x = std::strtod(a.c_str(), &end_a), y = std::strtod(b.c_str(), &end_b);
  return !a.empty() && !b.empty() && *end_a == '\0' && *end_b == '\0' && x == y;
}

// A run started without --device resumes wherever the default resolves now (default_device, the
// CPU on its fast backend), so a --device naming that device changes nothing: the warning on the
// CPU asks for --device cpu. "cpu-reference" (the reference loops) and specs Device::parse refuses
// name another.
bool names_default_device(const std::string& spec) {
  try {
    return Device::parse(spec) == default_device();
  } catch (const Error&) {
    return false;
  }
}

std::map<std::string, cxxopts::HelpOptionDetails> option_details(const cxxopts::Options& options) {
  std::map<std::string, cxxopts::HelpOptionDetails> out;
  for (const std::string& group : options.groups())
    for (const auto& d : options.group_help(group).options) out.emplace(d.l.empty() ? d.s : d.l.front(), d);
  return out;
}

}  // namespace

Arguments complete_resume_arguments(const cxxopts::Options& options, const Arguments& given,
                                    const cxxopts::ParseResult& parsed, const std::string& state_path) {
  const auto metadata = load_safetensors(state_path).metadata;
  const auto recorded_text = metadata.find(kRunFlagsKey);
  Arguments out;
  out.words = given.words;
  if (recorded_text == metadata.end()) {
    out.finish();
    return out;
  }
  std::map<std::string, std::string> recorded;
  for (const auto& [name, value] : decode_run_flags(recorded_text->second)) recorded[name] = value;

  std::map<std::string, std::string> user;
  std::string differences, changed;
  for (const auto& kv : parsed.arguments()) {
    const std::string& name = kv.key();
    user[name] = kv.value();
    const auto it = recorded.find(name);
    if (!is_recorded_flag(name) || it == recorded.end() || same_value(kv.value(), it->second)) continue;
    if (name == "device" && it->second.empty() && names_default_device(kv.value())) continue;
    if (may_change_on_resume(name))
      changed += " --" + name + " " + kv.value();
    else
      differences += "\n  --" + name + ": the run has " + (it->second.empty() ? "(none)" : it->second) +
                     ", this command gives " + kv.value();
  }
  if (!differences.empty())
    fail("--resume ", state_path,
         ": a resumed run keeps the settings it was started with (only --niter, --max-steps, --log-interval, "
         "--sample-interval, --checkpoint-every, --workers, --outf, --dataroot, --cache-dir, --no-progress and "
         "--no-tensorboard may change); drop these flags or start a new run:",
         differences);

  // The state lives in the run's --outf: its own folder is the output folder even when the run
  // was started from another working directory with a relative --outf.
  const size_t slash = state_path.find_last_of('/');
  recorded["outf"] = slash == std::string::npos ? "." : state_path.substr(0, slash == 0 ? 1 : slash);
  const auto details = option_details(options);
  for (const auto& [name, value] : recorded) {
    const auto d = details.find(name);
    if (user.count(name) || d == details.end() || !is_recorded_flag(name)) continue;
    if (d->second.is_boolean) {
      if (is_true(value)) out.words.push_back("--" + name);
    } else if (!(d->second.has_default && d->second.default_value == value) &&
               !(value.empty() && !d->second.has_default)) {
      out.words.push_back("--" + name + "=" + value);
    }
  }
  if (!changed.empty())
    std::printf("resuming with the settings recorded in %s, changed:%s\n", state_path.c_str(), changed.c_str());
  out.finish();
  return out;
}

}  // namespace ge::cli
