// ops::fp8_weight_fragments_all on the GPU, and the fragments each FP8 kernel that holds its weight
// in registers runs on: up to eight weights laid out in one launch, fragment i of job t by thread i
// of the job's blocks (weight_fragments.cuh). Compiled for sm_90a with the kernels that read them.
#include <algorithm>

#include "cuda/conv/conv_phase_dgrad.h"
#include "cuda/conv/sm90a/weight_fragments.cuh"
#include "cuda/conv/weight_fragments.h"
#include "cuda/cuda_util.cuh"
#include "cuda/kernel_launch.cuh"

namespace ge {
namespace gpu {
namespace {

constexpr int kMaxJobs = 8;
constexpr int kLayoutThreads = 256;

// Job t takes blocks first_block[t] .. first_block[t + 1] - 1 of one grid.
struct LayoutJobs {
  FragmentLayout layout[kMaxJobs];
  const uint8_t* codes[kMaxJobs];
  uint4* fragments[kMaxJobs];
  int count[kMaxJobs];  // fragments
  unsigned first_block[kMaxJobs + 1];
  int jobs;
};

__global__ void lay_out_kernel(const LayoutJobs jobs) {
  await_previous_kernel();
  int t = 0;
  while (t + 1 < jobs.jobs && blockIdx.x >= jobs.first_block[t + 1]) ++t;
  const int i = static_cast<int>(blockIdx.x - jobs.first_block[t]) * kLayoutThreads + static_cast<int>(threadIdx.x);
  if (i < jobs.count[t]) jobs.fragments[t][i] = weight_fragments::fp8_fragment(jobs.layout[t], jobs.codes[t], i);
}

// Job `t` of `jobs`: `layout`'s fragments of `codes` into `fragments`, after the blocks before it.
void add_job(LayoutJobs& jobs, int t, FragmentLayout layout, const Tensor& codes, const Tensor& fragments) {
  jobs.layout[t] = layout;
  jobs.codes[t] = codes.data_as<uint8_t>();
  jobs.fragments[t] = static_cast<uint4*>(fragments.data());
  jobs.count[t] = static_cast<int>(codes.numel() / 16);
  jobs.first_block[t + 1] = jobs.first_block[t] + static_cast<unsigned>(ceil_div(jobs.count[t], kLayoutThreads));
  jobs.jobs = t + 1;
}

void launch(const LayoutJobs& jobs, const Tensor& on) {
  launch_kernel(lay_out_kernel, jobs.first_block[jobs.jobs], kLayoutThreads, 0, stream_of(on), jobs);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

FragmentLayout fragment_layout(const Shape& w, ops::Fp8WeightPass pass, Device device) {
  if (!device.is_cuda() || !device_is_sm90(device.index)) return FragmentLayout::None;
  const bool forward = pass == ops::Fp8WeightPass::Forward;
  const FragmentLayout layouts[] = {forward ? FragmentLayout::PhaseForward : FragmentLayout::PhaseBackwardData,
                                    forward ? FragmentLayout::ResidentForward : FragmentLayout::ResidentBackwardData};
  for (const FragmentLayout layout : layouts)
    if (w == fragment_weight(layout).shape()) return layout;
  return FragmentLayout::None;
}

void lay_out_weight_fragments(const std::vector<ops::Fp8WeightFragmentsOf>& jobs) {
  for (size_t first = 0; first < jobs.size(); first += kMaxJobs) {
    LayoutJobs launched{};
    for (size_t t = 0; t < kMaxJobs && first + t < jobs.size(); ++t) {
      const ops::Fp8WeightFragmentsOf& job = jobs[first + t];
      add_job(launched, static_cast<int>(t), fragment_layout(job.codes.shape(), job.pass, job.codes.device()),
              job.codes, job.fragments);
    }
    launch(launched, jobs[first].fragments);
  }
}

Tensor weight_fragments_for(FragmentLayout layout, const Fp8Tensor& w, Device device) {
  Tensor fragments = w.fragments;
  if (!fragments.defined()) {
    fragments = Tensor::empty({w.data.numel()}, DType::U8, device);
    LayoutJobs one{};
    add_job(one, 0, layout, w.data, fragments);
    launch(one, fragments);
    return fragments;
  }
  GE_CHECK(fragments_fit(fragments, w.data, device),
           "FP8 convolution: the weight's fragments must be a 16-byte aligned u8 tensor of its ", w.data.numel(),
           " codes on ", device.str(), " (ops::fp8_weight_fragments_all), got ", fragments.str());
  return fragments;
}

}  // namespace gpu
}  // namespace ge
