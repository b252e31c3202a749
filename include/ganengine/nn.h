// Layers and the two DCGAN networks. Each layer keeps what its backward needs from its latest
// forward; backward writes parameter gradients (in the compute dtype, scaled by whatever loss
// scale the incoming gradient carries) and returns the input gradient when asked.
#pragma once
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ganengine/amp.h"
#include "ganengine/concurrent_region.h"
#include "ganengine/ops.h"
#include "ganengine/tensor.h"

namespace ge::nn {

// Where a network lives and how it stores activations: NHWC for half-precision convolutions on
// the GPU (Tensor Cores), NCHW for fp32 ones (cuDNN's FMA algorithms are several times slower
// in NHWC: docs/performance.md) and on the CPU reference.
struct Placement {
  Device device = Device::cpu();
  MemoryFormat format = MemoryFormat::NCHW;
  static Placement for_device(Device d, DType compute_dtype) {
    return {d, d.is_cuda() && compute_dtype != DType::F32 ? MemoryFormat::NHWC : MemoryFormat::NCHW};
  }
};

struct Param {
  std::string name;   // state_dict suffix: "weight" or "bias"
  Tensor value;       // the model's copy, in the stored dtype (f32, or half at O2/O3)
  Tensor master;      // f32 master copy when the policy keeps one, else undefined
  Tensor model_grad;  // gradient of the latest backward, in value's compute dtype (still scaled)
  // f32 gradient the optimizer reads: unscaled, summed over this step's losses (but the last
  // one's where the optimizer unscales that itself: TrainerConfig::optimizer_unscales_last_loss)
  Tensor grad;
  Tensor& optimizer_value() { return master.defined() ? master : value; }
};

// A named non-trainable state tensor (running statistics) or counter.
struct Buffer {
  std::string name;
  Tensor* tensor = nullptr;    // running_mean / running_var
  int64_t* counter = nullptr;  // num_batches_tracked
};

enum class LayerKind { Conv, BatchNorm, Activation };

class Layer {
 public:
  virtual ~Layer() = default;
  virtual LayerKind layer_kind() const = 0;
  virtual Tensor forward(const Tensor& x, bool training) = 0;
  // dy is taken by value: a caller that moves its gradient in gives its memory up, and a layer
  // may then write its input gradient over it (BatchNorm2d does).
  virtual Tensor backward(Tensor dy, bool want_param_grads, bool want_input_grad) = 0;
  virtual std::vector<Param*> params() { return {}; }
  virtual std::vector<Buffer> buffers() { return {}; }
  // A second instance for a second forward/backward in flight at once (Sequential::twin): it
  // shares this layer's parameters, their f32 gradients and master copies, running statistics
  // and counters, and has its own saved state and model gradients (written by its backward).
  virtual std::unique_ptr<Layer> twin() const = 0;
  virtual std::string describe() const = 0;  // "ConvTranspose2d(100, 512, 4, 1, 0)"
  // "stores f32 weights, computes in f16" — one line for --print-precision
  virtual std::string precision() const = 0;
};

class BatchNorm2d;

// O4's scaling state of one convolution (PrecisionPolicy::fp8_convolutions): its input and its
// weight as E4M3, its output gradient as E5M2, each with its own delayed scaling. A layer and its
// twins share one: the amaxes of every pass of a step fold into the same history entries.
struct Fp8ConvScaling {
  Fp8Scaling input, weight, grad_output;
  // The three with their names in the training state ("main.<i>.fp8_<name>.scale", ...).
  std::array<std::pair<const char*, Fp8Scaling*>, 3> named() {
    return {{{"input", &input}, {"weight", &weight}, {"grad_output", &grad_output}}};
  }
};

class Conv2d : public Layer {
 public:
  Conv2d(int64_t in, int64_t out, int kernel, int stride, int pad, bool transposed, const PrecisionPolicy& policy,
         Placement where);
  LayerKind layer_kind() const override { return LayerKind::Conv; }
  Tensor forward(const Tensor& x, bool training) override;
  Tensor backward(Tensor dy, bool want_param_grads, bool want_input_grad) override;
  std::vector<Param*> params() override { return {&weight_}; }
  std::unique_ptr<Layer> twin() const override;
  std::string describe() const override;
  std::string precision() const override;
  Param& weight() { return weight_; }
  // Forward returns its output with the channels padded to a multiple of 8 (zeros) instead of
  // trimming them (a trim less per pass, the padded output held for as long as it lives; the
  // trainer does not use it since D's first layer reads 3-channel images as they are: the fake
  // batch held with 3 channels is what keeps the step's peak memory under PyTorch's). Backward
  // returns the input gradient with as many channels as the input had.
  void keep_padded_output(bool on) { keep_padded_output_ = on; }
  int64_t padded_out_channels() const { return out_padded_; }
  // The activation layer after this one runs inside it (ops::conv2d_activation_*,
  // ops::conv_transpose2d_activation_forward): forward returns the activation's output, backward
  // takes that output's gradient. Only for layers whose output is written without channel
  // padding: D's first layer and its LeakyReLU, G's last (transposed) layer and its Tanh.
  // Not in an FP8 layer, whose output gradient is rounded to FP8 before any activation's gradient
  // could be taken on the way in.
  bool can_fuse_activation() const { return (transposed_ || out_padded_ == out_) && !keep_padded_output_ && !fp8_; }
  void fuse_activation(const ops::FusedActivation& act);
  const std::optional<ops::FusedActivation>& fused_activation() const { return fused_; }
  // This layer's input is the output of `act` (G's Tanh before D's first layer): the input
  // gradient backward returns is taken on through it, to the activation's input, as the
  // gradient is written (ops::InputActivation). The layer that ran the activation must then not
  // take it again: receives_gradient_through_activation on it.
  void take_input_gradient_through(const ops::FusedActivation& act) { input_activation_ = act; }
  // Backward receives the gradient at its fused activation's input, already taken through the
  // activation by the next network's first layer (take_input_gradient_through).
  void receives_gradient_through_activation(bool on) { gradient_through_activation_ = on; }
  // The training BatchNorm2d after this transposed convolution: where the GPU's kernel for the
  // layer forms its output's moments as it writes it (ops::conv_transpose2d_forward_moments),
  // forward hands them to `bn`, which then does not read the output for its statistics.
  // nullptr: none.
  void form_moments_for(BatchNorm2d* bn) { moments_for_ = bn; }
  BatchNorm2d* moments_for() const { return moments_for_; }
  bool transposed() const { return transposed_; }
  // O4: the FP8 scaling of this layer's operands; nullptr where the layer stays in half (below 8
  // channels on a side: the image layers and D's head) or the policy has no FP8. Each pass reads
  // its operands as the FP8 Tensor Cores would, rounded to the format with the state's scale and
  // back (ops::fp8_round_trip), and folds their amaxes into the history's current entry.
  Fp8ConvScaling* fp8() const { return fp8_.get(); }
  // O4: the round trip of the weight into its FP8 operand (the scale of the step in progress, its
  // amax recorded as a forward records it, and the weight's codes where the latest training forward
  // read them), for the caller to run before any forward: training forwards then read that operand
  // instead of rounding the weight each, and so do twins made meanwhile, until
  // drop_formed_fp8_weight. The weight must not change in between. nullopt without FP8.
  // Sequential::form_fp8_weights runs a network's in one ops::fp8_round_trip_all.
  std::optional<ops::Fp8RoundTripOf> form_fp8_weight();
  // O4, after form_fp8_weight: the formed codes laid out for each pass that reads them on a kernel
  // holding the weight as register fragments (ops::fp8_weight_pass_reads_fragments), for the
  // caller to run, after the round trip, in one ops::fp8_weight_fragments_all; the training passes
  // then read those until drop_formed_fp8_weight. Empty where no codes were formed.
  std::vector<ops::Fp8WeightFragmentsOf> form_fp8_weight_fragments();
  // The fragments formed for `pass` (undefined: none).
  const Tensor& formed_weight_fragments(ops::Fp8WeightPass pass) const {
    return formed_w_fragments_[static_cast<size_t>(pass)];
  }
  void drop_formed_fp8_weight() {
    formed_w_ = formed_w_codes_ = Tensor();
    formed_w_fragments_ = {};
  }
  // Off: the passes still round to FP8 but record no amax, so that a look at samples never
  // changes the scales of a run (Sequential::set_update_running_stats).
  void set_record_amax(bool on) { record_amax_ = on; }
  // The rounding of this FP8 layer's output gradient of shape `dy` (E5M2, its amax recorded as the
  // layer's own rounding records it), for the layer that writes that gradient; nullopt without
  // FP8. It asks for the gradient's codes as well where the latest training forward found the
  // input gradient faster from codes than in half (input_gradient_runs_on_codes), and for the
  // codes alone (codes_only) where all three passes run from codes: then both gradients read the
  // codes, nothing the values.
  std::optional<ops::Fp8RoundTrip> output_gradient_rounding(const Shape& dy) const;
  // The next backward's dy, if it is exactly `dy`, comes rounded already: backward does not round
  // it again (BatchNorm2d::round_gradient_for). With `codes` (the rounding's codes, undefined for
  // none), its backward-data reads those on FP8 Tensor Cores; `codes_only`: dy's values may be
  // unwritten, and backward refuses any other dy.
  void take_rounded_output_gradient(const Tensor& dy, const Tensor& codes, bool codes_only) {
    rounded_dy_ = dy;
    rounded_dy_codes_ = codes;
    rounded_dy_codes_only_ = codes_only;
  }
  // The codes take_rounded_output_gradient handed for the next backward (undefined: none).
  const Tensor& given_output_gradient_codes() const { return rounded_dy_codes_; }
  bool took_rounded_gradient() const { return took_rounded_gradient_; }  // the latest backward's dy came so
  bool took_gradient_codes() const { return took_gradient_codes_; }      // and its backward-data read the codes
  // The rounding of this FP8 layer's input (E4M3, its amax recorded as the layer's own rounding
  // records it), for the layer that writes that input; nullopt without FP8.
  std::optional<ops::Fp8RoundTrip> input_rounding() const;
  // input_rounding() with a codes tensor to write, for an input of shape `x` whose training forward
  // runs from FP8 codes on FP8 Tensor Cores: instead of the rounded values (codes_only) where all
  // three training passes do (ops::fp8_conv2d_runs_on_codes), beside them where only the forward
  // does (ops::fp8_conv2d_forward_beats_half); nullopt elsewhere. The layer writing the input then
  // hands the codes over (take_input_codes).
  std::optional<ops::Fp8RoundTrip> input_codes(const Shape& x) const;
  // The next training forward's x, if it is exactly `x`, comes as its E4M3 codes (input_codes):
  // forward reads those, and the filter gradient where it runs from codes, and forward does not
  // round x. `codes_only`: x's values may be unwritten (the BatchNorm before wrote the codes
  // alone), and forward refuses any other x; else x holds the rounded values the codes stand for
  // wherever a half pass of the backward reads x.
  void take_input_codes(const Tensor& x, const Tensor& codes, bool codes_only) {
    rounded_of_ = x;
    rounded_x_ = Tensor();
    given_x_codes_ = codes;
    given_x_codes_only_ = codes_only;
  }
  // The next training forward's x, if it is exactly `x`, comes rounded already as `rounded` (x
  // itself, or a copy): forward reads that and does not round again (round_output_for on the layer
  // before the activation).
  void take_rounded_input(const Tensor& x, const Tensor& rounded) {
    rounded_of_ = x;
    rounded_x_ = rounded;
    given_x_codes_ = Tensor();
    given_x_codes_only_ = false;
  }
  // The codes take_input_codes handed for the next forward (undefined: none), and whether they
  // came alone (x's values never written).
  const Tensor& given_input_codes() const { return given_x_codes_; }
  bool given_input_codes_only() const { return given_x_codes_only_; }
  bool took_rounded_input() const { return took_rounded_input_; }  // the latest forward's x came so
  bool took_input_codes() const { return took_input_codes_; }      // ... as codes, and its forward read them
  // A convolution whose output is each image's dot product with its one filter (D's last layer:
  // one output channel, no padding, not transposed, no fused activation) can take that output
  // from the BatchNorm2d before it (BatchNorm2d::form_dots_for), which forms it while writing the
  // input; takes_dots_of says whether it can for this input (its images the filter's size, in the
  // compute dtype and layout), dot_weight is the filter as forward computes with it, and
  // give_output hands the dots over for the next forward of exactly `x`.
  bool can_take_dots() const {
    return !transposed_ && out_ == 1 && out_padded_ == 1 && p_.pad == 0 && !fused_ && !fp8_;
  }
  bool takes_dots_of(const Tensor& x) const;
  Tensor dot_weight() { return compute_weight(); }
  void give_output(const Tensor& x, const Tensor& w, Tensor dots);
  bool took_output() const { return took_output_; }  // the latest forward did
  // Backward leaves its input gradient to `bn` (BatchNorm2d::form_dots_for sets this), returning
  // its output gradient in its place. nullptr: none.
  void leave_input_gradient_to(BatchNorm2d* bn) { input_gradient_to_ = bn; }
  // O4: `conv` is the FP8 convolution after this layer's fused activation: training forwards also
  // write their output rounded to FP8 and back as conv's state says (input_rounding) into a tensor
  // of their own and hand it over (take_rounded_input), the rounding pass conv would run (the
  // GPU's 8-channel kernel writes both). nullptr: none.
  void round_output_for(Conv2d* conv) { rounds_output_for_ = conv; }
  Conv2d* rounds_output_for() const { return rounds_output_for_; }

