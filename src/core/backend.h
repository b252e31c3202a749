// The two implementations of every op in ops.h, with the same signatures.
// ge::cpu lives in kernels/cpu (always built); ge::gpu in kernels/cuda (built when CUDA is found).
// Callers use ge::ops::*, which checks arguments and dispatches on the device.
#pragma once
#include <string>
#include <vector>

#include "ganengine/ops.h"

#define GE_BACKEND_OPS                                                                                                \
  void conv2d_forward(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p);                            \
  void conv2d_backward_data(const Tensor& dy, const Tensor& w, Tensor& dx, const Conv2dParams& p);                    \
  void conv2d_backward_filter(const Tensor& x, const Tensor& dy, Tensor& dw, const Conv2dParams& p, float beta);      \
  /* The convolution followed by an in-place activation, and the filter and input gradients */                        \
  /* through both given the activation's output y and its gradient dy (ops.h).              */                        \
  void conv2d_activation_forward(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p,                  \
                                 const ops::FusedActivation& act);                                                    \
  void conv2d_activation_backward_filter(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dw,              \
                                         const Conv2dParams& p, const ops::FusedActivation& act, float beta);         \
  void conv2d_activation_backward_data(const Tensor& y, const Tensor& dy, const Tensor& w, Tensor& dx,                \
                                       const Conv2dParams& p, const ops::FusedActivation& act,                        \
                                       const ops::InputActivation* input);                                            \
  void conv_transpose2d_activation_forward(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p,        \
                                           const ops::FusedActivation& act);                                          \
  /* act: an activation applied after the normalisation (nullptr: none); y_act: its output,  */                       \
  /* from which the backward forms the activation's gradient first. beta (with act): the   */                         \
  /* forward's shift, with which the GPU may recompute y_act from x instead of reading it. */                         \
  void batchnorm_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& running_mean,        \
                               Tensor& running_var, float momentum, float eps, Tensor& y, Tensor& save_mean,          \
                               Tensor& save_invstd, const ops::FusedActivation* act, const ops::BatchNormSync* sync); \
  void batchnorm_forward_eval(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,   \
                              const Tensor& running_var, float eps, Tensor& y, const ops::FusedActivation* act);      \
  void batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,            \
                          const Tensor& save_invstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta,                       \
                          const ops::FusedActivation* act, const Tensor* y_act, const Tensor* beta,                   \
                          const ops::BatchNormSync* sync, const ops::Fp8RoundTrip* round_dx);                         \
  void activation_forward(ops::Activation a, const Tensor& x, Tensor& y, float negative_slope);                       \
  void activation_backward(ops::Activation a, const Tensor& y, const Tensor& dy, Tensor& dx, float negative_slope);   \
  void bce_with_logits_forward(const Tensor& logits, float target, Tensor& loss, Tensor& mean_sigmoid);               \
  void bce_with_logits_backward(const Tensor& logits, float target, const Tensor& scale, Tensor& dlogits);            \
  void cast(const Tensor& src, Tensor& dst);                                                                          \
  void unscale_grads(const std::vector<Tensor>& src, const std::vector<Tensor>& dst, const Tensor& scale,             \
                     Tensor& found_inf, bool accumulate);                                                             \
  void scale_inplace(const Tensor& t, float factor);                                                                  \
  void copy_padded(const Tensor& src, Tensor& dst);                                                                   \
  void loss_scaler_update(Tensor& state, const Tensor& found_inf, const ops::ScalerConfig& cfg);                      \
  void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,                                 \
                 const std::vector<Tensor>& exp_avg, const std::vector<Tensor>& exp_avg_sq, Tensor& step,             \
                 const Tensor& skip, const ops::AdamConfig& cfg, const std::vector<Tensor>& half_copies,              \
                 const ops::PendingGrads* pending);                                                                   \
  void ema_update(const std::vector<Tensor>& averages, const std::vector<Tensor>& values, double decay);              \
  void fp8_quantize(const Tensor& x, const Tensor& scale, Fp8Format format, Tensor& q, Tensor& amax);                 \
  void fp8_dequantize(const Tensor& q, const Tensor& scale_inv, Fp8Format format, Tensor& y);                         \
  void fp8_update_scales(const std::vector<Fp8Scaling>& states, const Fp8DelayedScaling& recipe);                     \
  void fp8_round_trip(const Tensor& x, const Tensor& scale, const Tensor& scale_inv, Fp8Format format, Tensor& y,     \
                      const Tensor* amax, Tensor* codes);                                                             \
  void fp8_round_trip_all(const std::vector<ops::Fp8RoundTripOf>& trips);                                             \
  void fill_uniform(Tensor& t, uint64_t seed, uint64_t offset);                                                       \
  void fill_normal(Tensor& t, uint64_t seed, uint64_t offset, float mean, float stddev);

