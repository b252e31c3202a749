// The op interface. Each op dispatches on its tensors' device to the CPU reference
// (kernels/cpu, namespace ge::cpu) or the CUDA implementation (kernels/cuda, ge::gpu).
// All tensors of one call live on one device; outputs are allocated by the caller.
//
// Precision contract, the same on both backends:
//  - floating tensors may be f32, f16 or bf16 (f64 on the CPU only);
//  - convolutions accumulate in fp32 (fp64 on the CPU reference) and round once to the
//    output dtype; fp32 convolutions never use TF32 unless allow_tf32 is set;
//  - element-wise ops compute in fp32 from whatever arrives and round once on store
//    (PyTorch's "opmath" behaviour for half tensors);
//  - reductions (BatchNorm statistics, BCE, finite checks) accumulate in fp32 or wider.
#pragma once
#include <functional>
#include <vector>

#include "ganengine/fp8.h"
#include "ganengine/tensor.h"

namespace ge {

struct Conv2dParams {
  int stride = 1;
  int pad = 0;
  bool allow_tf32 = false;  // only meaningful for f32 on the GPU
};

// Output spatial size of a convolution / of a transposed convolution.
int64_t conv_out_size(int64_t in, int64_t kernel, int stride, int pad);
int64_t conv_transpose_out_size(int64_t in, int64_t kernel, int stride, int pad);

namespace ops {

// ---- convolution: x (N,C,H,W), w (K,C,R,S) -> y (N,K,P,Q); bias-free, dilation 1, groups 1.
// Forward and backward-filter (and their fused-activation forms) also take an x with fewer
// channels than w: the missing ones are zeros (a channel-padded layer's image batch, read as it
// is by the GPU's 8-channel kernels and padded by a copy where another kernel runs).
// Backward-data takes a narrower dx too: it gets the first dx.dim(1) channels of the gradient
// (a channel-padded layer's gradient for its image batch, written by the GPU's 8-channel
// kernel as it is, trimmed from a full-width copy elsewhere). So does a transposed
// convolution's forward, whose output is that dx.
void conv2d_forward(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p);
void conv2d_backward_data(const Tensor& dy, const Tensor& w, Tensor& dx, const Conv2dParams& p);
// dw = beta * dw + grad; beta is 0 (overwrite) or 1 (accumulate).
void conv2d_backward_filter(const Tensor& x, const Tensor& dy, Tensor& dw, const Conv2dParams& p, float beta = 0.f);

// GPU convolution algorithms: off (the default), cuDNN's fastest algorithm for each shape, which
// may accumulate with atomics and so differ from run to run in the last bits; on, only algorithms
// cuDNN reports as deterministic. Process-wide; a shape's choice is cached per setting. The CPU
// reference is always deterministic.
void set_deterministic_convolutions(bool on);
bool deterministic_convolutions();

// ---- transposed convolution: x (N,Cin,H,W), w (Cin,Cout,R,S) as PyTorch stores it -> y (N,Cout,Ho,Wo).
// It is the adjoint of conv2d, so each of its passes is one of conv2d's.
void conv_transpose2d_forward(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p);
void conv_transpose2d_backward_data(const Tensor& dy, const Tensor& w, Tensor& dx, const Conv2dParams& p);
void conv_transpose2d_backward_filter(const Tensor& x, const Tensor& dy, Tensor& dw, const Conv2dParams& p,
                                      float beta = 0.f);

// An op's output rounded to FP8 and back as the op writes it: bitwise what fp8_round_trip(out,
// scale, scale_inv, format, out, amax) leaves, without that pass over the output (O4's output
// gradients, formed where the BatchNorm backward writes them). The ops that take one say so.
struct Fp8RoundTrip {
  Tensor scale, scale_inv;  // f32 (1) each, on the op's device
  Fp8Format format = Fp8Format::E4M3;
  Tensor amax;  // f32 (1) that the output's amax is folded into; undefined: none recorded
  // u8 of the output's shape and memory format that also receives each value's FP8 code
  // (ops::fp8_quantize of the value before rounding: the code the rounded value stands for);
  // undefined: none written.
  Tensor codes;
  // With codes: the caller reads only the codes, so the op may leave the output's values unwritten
  // (the GPU's BatchNorm passes then write y's or dx's codes alone, a byte a value instead of
  // three; elsewhere the output is written as without it). Never read the output after such a call.
  bool codes_only = false;
};

// ---- BatchNorm2d. x, y, dy, dx: activations (f32/f16/bf16, NCHW or NHWC).
// gamma, beta, running_mean, running_var: (C) in f32 (keep_batchnorm_fp32) or the activation's
// half type (O3). save_mean, save_invstd: (C) f32, written by the training forward.
// The running statistics use the unbiased batch variance; a channel whose batch statistics are
// not finite leaves its running statistics untouched.
// Statistics over every replica of a data-parallel run (--sync-bn, PyTorch's SyncBatchNorm): the
// op hands per-channel sums to all_reduce_sum, which must replace them in place by their sums
// over all replicas (every replica calls the op at the same point). The forward combines the
// replicas' counts, means and squared deviations (Chan et al.), so batch and running statistics
// are the whole global batch's; the backward sums dy and dy*(x - mean) over all replicas for dx,
// while dgamma and dbeta stay this replica's (averaged later with the other gradients).
// total_count: f32 (1) on the op's device, written by the forward, read by the backward.
struct BatchNormSync {
  std::function<void(const Tensor&)> all_reduce_sum;
  Tensor total_count;
};

void batchnorm_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                             Tensor& running_var, float momentum, float eps, Tensor& y, Tensor& save_mean,
                             Tensor& save_invstd, const BatchNormSync* sync = nullptr);
void batchnorm_forward_eval(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                            const Tensor& running_var, float eps, Tensor& y);
// dgamma, dbeta have gamma's dtype and are overwritten.
void batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,
                        const Tensor& save_invstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                        const BatchNormSync* sync = nullptr);

