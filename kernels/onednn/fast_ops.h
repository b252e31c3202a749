// The fast CPU backend's ops (kernels/onednn): the signatures of ge::cpu (src/core/backend.h),
// each returning whether it ran. false means the call is outside what the backend takes (f64
// gradient-check tensors, replicas' synchronised BatchNorm, a padding oneDNN cannot express)
// and nothing was written: the dispatch then runs the reference (kernels/cpu).
#pragma once
#include <vector>

#include "ganengine/ops.h"

namespace ge::onednn {

bool conv2d_forward(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p);
bool conv2d_backward_data(const Tensor& dy, const Tensor& w, Tensor& dx, const Conv2dParams& p);
bool conv2d_backward_filter(const Tensor& x, const Tensor& dy, Tensor& dw, const Conv2dParams& p, float beta);
bool conv2d_activation_forward(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p,
                               const ops::FusedActivation& act);
bool conv2d_activation_backward_filter(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dw,
                                       const Conv2dParams& p, const ops::FusedActivation& act, float beta);
bool conv2d_activation_backward_data(const Tensor& y, const Tensor& dy, const Tensor& w, Tensor& dx,
                                     const Conv2dParams& p, const ops::FusedActivation& act,
                                     const ops::InputActivation* input);
bool conv_transpose2d_activation_forward(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p,
                                         const ops::FusedActivation& act);

bool batchnorm_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                             Tensor& running_var, float momentum, float eps, Tensor& y, Tensor& save_mean,
                             Tensor& save_invstd, const ops::FusedActivation* act, const ops::BatchNormSync* sync);
bool batchnorm_forward_eval(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                            const Tensor& running_var, float eps, Tensor& y, const ops::FusedActivation* act);
bool batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,
                        const Tensor& save_invstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                        const ops::FusedActivation* act, const Tensor* y_act, const Tensor* beta,
                        const ops::BatchNormSync* sync, const ops::Fp8RoundTrip* round_dx);

bool activation_forward(ops::Activation a, const Tensor& x, Tensor& y, float negative_slope);
bool activation_backward(ops::Activation a, const Tensor& y, const Tensor& dy, Tensor& dx, float negative_slope);
bool bce_with_logits_forward(const Tensor& logits, float target, Tensor& loss, Tensor& mean_sigmoid);
bool bce_with_logits_backward(const Tensor& logits, float target, const Tensor& scale, Tensor& dlogits);
bool cast(const Tensor& src, Tensor& dst);
bool unscale_grads(const std::vector<Tensor>& src, const std::vector<Tensor>& dst, const Tensor& scale,
                   Tensor& found_inf, bool accumulate);
bool scale_inplace(const Tensor& t, float factor);
bool copy_padded(const Tensor& src, Tensor& dst);
bool adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& exp_avg,
               const std::vector<Tensor>& exp_avg_sq, Tensor& step, const Tensor& skip, const ops::AdamConfig& cfg,
               const std::vector<Tensor>& half_copies, const ops::PendingGrads* pending);

}  // namespace ge::onednn
