#include "ganengine/nn.h"

namespace ge::nn {

BatchNorm2d::BatchNorm2d(int64_t channels, const PrecisionPolicy& policy, Placement where)
    : channels_(channels), policy_(policy), where_(where) {
  const DType pd = policy.bn_param_dtype;
  for (Param* p : {&gamma_, &beta_}) {
    p->value = Tensor::zeros({channels}, pd, where.device);
    if (policy.master_weights && pd != DType::F32) p->master = Tensor::zeros({channels}, DType::F32, where.device);
    p->model_grad = Tensor::zeros({channels}, pd, where.device);
    p->grad = Tensor::zeros({channels}, DType::F32, where.device);
  }
  gamma_.name = "weight";
  beta_.name = "bias";
  // PyTorch's fresh BatchNorm: running_mean 0, running_var 1.
  running_mean_ = Tensor::zeros({channels}, pd, where.device);
  running_var_ = ops::converted(Tensor::from_doubles(std::vector<double>(channels, 1.0), {channels}, DType::F32), pd,
                                MemoryFormat::NCHW, where.device);
}

void BatchNorm2d::sync_statistics(std::function<void(const Tensor&)> all_reduce_sum) {
  sync_ = ops::BatchNormSync{std::move(all_reduce_sum), Tensor::zeros({1}, DType::F32, where_.device)};
}

void BatchNorm2d::give_moments(const Tensor& of, Tensor moments) {
  moments_of_ = of;
  moments_ = std::move(moments);
}

void BatchNorm2d::form_dots_for(Conv2d* head) {
  if (dots_for_) dots_for_->leave_input_gradient_to(nullptr);
  dots_for_ = head;
  if (head) head->leave_input_gradient_to(this);
}

void BatchNorm2d::give_outer_gradient(const Tensor& dlogits, const Tensor& w, const Conv2dParams& p) {
  outer_dlogits_ = dlogits;
  outer_w_ = w;
  outer_params_ = p;
}

bool BatchNorm2d::forward_forming_dots(const Tensor& x, Tensor& running_mean, Tensor& running_var, Tensor& y) {
  if (!fused_ || !dots_for_ || !dots_for_->takes_dots_of(y)) return false;
  const Tensor w = dots_for_->dot_weight();
  Tensor dots = Tensor::empty({x.dim(0), 1, 1, 1}, y.dtype(), where_.device, y.format());
  if (!ops::batchnorm_activation_forward_train_dot(x, gamma_.value, beta_.value, running_mean, running_var, kMomentum,
                                                   kEps, *fused_, y, save_mean_, save_invstd_, w, dots))
    return false;
  dots_for_->give_output(y, w, std::move(dots));
  return true;
}

Tensor BatchNorm2d::forward(const Tensor& x, bool training) {
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device(), x.format());
  if (training) {
    save_mean_ = Tensor::empty({channels_}, DType::F32, where_.device);
    save_invstd_ = Tensor::empty({channels_}, DType::F32, where_.device);
    Tensor scratch_mean, scratch_var;
    if (!update_running_stats_) {
      scratch_mean = running_mean_.clone();
      scratch_var = running_var_.clone();
    }
    Tensor& rm = update_running_stats_ ? running_mean_ : scratch_mean;
    Tensor& rv = update_running_stats_ ? running_var_ : scratch_var;
    // A forward that leaves the running statistics alone (a look at samples, on one replica)
    // uses its own batch's statistics: the other replicas take no part in it, and a collective
    // they never join would wait forever.
    const ops::BatchNormSync* sync = sync_ && update_running_stats_ ? &*sync_ : nullptr;
    synced_forward_ = sync != nullptr;
    // The running statistics' updates happen in the order the forwards were issued, also when
    // this one runs on another lane than the one before it (a twin's, Layer::twin).
    ConcurrentRegion* region = update_running_stats_ ? ConcurrentRegion::active(where_.device) : nullptr;
    if (region) region->wait(running_updates_->latest);
    // Moments given for this very tensor (the layer before formed them as it wrote x).
    const bool given =
        moments_.defined() && moments_of_.data() == x.data() && moments_of_.shape() == x.shape() && takes_moments();
    took_moments_ = given;
    // y is the FP8 convolution's input (round_output_for): rounded as it is written where the
    // backward never reads y, with its codes where that convolution's forward reads codes, or
    // only its codes written where its three passes all do (Conv2d::input_codes).
    std::optional<ops::Fp8RoundTrip> rounding;
    if (rounds_output_for_ && fused_ && !sync && ops::batchnorm_activation_backward_recomputes(x, *fused_)) {
      rounding = rounds_output_for_->input_codes(x.shape());
      if (!rounding) rounding = rounds_output_for_->input_rounding();
    }
    const ops::Fp8RoundTrip* round_y = rounding ? &*rounding : nullptr;
    if (given) {
      ops::batchnorm_activation_forward_train_moments(x, moments_, gamma_.value, beta_.value, rm, rv, kMomentum, kEps,
                                                      *fused_, y, save_mean_, save_invstd_, round_y);
    } else if (sync || round_y || !forward_forming_dots(x, rm, rv, y)) {  // else D's last layer's output formed too
      if (fused_)
        ops::batchnorm_activation_forward_train(x, gamma_.value, beta_.value, rm, rv, kMomentum, kEps, *fused_, y,
                                                save_mean_, save_invstd_, sync, round_y);
      else
        ops::batchnorm_forward_train(x, gamma_.value, beta_.value, rm, rv, kMomentum, kEps, y, save_mean_, save_invstd_,
                                     sync);
    }
    if (round_y && round_y->codes.defined())
      rounds_output_for_->take_input_codes(y, round_y->codes, round_y->codes_only);
    else if (round_y)
      rounds_output_for_->take_rounded_input(y, y);
    if (region) running_updates_->latest = region->mark();
    if (update_running_stats_) ++running_updates_->batches_tracked;
    saved_x_ = x;
    saved_y_ = fused_ ? y : Tensor();
  } else {
    if (fused_)
      ops::batchnorm_activation_forward_eval(x, gamma_.value, beta_.value, running_mean_, running_var_, kEps, *fused_,
                                             y);
    else
      ops::batchnorm_forward_eval(x, gamma_.value, beta_.value, running_mean_, running_var_, kEps, y);
    saved_x_ = Tensor();
  }
  moments_ = moments_of_ = Tensor();  // they were this forward's, used or not
  return y;
}