namespace ge {
namespace cpu {
GE_BACKEND_OPS
// t rounded to FP8 and back in place as r says, its amax folded into r.amax if defined: how the
// CPU backends honour an op's ops::Fp8RoundTrip, as a pass after the op.
void fp8_round_trip_in_place(const ops::Fp8RoundTrip& r, Tensor& t);
// The codes of a ReLU's or LeakyReLU's output y, each with its sign bit set where y is not > 0
// (ops::conv2d_activation_forward's codes_only), and that output as its gradient reads it back from
// such codes: +1 where the sign bit is clear (y > 0), -1 elsewhere, in `dtype`.
void mark_activation_codes(const Tensor& y, Tensor& codes);
Tensor activation_signs_of_codes(const Tensor& codes, DType dtype);
}  // namespace cpu
namespace gpu {
GE_BACKEND_OPS
// ops::conv_transpose2d_forward_moments and ops::batchnorm_activation_forward_train_moments on the
// GPU (ops.h): conv_phase_dgrad.h's kernel, and the statistics' merge followed by the normalise.
bool conv_transpose2d_forward_moments(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p,
                                      Tensor& moments);
void batchnorm_forward_train_moments(const Tensor& x, const Tensor& moments, const Tensor& gamma, const Tensor& beta,
                                     Tensor& running_mean, Tensor& running_var, float momentum, float eps, Tensor& y,
                                     Tensor& save_mean, Tensor& save_invstd, const ops::FusedActivation* act,
                                     const ops::Fp8RoundTrip* round_y);
// ops::batchnorm_activation_forward_train with round_y, and ops::batchnorm_activation_backward_recomputes,
// on the GPU (batchnorm.cu).
void batchnorm_forward_train_rounded(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                                     Tensor& running_var, float momentum, float eps, Tensor& y, Tensor& save_mean,
                                     Tensor& save_invstd, const ops::FusedActivation& act,
                                     const ops::Fp8RoundTrip& round_y);
bool batchnorm_backward_recomputes(const Tensor& x, const ops::FusedActivation& act);
// ops::batchnorm_activation_forward_train_dot on the GPU: false, running nothing, where it does
// not apply (batchnorm.cu).
bool batchnorm_forward_train_dot(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                                 Tensor& running_var, float momentum, float eps, const ops::FusedActivation& act,
                                 Tensor& y, Tensor& save_mean, Tensor& save_invstd, const Tensor& w, Tensor& dots);
// ops::batchnorm_activation_backward_outer on the GPU: false, running nothing, where it does not
// apply (batchnorm.cu).
bool batchnorm_backward_outer(const Tensor& x, const Tensor& y_act, const Tensor& dlogits, const Tensor& w,
                              const Tensor& gamma, const Tensor& beta, const Tensor& save_mean,
                              const Tensor& save_invstd, const ops::FusedActivation& act, Tensor& dx, Tensor& dgamma,
                              Tensor& dbeta, const ops::Fp8RoundTrip* round_dx);
// Whether our kernels launch with programmatic dependent launch (kernels/cuda/kernel_launch.cuh):
// On by default. For tests; set it before launching work, it applies to launches (and captures)
// from then on.
enum class EarlyLaunch { On, Off };
void set_early_launch(EarlyLaunch choice);
// BatchNorm's training passes over small NHWC layers in one launch each instead of three
// (kernels/cuda/batchnorm_cluster.h). Auto (the default): the layers the tuning policy's
// bn_cluster_* bounds admit (at batch 64 the DCGAN's two narrowest BatchNorm layers in D and in
// G); On: every layer whose rows fit the blocks' shared memory; Off: none. For tests, like
// set_early_launch.
enum class ClusterBatchNorm { Auto, On, Off };
void set_cluster_batchnorm(ClusterBatchNorm choice);
// Whether the training forward over x (16-byte aligned) runs in one launch under the current
// choice. (The backward stages two or three tensors' rows: it may not.)
bool batchnorm_in_one_launch(const Tensor& x);
// The convolution paths (kernels/cuda/conv/conv_paths.h) in the order each pass tries them, a
// line a path, for `ganengine info`.
std::vector<std::string> describe_conv_paths();
}  // namespace gpu
// True when this build has the CUDA backend and a usable GPU is present.
bool cuda_available();
int cuda_device_count();  // usable CUDA devices (0 without CUDA)
bool built_with_cuda();
// Waits until the device has finished all work issued to it (no-op for the CPU).
void synchronize(Device d);
}  // namespace ge