// ---- activations. y may be x (in place, as the example's ReLU(True)). Backward reads the
// output y, which is all an in-place activation keeps; dx may be dy.
enum class Activation { ReLU, LeakyReLU, Tanh };
struct FusedActivation {
  Activation kind = Activation::ReLU;
  float negative_slope = 0.2f;
};

// ---- BatchNorm2d followed by an in-place activation, as one op: bitwise the two ops in
// sequence (the normalised value is rounded to the activation dtype before the activation, and
// the activation's gradient before BatchNorm's backward), in fewer passes over memory on the GPU.
// The backward takes the activation's output y and the gradient dy of that output, and beta as
// the forward had it (the GPU's gradient sums recompute y from x, gamma and beta instead of
// reading it: bitwise the same gradient, one activation-sized read less).
// round_y (not with sync): y rounded to FP8 and back as it is written (in the pass that writes y on
// the GPU, by a round trip after it on the CPU), its amax recorded, its codes written where asked
// (instead of y with codes_only): O4's input of the FP8 convolution after the activation. y then
// no longer holds the activation's output, which the backward takes: only where
// batchnorm_activation_backward_recomputes says the backward never reads it.
void batchnorm_activation_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                                        Tensor& running_var, float momentum, float eps, const FusedActivation& act,
                                        Tensor& y, Tensor& save_mean, Tensor& save_invstd,
                                        const BatchNormSync* sync = nullptr, const Fp8RoundTrip* round_y = nullptr);