Tensor BatchNorm2d::backward(Tensor dy, bool want_param_grads, bool want_input_grad) {
  GE_CHECK(saved_x_.defined(), "BatchNorm2d::backward needs a training-mode forward first");
  // The batch-statistics backward yields dx, dgamma and dbeta together; when the parameter
  // gradients are not wanted they go to scratch space instead of the parameters.
  Tensor dgamma =
      want_param_grads ? gamma_.model_grad : Tensor::empty({channels_}, gamma_.value.dtype(), where_.device);
  Tensor dbeta = want_param_grads ? beta_.model_grad : Tensor::empty({channels_}, beta_.value.dtype(), where_.device);
  const ops::BatchNormSync* sync = sync_ && synced_forward_ ? &*sync_ : nullptr;
  // dx is the FP8 convolution's output gradient (round_gradient_for): rounded as it is written, its
  // codes written beside it where the convolution asks for them.
  const std::optional<ops::Fp8RoundTrip> rounding =
      rounds_gradient_for_ && want_input_grad && fused_
          ? rounds_gradient_for_->output_gradient_rounding(saved_x_.shape())
          : std::nullopt;
  const ops::Fp8RoundTrip* round_dx = rounding ? &*rounding : nullptr;
  // dy may stand for the backward-data of the layer after the activation (give_outer_gradient):
  // formed where the passes read it, or else run first, into the buffer dx would have taken.
  const Tensor dlogits = std::move(outer_dlogits_), w = std::move(outer_w_);
  took_outer_gradient_ = false;
  if (dlogits.defined() && dy.data() == dlogits.data()) {
    Tensor dx = Tensor::empty(saved_x_.shape(), saved_x_.dtype(), where_.device, saved_x_.format());
    took_outer_gradient_ =
        fused_ && !sync &&
        ops::batchnorm_activation_backward_outer(saved_x_, saved_y_, dlogits, w, gamma_.value, beta_.value, save_mean_,
                                                 save_invstd_, *fused_, dx, dgamma, dbeta, round_dx);
    if (took_outer_gradient_) {
      saved_x_ = saved_y_ = Tensor();
      return rounded_for_convolution(want_input_grad ? dx : Tensor(), round_dx);
    }
    ops::conv2d_backward_data(dlogits, w, dx, outer_params_);
    dy = std::move(dx);
  }
  // dx over dy when nobody else holds dy (the kernels read all of dy before writing dx): one
  // activation-sized buffer less at each BatchNorm's backward, where the step's memory peaks.
  const bool reuse_dy = dy.sole_owner() && dy.shape() == saved_x_.shape() && dy.dtype() == saved_x_.dtype() &&
                        dy.format() == saved_x_.format();
  Tensor dx = reuse_dy ? dy : Tensor::empty(saved_x_.shape(), saved_x_.dtype(), where_.device, saved_x_.format());
  if (fused_)
    ops::batchnorm_activation_backward(saved_x_, saved_y_, dy, gamma_.value, beta_.value, save_mean_, save_invstd_,
                                       *fused_, dx, dgamma, dbeta, sync, round_dx);
  else
    ops::batchnorm_backward(saved_x_, dy, gamma_.value, save_mean_, save_invstd_, dx, dgamma, dbeta, sync);
  saved_x_ = Tensor();  // released after use (Conv2d::backward says why)
  saved_y_ = Tensor();
  return rounded_for_convolution(want_input_grad ? dx : Tensor(), round_dx);
}