 private:
  Tensor compute_weight();  // the weight in the compute dtype (a fresh cast at O1)
  // t as the FP8 operand of `state` reads it (a fresh tensor), recording its amax when `record`;
  // with codes, also t's codes (a fresh u8 tensor of t's shape) from the same pass.
  Tensor fp8_operand(const Tensor& t, const Fp8Scaling& state, bool record, Tensor* codes = nullptr) const;
  // The shapes of this layer's passes on an input of shape x as the FP8 convolution ops take them:
  // the convolution's x, w and y, or, transposed, those of the convolution from its output to its
  // input; nullopt where the layer has no FP8 codes paths (no FP8, not f16, another input width).
  std::optional<std::array<Shape, 3>> codes_shapes(const Shape& x) const;
  // Whether a training forward of an input of shape x runs all its passes from FP8 codes, its
  // forward, its input gradient (input_codes, output_gradient_rounding).
  bool runs_on_codes(const Shape& x) const;
  bool forward_runs_on_codes(const Shape& x) const;
  bool input_gradient_runs_on_codes(const Shape& x) const;
  // The weight's shape with in_channels input channels: in_padded_, or in_ for a transposed
  // convolution of 1x1 maps in a small batch, a GEMM that takes any channel count (conv_gemm.h).
  Shape padded_weight_shape(int64_t in_channels) const;
  // t itself when its first two sizes are dim0 x dim1, else a zero-padded (or trimmed) copy.
  Tensor padded(const Tensor& t, int64_t dim0, int64_t dim1) const;
  int64_t in_, out_;
  // Channel counts the convolution runs with: multiples of 8 on the GPU, but an image's 1 or 3
  // where the 8-channel kernels take them as they are (D's first and G's last layer).
  int64_t in_padded_, out_padded_;
  bool keep_padded_output_ = false;
  int64_t input_channels_ = 0;  // of the latest forward's input: in_, or in_padded_ if it came padded
  int kernel_;
  bool transposed_;
  Conv2dParams p_;
  const PrecisionPolicy& policy_;
  Placement where_;
  Param weight_;
  std::optional<ops::FusedActivation> fused_;
  std::optional<ops::FusedActivation> input_activation_;
  bool gradient_through_activation_ = false;
  BatchNorm2d* moments_for_ = nullptr;
  Tensor given_x_, given_w_, given_y_;  // give_output's, until the next forward
  bool took_output_ = false;
  BatchNorm2d* input_gradient_to_ = nullptr;
  bool input_converted_ = false;        // the latest forward's input came in another dtype or layout
  Tensor saved_x_, saved_w_, saved_y_;  // saved_y_: the fused activation's output
  std::shared_ptr<Fp8ConvScaling> fp8_;
  bool record_amax_ = true;
  // The weight's E4M3 codes, kept by a training forward whose backward-data reads codes.
  Tensor saved_w_codes_, saved_w_fragments_;  // and the input gradient's fragments, where formed
  Tensor formed_w_, formed_w_codes_;          // form_fp8_weight's, until drop_formed_fp8_weight
  std::array<Tensor, 2> formed_w_fragments_;  // form_fp8_weight_fragments', by ops::Fp8WeightPass
  bool weight_codes_read_ = false;            // by the latest training forward (what form_fp8_weight writes)
  Tensor rounded_dy_, rounded_dy_codes_;      // take_rounded_output_gradient's, until the next backward
  bool rounded_dy_codes_only_ = false, given_x_codes_only_ = false;
  bool took_rounded_gradient_ = false, took_gradient_codes_ = false;
  Tensor rounded_of_, rounded_x_;  // take_rounded_input's, until the next forward
  Tensor given_x_codes_;           // take_input_codes', until the next forward
  Tensor saved_x_codes_;           // the latest training forward's input codes, for the filter gradient
  Conv2d* rounds_output_for_ = nullptr;
  bool took_rounded_input_ = false, took_input_codes_ = false;
  // Every twin's weight gradient (twin()): one buffer, zeroed once, that each step's twin writes
  // before reading it (the twins of successive steps run one after another).
  mutable Tensor twin_grad_;
};

class BatchNorm2d : public Layer {
 public:
  BatchNorm2d(int64_t channels, const PrecisionPolicy& policy, Placement where);
  LayerKind layer_kind() const override { return LayerKind::BatchNorm; }
  Tensor forward(const Tensor& x, bool training) override;
  Tensor backward(Tensor dy, bool want_param_grads, bool want_input_grad) override;
  std::vector<Param*> params() override { return {&gamma_, &beta_}; }
  std::vector<Buffer> buffers() override;
  // The twin's training forwards update the shared running statistics after the latest one of
  // this layer or another twin that was issued before them, whichever lane it ran on.
  std::unique_ptr<Layer> twin() const override;
  std::string describe() const override;
  std::string precision() const override;
  Tensor& running_mean() { return running_mean_; }
  Tensor& running_var() { return running_var_; }
  // Off: a training-mode forward uses batch statistics but leaves the running ones (and the
  // batch counter) alone, so looking at samples never changes the state of a run.
  void set_update_running_stats(bool on) { update_running_stats_ = on; }
  bool update_running_stats() const { return update_running_stats_; }
  // The activation layer after this one runs inside it (ops::batchnorm_activation_*): forward
  // returns the activation's output, backward takes that output's gradient.
  void fuse_activation(const ops::FusedActivation& act) { fused_ = act; }
  // --sync-bn: batch statistics over every replica, through this all-reduce (sums, in place),
  // in training forwards that update the running statistics (not in a look at samples).
  void sync_statistics(std::function<void(const Tensor&)> all_reduce_sum);
  bool synced() const { return sync_.has_value(); }
  // The next training forward's input `of` comes with its per-channel moments (Conv2d::
  // form_moments_for), taken instead of reading it where the forward can (not across replicas).
  bool takes_moments() const { return fused_.has_value() && !(sync_ && update_running_stats_); }
  void give_moments(const Tensor& of, Tensor moments);
  bool took_moments() const { return took_moments_; }  // the latest training forward did
  // The next layers are an activation fused into this one and `head`, a convolution that takes
  // each image whole (Conv2d::can_take_dots): training forwards form head's output as they write
  // theirs (ops::batchnorm_activation_forward_train_dot) where the GPU can, and give it to head
  // (D's last BatchNorm and D's last layer). nullptr: none.
  // The link goes both ways: head's backward leaves its backward-data to this layer's backward,
  // which forms it where it reads it (ops::batchnorm_activation_backward_outer) or runs it.
  void form_dots_for(Conv2d* head);
  Conv2d* dots_for() const { return dots_for_; }
  // From dots_for_'s backward: its output gradient and filter, and its parameters, for the
  // backward-data this layer's next backward forms; `dlogits` itself is what reaches that backward
  // as dy, standing for the gradient.
  void give_outer_gradient(const Tensor& dlogits, const Tensor& w, const Conv2dParams& p);
  bool took_outer_gradient() const { return took_outer_gradient_; }  // the latest backward formed it
  bool fused() const { return fused_.has_value(); }
  // O4: `conv` is the FP8 convolution whose output this layer normalizes. Backward writes its input
  // gradient, that convolution's output gradient, rounded to FP8 and back as the convolution's
  // state says (Conv2d::output_gradient_rounding) where the fused backward runs, and hands it over
  // (Conv2d::take_rounded_output_gradient): the rounding pass the convolution would run, saved.
  // With the gradient's FP8 codes too where the convolution asks for them. nullptr: none.
  void round_gradient_for(Conv2d* conv) { rounds_gradient_for_ = conv; }
  Conv2d* rounds_gradient_for() const { return rounds_gradient_for_; }
  // O4: `conv` is the FP8 convolution after this layer's fused activation. Training forwards write
  // their output, that convolution's input, rounded to FP8 and back as the convolution's state says
  // (Conv2d::input_rounding) and hand it over (Conv2d::take_rounded_input): the rounding pass the
  // convolution would run, saved. Only where the backward forms the activation's gradient from x
  // alone (ops::batchnorm_activation_backward_recomputes) and the statistics are this replica's: the
  // output the backward would read is no longer the activation's. nullptr: none.
  void round_output_for(Conv2d* conv) { rounds_output_for_ = conv; }
  Conv2d* rounds_output_for() const { return rounds_output_for_; }