// Whether batchnorm_activation_backward without sync forms act's gradient from x, gamma and beta
// alone, never reading y: on the GPU with 16-bit activations and ReLU or LeakyReLU of slope >= 0
// (thresholds on x, kernels/cuda/batchnorm_math.cuh); never on the CPU.
bool batchnorm_activation_backward_recomputes(const Tensor& x, const FusedActivation& act);
// ---- BatchNorm statistics formed by the layer before it, as it writes its output (G's fourth
// transposed convolution on Hopper, kernels/cuda/conv/conv_phase_dgrad.h: the statistics pass's
// read of the layer's output is saved). conv_transpose2d_forward_moments writes y as
// conv_transpose2d_forward does, and y's per-channel moments: a (3, parts, C) f32 tensor of each
// part's count, mean and sum of squared deviations of the values as y stores them. It returns
// false having run nothing where no kernel forms them (the CPU, other shapes, other GPUs).
// batchnorm_activation_forward_train_moments is the training forward with x's batch statistics
// merged from those moments (the same statistics, summed in another order; GPU tensors only).
bool conv_transpose2d_forward_moments(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p,
                                      Tensor& moments);
void batchnorm_activation_forward_train_moments(const Tensor& x, const Tensor& moments, const Tensor& gamma,
                                                const Tensor& beta, Tensor& running_mean, Tensor& running_var,
                                                float momentum, float eps, const FusedActivation& act, Tensor& y,
                                                Tensor& save_mean, Tensor& save_invstd,
                                                const Fp8RoundTrip* round_y = nullptr);
// ---- BatchNorm2d + activation whose output goes whole into a convolution that sees each image
// at once (D's last layer: one output channel, a filter of the image's own size, no padding), as
// one training forward: with y and the statistics of batchnorm_activation_forward_train, bitwise,
// it writes dots (N, 1, 1, 1), each image's y times w (1, C, H, W, laid out as y), summed as the
// GPU's kernel for that convolution sums them (bitwise its conv2d_forward in f16 and bf16). So the
// convolution's forward reads no activation. Returns false having run nothing where no kernel
// does this: the CPU, NCHW, --sync-bn, unaligned or odd shapes, layers the GPU's BatchNorm takes
// in one launch (batch 64 at 64x64).
bool batchnorm_activation_forward_train_dot(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                            Tensor& running_mean, Tensor& running_var, float momentum, float eps,
                                            const FusedActivation& act, Tensor& y, Tensor& save_mean,
                                            Tensor& save_invstd, const Tensor& w, Tensor& dots);
// The backward of that pair given D's last layer's output gradient dlogits (N, 1, 1, 1) and its
// filter w instead of the gradient of y: bitwise batchnorm_activation_backward with dy = that
// layer's conv2d_backward_data(dlogits, w), the GPU forming dy where it reads it, never writing
// it. Half activations only (f32's backward-data is cuDNN's); false, having run nothing, on the
// CPU, NCHW, unaligned or odd shapes.
bool batchnorm_activation_backward_outer(const Tensor& x, const Tensor& y, const Tensor& dlogits, const Tensor& w,
                                         const Tensor& gamma, const Tensor& beta, const Tensor& save_mean,
                                         const Tensor& save_invstd, const FusedActivation& act, Tensor& dx,
                                         Tensor& dgamma, Tensor& dbeta, const Fp8RoundTrip* round_dx = nullptr);
void batchnorm_activation_forward_eval(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                       const Tensor& running_mean, const Tensor& running_var, float eps,
                                       const FusedActivation& act, Tensor& y);
// round_dx: dx rounded to FP8 and back as it is written (Fp8RoundTrip: in the pass that writes dx
// on the GPU, by a round trip after it on the CPU), with its amax recorded. So does _outer's.
void batchnorm_activation_backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& gamma,
                                   const Tensor& beta, const Tensor& save_mean, const Tensor& save_invstd,
                                   const FusedActivation& act, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                                   const BatchNormSync* sync = nullptr, const Fp8RoundTrip* round_dx = nullptr);