Tensor BatchNorm2d::rounded_for_convolution(Tensor dx, const ops::Fp8RoundTrip* round_dx) {
  if (round_dx && dx.defined())
    rounds_gradient_for_->take_rounded_output_gradient(dx, round_dx->codes, round_dx->codes_only);
  return dx;
}

std::vector<Buffer> BatchNorm2d::buffers() {
  return {{"running_mean", &running_mean_, nullptr},
          {"running_var", &running_var_, nullptr},
          {"num_batches_tracked", nullptr, &running_updates_->batches_tracked}};
}

std::unique_ptr<Layer> BatchNorm2d::twin() const {
  auto t = std::make_unique<BatchNorm2d>(*this);
  for (Param* p : {&t->gamma_, &t->beta_})
    p->model_grad = Tensor::empty(p->model_grad.shape(), p->model_grad.dtype(), p->model_grad.device());
  t->saved_x_ = t->saved_y_ = t->save_mean_ = t->save_invstd_ = t->moments_ = t->moments_of_ = Tensor();
  t->dots_for_ = nullptr;  // Sequential::twin links the twin's own convolutions
  t->rounds_gradient_for_ = t->rounds_output_for_ = nullptr;
  t->outer_dlogits_ = t->outer_w_ = Tensor();
  return t;
}

std::string BatchNorm2d::describe() const {
  return "BatchNorm2d(" + std::to_string(channels_) + ", eps=1e-05, momentum=0.1)";
}

std::string BatchNorm2d::precision() const {
  std::string s = std::string("params and running stats ") + dtype_name(policy_.bn_param_dtype);
  if (gamma_.master.defined()) s += " (+ f32 master)";
  return s + ", statistics in f32, activations in the dtype that arrives";
}

}  // namespace ge::nn