  static constexpr float kMomentum = 0.1f;
  static constexpr float kEps = 1e-5f;

 private:
  int64_t channels_;
  const PrecisionPolicy& policy_;
  Placement where_;
  Param gamma_, beta_;
  Tensor running_mean_, running_var_;
  // Shared with twins: the running statistics' batch counter, and the point of the lane where
  // the latest forward that updated them was issued.
  struct RunningUpdates {
    int64_t batches_tracked = 0;
    ConcurrentRegion::Mark latest;
  };
  std::shared_ptr<RunningUpdates> running_updates_ = std::make_shared<RunningUpdates>();
  bool update_running_stats_ = true;
  std::optional<ops::FusedActivation> fused_;
  std::optional<ops::BatchNormSync> sync_;
  bool synced_forward_ = false;  // the latest training forward took the statistics over all replicas
  Tensor saved_x_, saved_y_, save_mean_, save_invstd_;
  Tensor moments_, moments_of_;  // give_moments', until the next forward
  bool took_moments_ = false;
  Conv2d* dots_for_ = nullptr;
  Tensor outer_dlogits_, outer_w_;  // give_outer_gradient's, until the next backward
  Conv2dParams outer_params_;
  bool took_outer_gradient_ = false;
  Conv2d* rounds_gradient_for_ = nullptr;
  Conv2d* rounds_output_for_ = nullptr;
  // dx, handed to rounds_gradient_for_ as rounded when round_dx rounded it.
  Tensor rounded_for_convolution(Tensor dx, const ops::Fp8RoundTrip* round_dx);
  // The training forward with dots_for_'s output formed and handed to it; false, having run
  // nothing, where it cannot be.
  bool forward_forming_dots(const Tensor& x, Tensor& running_mean, Tensor& running_var, Tensor& y);
};

// ReLU(True) / LeakyReLU(0.2, True) / Tanh: in place, as the example writes them.
class ActivationLayer : public Layer {
 public:
  explicit ActivationLayer(ops::Activation kind, float slope = 0.2f) : kind_(kind), slope_(slope) {}
  LayerKind layer_kind() const override { return LayerKind::Activation; }
  Tensor forward(const Tensor& x, bool training) override;
  Tensor backward(Tensor dy, bool want_param_grads, bool want_input_grad) override;
  std::unique_ptr<Layer> twin() const override;
  std::string describe() const override;
  std::string precision() const override {
    return fused_ ? "in the dtype that arrives (computes in f32), fused into the layer before it"
                  : "in the dtype that arrives (computes in f32)";
  }
  ops::Activation kind() const { return kind_; }
  float slope() const { return slope_; }
  // The BatchNorm2d or Conv2d before it computes this activation (their fuse_activation): this
  // layer passes values and gradients through unchanged.
  void set_fused_into_previous(bool on) { fused_ = on; }

