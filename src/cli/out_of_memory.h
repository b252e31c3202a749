// What `train` says when host memory runs out: which flags size the memory it asked for, with
// their values, and a lower bound of what they ask for, so the user knows what to lower.
#pragma once
#include <cstring>
#include <new>
#include <string>

#include "ganengine/error.h"

#include "ganengine/train_loop.h"

namespace ge::cli {

// The allocators' own message for a host allocation that failed (core/allocator.cpp,
// core/no_cuda.cpp, runtime/pinned_allocator.cpp) begins with this.
inline constexpr const char* kOutOfHostMemory = "out of host memory";

// `failure` says what failed (the allocator's message, or "std::bad_alloc"). The bound counts
// one batch of images and both networks' convolution weights, all in f32: the run needs at
// least that, and more for activations, gradients and the optimiser's state.
std::string out_of_memory_message(const TrainOptions& opt, int channels, const std::string& failure);

// The images' channels for the bound: the dataset's, or 3 for a name the registry does not know
// (opening such a dataset fails before memory can run out).
int channels_for_estimate(const std::string& dataset);

// On a CPU device, fails with out_of_memory_message's text when the bound alone exceeds this
// machine's physical memory. Checked before anything is allocated: with Linux's overcommit such
// allocations may succeed and the process is then killed as it first writes them, which no
// error handling can report.
void check_bound_fits_host_memory(const TrainOptions& opt, int channels);

// run(), where a host allocation that fails, as std::bad_alloc or as the allocators' ge::Error,
// becomes a ge::Error with out_of_memory_message's text.
template <class Run>
auto naming_sizes_when_out_of_memory(const TrainOptions& opt, Run run) -> decltype(run()) {
  try {
    return run();
  } catch (const std::bad_alloc&) {
    fail(out_of_memory_message(opt, channels_for_estimate(opt.dataset), "out of host memory (std::bad_alloc)"));
  } catch (const Error& e) {
    if (std::strncmp(e.what(), kOutOfHostMemory, std::strlen(kOutOfHostMemory)) != 0) throw;
    fail(out_of_memory_message(opt, channels_for_estimate(opt.dataset), e.what()));
  }
}

}  // namespace ge::cli
