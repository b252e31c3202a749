// The flags of a run, recorded in its training state, so that `--resume FILE` alone continues
// it with every setting it had. Stored as "name=value" lines under the metadata key
// kRunFlagsKey (flag names without dashes, values as given or defaulted).
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace ge {

constexpr const char* kRunFlagsKey = "run_flags";

using FlagValues = std::vector<std::pair<std::string, std::string>>;

// Whether a flag belongs to the run (and is recorded) rather than to one invocation: --resume,
// --overwrite, --netG/--netD (the state holds the weights), --download*, --print-precision,
// --profile-steps, the test hook --debug-force-overflow and --help are not recorded.
bool is_recorded_flag(const std::string& name);

// Whether a resumed run may change a recorded flag: how long it runs, how often it logs, samples
// and saves, how many threads load data, and where files are (the same data moved, another
// output folder). Everything else would make it another run.
bool may_change_on_resume(const std::string& name);

// The recorded flags of `flags` as text; a value with a line break is left out (it cannot be
// recorded faithfully; --resume then needs it given again).
std::string encode_run_flags(const FlagValues& flags);
FlagValues decode_run_flags(const std::string& text);

}  // namespace ge