 private:
  ops::Activation kind_;
  float slope_;
  bool fused_ = false;
  Tensor saved_y_;
};

// One fusion across layers (src/nn/fusion_plan.h plans them): a layer doing part of another's work,
// bitwise what the separate layers compute, except the moments a transposed convolution forms for
// its BatchNorm (the same statistics summed in another order: ops.h).
struct Fusion {
  enum class Kind {
    // BatchNorm2d + ReLU/LeakyReLU: the BatchNorm's kernels apply the activation.
    ActivationIntoBatchNorm,
    // Conv2d (output written without channel padding) + activation: the convolution applies it.
    ActivationIntoConv,
    // ConvTranspose2d + BatchNorm2d: the convolution forms its output's moments for the BatchNorm.
    MomentsForBatchNorm,
    // BatchNorm2d (activation fused) + activation + Conv2d with one output per image (D's last
    // layer): the BatchNorm forms that convolution's output as it writes its own.
    DotsForHead,
    // G's last layer (Tanh fused) + D's first layer: D's first layer takes the input gradient of
    // G's pass through D on through Tanh as it writes it.
    TanhGradientIntoD,
    // Conv2d with FP8 operands (O4) + BatchNorm2d (activation fused): the BatchNorm's backward
    // writes the convolution's output gradient rounded to FP8 and back, the convolution's own
    // rounding pass (the same values and amax).
    Fp8GradientFromBatchNorm,
    // BatchNorm2d (activation fused) + its activation + Conv2d with FP8 operands (O4): the
    // BatchNorm's training forward writes its output rounded to FP8 and back, the convolution's
    // input rounding pass (the same values and amax), where its backward never reads that output.
    Fp8InputFromBatchNorm,
    // Conv2d (activation fused) + its activation + Conv2d with FP8 operands (O4; D's first two
    // layers): the first's training forward also writes its output rounded to FP8 and back into a
    // second tensor, which the second reads instead of rounding its input (the first's backward
    // reads its own output).
    Fp8InputFromConv,
  };
  Kind kind;
  size_t layer;    // the layer doing the work (in G for TanhGradientIntoD)
  size_t partner;  // the layer whose work it does (in D for TanhGradientIntoD)
  std::string describe() const;
};

// The example's nn.Sequential called `main`: layer i is state_dict prefix "main.i.".
class Sequential {
 public:
  void add(std::unique_ptr<Layer> layer) { layers_.push_back(std::move(layer)); }
  Tensor forward(const Tensor& x, bool training);
  // want_param_grads=false skips every weight gradient (G's step through D needs only dx).
  Tensor backward(const Tensor& dy, bool want_param_grads, bool want_input_grad);
  std::vector<std::unique_ptr<Layer>>& layers() { return layers_; }
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  // Every BatchNorm2d's running statistics, and every FP8 convolution's amax recording.
  void set_update_running_stats(bool on);
  // Layer::twin of every layer: the same network for a second pass in flight at once, its layers
  // fused and linked as this network's are.
  std::unique_ptr<Sequential> twin() const;
  // Plans the fusions within this network (plan_fusion) and applies them; once, after the last add.
  void fuse();
  const std::vector<Fusion>& fusion() const { return fusion_; }
  std::vector<Param*> params();
  // PyTorch state_dict: "main.<i>.<name>" -> tensor (CPU, f32 weights as stored, i64 counters).
  std::vector<std::pair<std::string, Param*>> named_params();
  std::vector<std::pair<std::string, Buffer>> named_buffers();
  // O4: every FP8 convolution's scaling, "main.<i>" -> state (Conv2d::fp8).
  std::vector<std::pair<std::string, Fp8ConvScaling*>> named_fp8_scalings();
  // O4: Conv2d::form_fp8_weight of every FP8 layer, run in one ops::fp8_round_trip_all, then
  // their form_fp8_weight_fragments in one ops::fp8_weight_fragments_all: the training passes
  // until drop_fp8_weights read each weight as rounded and laid out there, once for every forward
  // on this version of the weights. Nothing may change the weights in between (the
  // trainer forms D's again after D's optimizer step).
  void form_fp8_weights();
  void drop_fp8_weights();

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Fusion> fusion_;
};

struct NetConfig {
  int image_size = 64;  // power of two, 16..512
  int64_t nz = 100, ngf = 64, ndf = 64, nc = 3;
};
void validate(const NetConfig& cfg);  // throws ge::Error naming the bad value and the accepted range

// Generator: z (N, nz, 1, 1) -> image (N, nc, S, S) in [-1, 1].
std::unique_ptr<Sequential> make_generator(const NetConfig& cfg, const PrecisionPolicy& policy, Placement where);
// Discriminator: image -> logits (N, 1, 1, 1).
std::unique_ptr<Sequential> make_discriminator(const NetConfig& cfg, const PrecisionPolicy& policy, Placement where);

// Sets a parameter (and its master copy) from f32 values in logical layout on any device.
void assign_param(Param& p, const Tensor& values);

// DCGAN weights_init: conv weights N(0, 0.02); BatchNorm weight N(1, 0.02), bias 0.
// Draws from Philox with (seed, stream) so CPU and GPU networks start identical.
void weights_init(Sequential& net, uint64_t seed, uint64_t stream);

}  // namespace ge::nn