// ---- a convolution followed by an in-place activation (D's first layer and its LeakyReLU), as
// one op: bitwise the two ops in sequence (the convolution rounded to y's dtype before the
// activation). The backward-filter takes the activation's output y and that output's gradient
// dy, forms the activation's gradient (rounded as activation_backward stores it) and
// accumulates dw = beta * dw + the filter gradient, without writing that intermediate on the GPU
// where a fused kernel exists.
// With round_copy (an Fp8RoundTrip without codes) and `rounded` (y's shape, dtype and layout), also
// rounded = y rounded to FP8 and back, y itself unchanged, its amax recorded: bitwise
// fp8_round_trip(y, ..., rounded, amax) after the op, written as y is by the GPU's 8-channel kernel
// where it takes the layer with LeakyReLU (O4's input of the FP8 convolution after D's first layer,
// whose backward reads y). With round_copy's codes instead (rounded nullptr): y's codes, bitwise
// fp8_quantize(y, scale, format, codes), y unchanged and its amax folded in the same way, and no
// rounded copy (the input of that convolution where its passes read codes). With codes_only as
// well (ReLU or LeakyReLU): those codes with each one's sign bit set where y is not > 0 (the +0s
// and NaNs keep their values; every other code is fp8_quantize's), and y's values unwritten on
// the GPU (never read y after it): the backward passes below then take the codes as y, so that
// the layer's output is kept as a byte a value. On the GPU only where
// conv2d_activation_runs_from_codes says so (an error elsewhere).
void conv2d_activation_forward(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p,
                               const FusedActivation& act, const Fp8RoundTrip* round_copy = nullptr,
                               Tensor* rounded = nullptr);
// For ReLU and LeakyReLU, y may be the u8 codes a forward with codes_only wrote: y > 0 where a
// code's sign bit is clear (bitwise what y itself gives).
void conv2d_activation_backward_filter(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dw,
                                       const Conv2dParams& p, const FusedActivation& act, float beta = 0.f);
// dx = backward_data(the activation's gradient, w), that gradient formed from y and dy as above
// (G's pass through D, where only D's input gradient is wanted). dx may hold fewer channels
// than w, as conv2d_backward_data's.
// input: the activation whose output the convolution's input x is (G's Tanh before D's first
// layer), or nullptr. Given, dx is taken on through it: dx = activation_backward(input->act,
// input->x, dx), bitwise the two ops in sequence; the GPU forms it as it writes dx.
struct InputActivation {
  FusedActivation act;
  Tensor x;  // the convolution's input: the activation's output, dx's shape
};
void conv2d_activation_backward_data(const Tensor& y, const Tensor& dy, const Tensor& w, Tensor& dx,
                                     const Conv2dParams& p, const FusedActivation& act,
                                     const InputActivation* input = nullptr);
// Whether conv2d_activation_forward with codes_only and both backward passes on those codes run
// on `device` for a 16-bit (f16, bf16) convolution of these shapes (x NCHW-ordered dims, w's the weight's as the
// layer keeps it) and activation: on the GPU, the 8-channel kernels' shapes with x's own 1 or 3
// channels and 64 output channels, with LeakyReLU (D's first layer); false on the CPU, where O4
// runs no pass from codes.
bool conv2d_activation_runs_from_codes(const Shape& x, const Shape& w, const Shape& y, const Conv2dParams& p,
                                       const FusedActivation& act, Device device);
// ---- a transposed convolution followed by an in-place activation (G's last layer and its Tanh),
// as one op: bitwise the two ops in sequence (the convolution rounded to y's dtype first); on the
// GPU the 8-channel kernel takes the activation as it writes y. y may hold fewer channels than
// w's output channels, as conv_transpose2d_forward's.
void conv_transpose2d_activation_forward(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p,
                                         const FusedActivation& act);
const char* activation_name(Activation a);
void activation_forward(Activation a, const Tensor& x, Tensor& y, float negative_slope = 0.2f);
void activation_backward(Activation a, const Tensor& y, const Tensor& dy, Tensor& dx, float negative_slope = 0.2f);

