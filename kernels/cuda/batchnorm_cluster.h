// BatchNorm's training passes over small NHWC layers in one launch each (batchnorm_cluster.cu),
// instead of batchnorm.cu's three (per-channel partial sums, their merge, the element-wise pass).
//
// A thread-block cluster owns a group of channels: its blocks split the rows, each copies its
// rows of every tensor it reads into shared memory and reduces them, the cluster's barrier lets
// every block merge all of the cluster's partials (read through distributed shared memory, in
// rank order), and each block then makes the element-wise pass from the rows it holds. At small
// batches three short kernels a pass cost mostly launch and drain time, and a step has about
// twenty such passes on its critical path (docs/performance.md).
//
// The sums are taken in a fixed order that depends only on the shape (deterministic, but not
// the three-launch path's order: results agree to rounding, not bitwise).
#pragma once
#include "cuda/batchnorm_math.cuh"
#include "cuda/channel_reduce.cuh"
#include "cuda/fp8_round_trip.cuh"
#include "ganengine/ops.h"
#include "ganengine/tensor.h"

namespace ge {
namespace gpu {

// Both return false, having done nothing, when the layer does not take the one-launch path:
// not NHWC, channels not a whole number of 16-byte packs, buffers not 16-byte aligned, a block's
// rows larger than its shared memory, more rows a thread or values than Auto takes (the tuning
// policy's bn_cluster_* bounds), or switched off (set_cluster_batchnorm).
// g: x's channel_geometry. round: y rounded to FP8 and back as it is written (no scale: not).
bool batchnorm_forward_train_clustered(const Tensor& x, const ChannelGeometry& g, const Tensor& gamma,
                                       const Tensor& beta, Tensor& running_mean, Tensor& running_var, float momentum,
                                       float eps, Tensor& y, Tensor& save_mean, Tensor& save_invstd,
                                       const ops::FusedActivation* act, const Fp8RoundTripArgs& round);

// D's last layer's output gradient and filter, whose backward-data (bn::OuterDy) a backward
// forms where it reads dy (ops::batchnorm_activation_backward_outer).
struct ImageOuter {
  const Tensor* dlogits;
  const Tensor* w;
};

// y: the fused activation's output, read when act.fused and not act.recompute; beta: read when
// act.recompute. dy: the output's gradient, or nullptr with `outer`, which stands for it. round:
// dx rounded to FP8 and back as it is written (round.scale null: not).
bool batchnorm_backward_clustered(const Tensor& x, const ChannelGeometry& g, const Tensor* dy, const Tensor& gamma,
                                  const Tensor* beta, const Tensor* y, const Tensor& save_mean,
                                  const Tensor& save_invstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                                  const bn::ActivationGrad& act, const Fp8RoundTripArgs& round,
                                  const ImageOuter* outer = nullptr);

}  // namespace gpu
}  // namespace ge
