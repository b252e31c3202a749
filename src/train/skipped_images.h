// --skip-bad-images: what the run left out, so that a user learns which files are damaged
// instead of training on fewer images unawares.
#pragma once
#include <string>

#include "ganengine/data.h"

namespace ge {

// One line for stderr, or "" when nothing was skipped: how many images were left out and the
// first few, each with its reason. at_end: count the images that only decoding found bad
// (found while training) rather than those the scan left out before it.
std::string skipped_images_summary(const Dataset& dataset, bool at_end);

}  // namespace ge