// ---- BCEWithLogits with mean reduction against a constant label (1 = real, 0 = fake).
// logits: any floating dtype, numel N. loss: f32 (1): mean of max(x,0) - x*t + log1p(exp(-|x|)).
// mean_sigmoid: f32 (1), the mean probability D reports, or an undefined tensor to skip it.
void bce_with_logits_forward(const Tensor& logits, float target, Tensor& loss, Tensor& mean_sigmoid);
// dlogits (logits' dtype) = (sigmoid(x) - t) * (scale / N); scale is an f32 (1) tensor on the
// same device holding the loss scale (1 when unscaled).
void bce_with_logits_backward(const Tensor& logits, float target, const Tensor& scale, Tensor& dlogits);

// ---- casts between f32, f16, bf16 (and f64 on the CPU), round to nearest even. Same shape;
// dst keeps its own memory format (a cast can also convert layout).
void cast(const Tensor& src, Tensor& dst);
// A new tensor holding src's values in another dtype, layout and/or device (a copy even when
// nothing changes). Floating dtypes only.
Tensor converted(const Tensor& src, DType dtype, MemoryFormat format, Device device);

// ---- loss-scale bookkeeping, all state on the device.
// For each i: dst[i] = src[i] * (1/scale) (+ dst[i] when accumulate). dst tensors are f32;
// src tensors any floating dtype of the same numel. found_inf (f32 (1)) is set to 1 when any
// element of any src is not finite; it is never cleared here.
void unscale_grads(const std::vector<Tensor>& src, const std::vector<Tensor>& dst, const Tensor& scale,
                   Tensor& found_inf, bool accumulate);
// Multiplies every element of t by factor (used for tests and for O3 static scales).
void scale_inplace(const Tensor& t, float factor);

// dst[n,c,h,w] = src[n,c,h,w] where src has that element, else 0: pads (or trims) the first two
// dimensions of a 4-D tensor. src and dst share dtype, memory format and the last two sizes.
// Half-precision NHWC convolutions run on Tensor Cores only with channel counts that are
// multiples of 8; Conv2d pads DCGAN's 3-channel images and 100-channel noise (its 1-channel logits
// come from a hand-written dot product per image instead, kernels/cuda/conv/conv_scalar.h).
void copy_padded(const Tensor& src, Tensor& dst);
// t itself when its second dimension already holds `channels`, else a copy (copy_padded) with
// that many: zeros added, or the last ones cut.
Tensor with_channels(const Tensor& t, int64_t channels);
// write(t) when t's second dimension holds `channels`, else write(full) into a tensor like t
// with that many, trimmed (copy_padded) into t afterwards: for kernels that write every channel
// of a wider result when the caller wants only the first ones (a narrow backward-data).
void write_with_channels(Tensor& t, int64_t channels, const std::function<void(Tensor&)>& write);

// Dynamic loss scaler state: f32 scale (1), i32-as-f32 clean-step counter (1).
struct ScalerConfig {
  bool dynamic = true;
  int growth_interval = 2000;            // clean steps before doubling
  float max_scale = 16777216.f;          // 2^24
  float min_scale = 1.52587890625e-05f;  // 2^-16
};
// Apex update_scale on the device: on overflow scale = max(min, scale/2) and counter = 0,
// else counter += 1 and at growth_interval scale = min(max, 2*scale), counter = 0.
// state: f32 (2) = {scale, clean_steps}. found_inf: f32 (1).
void loss_scaler_update(Tensor& state, const Tensor& found_inf, const ScalerConfig& cfg);

