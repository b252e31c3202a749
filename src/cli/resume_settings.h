// `ganengine train --resume FILE`: the run's settings come from the file (train/run_flags.h), so
// that FILE alone continues the run. Flags given with it may change what does not make it
// another run (train/run_flags.h's may_change_on_resume); any other flag given with a value
// other than the recorded one is refused, all differences listed at once.
#pragma once
#include <cxxopts.hpp>
#include <string>

#include "cli/arguments.h"

namespace ge::cli {

// The words to parse instead of `given`: those given, then --name=value for every flag the
// state records that was not given and differs from its default; --outf, when not given, is
// the state's own folder (where the run wrote it). A state that records no
// flags (an older version's) leaves `given` as it is; the state's own identity check applies.
Arguments complete_resume_arguments(const cxxopts::Options& options, const Arguments& given,
                                    const cxxopts::ParseResult& parsed, const std::string& state_path);

}  // namespace ge::cli