// ---- Adam, PyTorch semantics: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps), computed in fp32.
// params, exp_avg, exp_avg_sq share one dtype per index: f32, or f16/bf16 for a pure-half
// model (O3: each buffer rounded once on store); grads are f32. step: f32 (1) on the device,
// incremented here unless skipped. skip: f32 (1..8); any nonzero element means "one of this
// optimizer's losses overflowed": nothing changes. half_copies (optional; empty, or one per
// param where an undefined tensor means none): f16/bf16 model copies of f32 masters, written
// with the updated values rounded.
struct AdamConfig {  // doubles, like the Python floats PyTorch takes them as
  double lr = 2e-4;
  double beta1 = 0.5;
  double beta2 = 0.999;
  double eps = 1e-8;
};
// Gradients still to be unscaled: with `pending`, adam_step updates with the gradients that
// unscale_grads(pending->src, grads, scale, found_inf, accumulate) would leave in grads (and
// raises the flag as it would, also on a skipped step), forming them element by element as it
// reads them, in the same pass as the update; they are written into grads only with store_grads
// (otherwise grads keep what they held). For static loss scaling, where nothing decides on
// found_inf before the update. src[i]: the dtype of params[i].
struct PendingGrads {
  std::vector<Tensor> src;
  Tensor scale;      // f32 (1)
  Tensor found_inf;  // f32 (1)
  bool accumulate = false;
  bool store_grads = true;
};
void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& exp_avg,
               const std::vector<Tensor>& exp_avg_sq, Tensor& step, const Tensor& skip, const AdamConfig& cfg,
               const std::vector<Tensor>& half_copies = {}, const PendingGrads* pending = nullptr);

// ---- exponential moving average of weights (--ema-decay), for every i and element:
//   average[i] = decay * average[i] + (1 - decay) * value[i]
// computed in fp32 as two products and a sum, each rounded to f32 (no fused multiply-add), so
// the CPU and the GPU agree bitwise; decay and 1 - decay are the f32 roundings of the doubles.
// averages are f32; values any floating dtype of the same numel, stored in the same element
// order (the same shape and memory format, or a layout whose order does not differ). One
// multi-tensor launch on the GPU, capturable in a CUDA graph.
void ema_update(const std::vector<Tensor>& averages, const std::vector<Tensor>& values, double decay);

// ---- FP8 (ganengine/fp8.h; opt level O4).
// Codes are u8 tensors of the shape and memory format of the values they stand for; scale,
// scale_inv and amax are f32 (1) tensors on the op's device, read and written there only, so each
// op is capturable in a CUDA graph. The element arithmetic is core/fp8_scaling_math.h on both
// backends, so their results agree bitwise.
//
// q = FP8(x * scale), the product rounded to f32 and then to the format, nearest even, saturating
// (a finite value or an infinity beyond the range becomes the largest finite of its sign; a NaN
// becomes the positive NaN code, 0x7F). In the same pass amax = max |x| over x as it arrives (not
// scaled), overwritten: 0 for an empty x, NaN (0x7fc00000) when any element is NaN, as torch.amax
// gives it and as the recipe needs it (a NaN must keep the scale, not be skipped over). amax may be
// a view into an Fp8Scaling's history (current_amax()) but not alias scale (the GPU zeroes amax
// first). x: f32, f16 or bf16.
void fp8_quantize(const Tensor& x, const Tensor& scale, Fp8Format format, Tensor& q, Tensor& amax);
// y = decode(q) * scale_inv, rounded to f32 and then once to y's dtype (f32, f16 or bf16). A NaN
// is 0x7fc00000 in f32 and some NaN in the half types (bitwise only among non-NaN values there, as
// for cast).
void fp8_dequantize(const Tensor& q, const Tensor& scale_inv, Fp8Format format, Tensor& y);
// One step of the delayed-scaling recipe (Fp8DelayedScaling) for every state at once: each scale
// and scale_inv from its history, then the history rolled. Every history holds
// recipe.amax_history_len entries; all states on one device, no two sharing a tensor (one launch
// per 64 states on the GPU).
void fp8_update_scales(const std::vector<Fp8Scaling>& states, const Fp8DelayedScaling& recipe);
// y = the values an FP8 Tensor Core convolution reads for x: fp8_quantize with scale, then
// fp8_dequantize with scale_inv, in one pass, rounded once to y's dtype; a non-finite x stays as it
// is (an overflow must reach the loss scaler, not saturate away). With amax (f32 (1), a state's
// current_amax()), max |x| is folded into it (NaN propagating, as fp8_quantize forms it): it is
// not overwritten, so every pass of a step over one state's tensors leaves their maximum, in any
// order. x and y: f32, f16 or bf16 of one shape and memory format; y may be x. With codes (u8 of
// x's shape and memory format), each value's code is written there in the same pass: fp8_quantize's
// with scale, the code the rounded value stands for (a weight's rounded values and the codes an
// FP8 kernel reads, from one read of the weight).
void fp8_round_trip(const Tensor& x, const Tensor& scale, const Tensor& scale_inv, Fp8Format format, Tensor& y,
                    const Tensor* amax = nullptr, Tensor* codes = nullptr);
// One fp8_round_trip's operands: y and codes as there, amax and codes undefined for none.
struct Fp8RoundTripOf {
  Tensor x, scale, scale_inv;
  Fp8Format format = Fp8Format::E4M3;
  Tensor y, amax, codes;
};
// fp8_round_trip of each of `trips`, all on one device, bitwise as one call each, with no y or codes
// among them overlapping another's tensors. On the GPU one launch for up to eight where all are of
// one 16-bit dtype and format, x and y 16-byte aligned, codes 8-byte aligned (O4's weights, each
// version of a network's weights rounded in one launch: nn::Sequential::form_fp8_weights).
void fp8_round_trip_all(const std::vector<Fp8RoundTripOf>& trips);

// ---- FP8 convolutions. Emulated on any device: the operands dequantized to f32 and conv2d's
// passes run on those values in f32 (allow_tf32 off), so the result is exactly what the selected
// convolution computes from the FP8 operands (on the CPU reference: the reference convolution of
// the dequantized values, bitwise). On a compute capability 9.0 GPU, the forward and backward-data
// shapes that kernels/cuda/conv/fp8_conv_wgmma.h takes, and the backward-filter of D's 64 -> 128
// layer (conv_fp8_wgrad.h), run on FP8 Tensor Cores instead: the sums of the codes' products in
// the MMAs' f32 accumulators, in their order, times both scale_invs.
// Weights are E4M3; the other operands E4M3 or E5M2, as the layer assigns them (Transformer
// Engine's HYBRID: activations E4M3, output gradients E5M2). A transposed convolution's passes
// are these passes with the operands swapped (its forward is a backward-data, of an activation),
// as in conv_transpose2d_*.
//
// x quantized with its state's scale, this step's amax written into the state's current_amax().
Fp8Tensor fp8_quantized(const Tensor& x, const Fp8Scaling& state);
// The f32 values an FP8 tensor stands for (fp8_dequantize into a new tensor of its shape and layout).
Tensor fp8_dequantized(const Fp8Tensor& q);
// y = conv2d_forward(x, w): f32, or f16 (the f32 result rounded once).
void fp8_conv2d_forward(const Fp8Tensor& x, const Fp8Tensor& w, Tensor& y, const Conv2dParams& p);
// dx = conv2d_backward_data(dy, w): f32, or f16 as above.
void fp8_conv2d_backward_data(const Fp8Tensor& dy, const Fp8Tensor& w, Tensor& dx, const Conv2dParams& p);
// fp8_conv2d_backward_data into an f16 dx with dx's per-channel moments as
// conv_transpose2d_forward_moments forms them (O4's G fourth layer's forward from codes); false,
// having run nothing, where no kernel forms them (the CPU, other shapes, other GPUs).
bool fp8_conv2d_backward_data_moments(const Fp8Tensor& dy, const Fp8Tensor& w, Tensor& dx, const Conv2dParams& p,
                                      Tensor& moments);
// Whether fp8_conv2d_backward_data runs codes of these shapes (u8 NHWC) into an f16 NHWC dx on
// `device` on a kernel faster than conv2d_backward_data's half pass: the 128 -> 64-channel
// backward-data on 16 x 16 dy and the 256 -> 128-channel one on 8 x 8 dy (D's second and third
// layers' at 64x64 images, and so G's fourth and third layers' forwards) on a compute capability
// 9.0 GPU (docs/performance.md, "The FP8 warpgroup-MMA kernels"). Elsewhere the FP8 kernels are
// slower than rounding plus the half pass.
bool fp8_conv2d_backward_data_beats_half(const Shape& dy, const Shape& w, const Shape& dx, const Conv2dParams& p,
                                         Device device);
// Whether fp8_conv2d_forward runs codes of these shapes (u8 NHWC) into an f16 NHWC y on `device` on
// a kernel faster than conv2d_forward's half pass: the 64 -> 128-channel forward on 32 x 32 x and
// the 128 -> 256-channel one on 16 x 16 x (D's second and third layers at 64x64 images, and so
// the backward-data of G's fourth and third) on a compute capability 9.0 GPU.
bool fp8_conv2d_forward_beats_half(const Shape& x, const Shape& w, const Shape& y, const Conv2dParams& p,
                                   Device device);
// Whether all three passes of a convolution of these shapes (x and y u8 NHWC codes or f16, the
// filter gradient f16) run on FP8 Tensor Core kernels on `device`, which beats rounding plus the
// half passes where x's codes are written in place of a rounded copy (docs/performance.md): D's
// 64 -> 128-channel layer on 32 x 32 inputs (and so G's 128 -> 64 transposed layer on 16 x 16
// inputs, whose passes are this convolution's) on a compute capability 9.0 GPU.
bool fp8_conv2d_runs_on_codes(const Shape& x, const Shape& w, const Shape& y, const Conv2dParams& p, Device device);
// The passes whose GPU kernels hold the weight in registers (the phase and resident-weights kernels
// of fp8_conv2d_forward_beats_half and fp8_conv2d_backward_data_beats_half) read w's codes laid out
// as each thread's MMA fragments, one launch a pass where w comes without them
// (Fp8Tensor::fragments). O4 lays out each version of a weight once instead
// (nn::Sequential::form_fp8_weights).
enum class Fp8WeightPass { Forward, BackwardData };  // fp8_conv2d_forward; fp8_conv2d_backward_data(_moments)
// Whether `pass` of a weight of shape `w` on `device` may read fragments laid out ahead: on a
// compute capability 9.0 GPU, w 128 x 64 x 4 x 4 or 256 x 128 x 4 x 4 (the passes' kernels take
// those weights only).
bool fp8_weight_pass_reads_fragments(const Shape& w, Fp8WeightPass pass, Device device);
struct Fp8WeightFragmentsOf {
  Tensor codes;  // the weight's E4M3 codes (u8 NHWC), of a shape fp8_weight_pass_reads_fragments takes
  Fp8WeightPass pass = Fp8WeightPass::Forward;
  Tensor fragments;  // u8 of the codes' bytes on their device, 16-byte aligned: written
};
// Lays out each weight's codes for its pass, in one launch for up to eight (none on the CPU, which
// has no such kernels: every job is refused there). A pass handed them reads them as w.fragments.
void fp8_weight_fragments_all(const std::vector<Fp8WeightFragmentsOf>& jobs);
// dw = beta * dw + conv2d_backward_filter(x, dy): f32 with beta 0 or 1, or f16 (the f32 result
// rounded once) with beta 0.
void fp8_conv2d_backward_filter(const Fp8Tensor& x, const Fp8Tensor& dy, Tensor& dw, const Conv2dParams& p,
                                float beta = 0.f);

// ---- random numbers: Philox4x32-10 keyed by seed, element i drawn from counter (offset + i/4).
// The same (seed, offset) gives bitwise the same values on the CPU and the GPU.
void fill_uniform(Tensor& t, uint64_t seed, uint64_t offset);  // [0, 1) in f32 (a half type may round up to 1)
void fill_normal(Tensor& t, uint64_t seed, uint64_t offset, float mean = 0.f, float stddev = 1.f);
// How many counter values fill_* consumes for n elements (so callers can advance offsets).
uint64_t philox_counters_for(int64_t n);

}  // namespace ops
}  // namespace ge
