#include "core/tuning_policy.h"
#include "ganengine/concurrent_region.h"
#include "ganengine/nn.h"

namespace ge::nn {

Conv2d::Conv2d(int64_t in, int64_t out, int kernel, int stride, int pad, bool transposed, const PrecisionPolicy& policy,
               Placement where)
    : in_(in), out_(out), kernel_(kernel), transposed_(transposed), policy_(policy), where_(where) {
  p_.stride = stride;
  p_.pad = pad;
  p_.allow_tf32 = policy.allow_tf32;
  // PyTorch's layouts: Conv2d (out, in, k, k); ConvTranspose2d (in, out, k, k).
  Shape shape = transposed ? Shape{in, out, kernel, kernel} : Shape{out, in, kernel, kernel};
  weight_.name = "weight";
  weight_.value = Tensor::zeros(shape, policy.weight_dtype, where.device, where.format);
  if (policy.master_weights && policy.weight_dtype != DType::F32)
    weight_.master = Tensor::zeros(shape, DType::F32, where.device, where.format);
  weight_.model_grad = Tensor::zeros(shape, policy.compute_dtype, where.device, where.format);
  weight_.grad = Tensor::zeros(shape, DType::F32, where.device, where.format);
  // Half-precision NHWC convolutions reach Tensor Cores only with channel counts that are
  // multiples of 8; cuDNN otherwise pads internally or falls back to slow kernels (the 3-channel
  // layers' passes ran at a fraction of Tensor Core activity). So the layer pads with
  // zeros itself: inputs and weights up, outputs and gradients back down. Zeros add nothing.
  // One output channel stays unpadded: D's last layer is a dot product per image, which the
  // GPU backend computes by hand (kernels/cuda/conv_scalar.h) without the padding and trimming
  // copies (and cuDNN still takes the shape when the kernel is smaller than the input).
  // Nor does the image side of D's first and G's last layer in half precision: the GPU's
  // 8-channel kernels (kernels/cuda/conv_8ch.h) read and write 1- or 3-channel images and
  // weights as their zero-padded copies, bitwise, so their forwards copy no weight and their
  // filter gradients are written without a trimming copy (at batch 64 four of those copies were
  // on the step's longest chain, 1-2 us each).
  if (where.device.is_cuda() && where.format == MemoryFormat::NHWC) {
    in_padded_ = (in + 7) / 8 * 8;
    out_padded_ = out == 1 && !transposed ? 1 : (out + 7) / 8 * 8;
    const bool half = policy.compute_dtype == DType::F16 || policy.compute_dtype == DType::BF16;
    const bool eight_channel_shape = half && kernel == 4 && stride == 2 && pad == 1;
    const int64_t image_side = transposed ? out : in, other_side = transposed ? in : out;
    if (eight_channel_shape && (image_side == 1 || image_side == 3) && (other_side == 64 || other_side == 128)) {
      if (transposed)
        out_padded_ = out;
      else
        in_padded_ = in;
    }
  } else {
    in_padded_ = in;
    out_padded_ = out;
  }
  // O4 leaves the layers with fewer than 8 channels on a side in half: the image layers and D's
  // 1-channel head. Together they hold under 3% of the step's FLOPs at 64x64, so FP8 could gain
  // little there, and 1 to 4 channels fall far short of an FP8 MMA's K of 32.
  if (policy.fp8_convolutions && in >= 8 && out >= 8) {
    fp8_ = std::make_shared<Fp8ConvScaling>();
    fp8_->input = make_fp8_scaling(Fp8Format::E4M3, policy.fp8_recipe, where.device);
    fp8_->weight = make_fp8_scaling(Fp8Format::E4M3, policy.fp8_recipe, where.device);
    fp8_->grad_output = make_fp8_scaling(Fp8Format::E5M2, policy.fp8_recipe, where.device);
  }
}

namespace {

// The values FP8 codes of `state`'s scaling stand for, in `dtype` (the half passes' reading of an
// operand that came as codes).
Tensor dequantized_as(const Tensor& codes, const Fp8Scaling& state, DType dtype) {
  Tensor values = Tensor::empty(codes.shape(), dtype, codes.device(), codes.format());
  ops::fp8_dequantize(codes, state.scale_inv, state.format, values);
  return values;
}

}  // namespace

Tensor Conv2d::fp8_operand(const Tensor& t, const Fp8Scaling& state, bool record, Tensor* codes) const {
  Tensor q = Tensor::empty(t.shape(), t.dtype(), t.device(), t.format());
  if (codes) *codes = Tensor::empty(t.shape(), DType::U8, t.device(), t.format());
  const Tensor amax = state.current_amax();
  ops::fp8_round_trip(t, state.scale, state.scale_inv, state.format, q, record && record_amax_ ? &amax : nullptr,
                      codes);
  return q;
}

std::optional<ops::Fp8RoundTripOf> Conv2d::form_fp8_weight() {
  if (!fp8_) return std::nullopt;
  const Tensor w = compute_weight();
  const Fp8Scaling& ws = fp8_->weight;
  ops::Fp8RoundTripOf trip{w,
                           ws.scale,
                           ws.scale_inv,
                           ws.format,
                           Tensor::empty(w.shape(), w.dtype(), w.device(), w.format()),
                           record_amax_ ? ws.current_amax() : Tensor(),
                           weight_codes_read_ ? Tensor::empty(w.shape(), DType::U8, w.device(), w.format()) : Tensor()};
  formed_w_ = trip.y;
  formed_w_codes_ = trip.codes;
  formed_w_fragments_ = {};
  return trip;
}

std::vector<ops::Fp8WeightFragmentsOf> Conv2d::form_fp8_weight_fragments() {
  std::vector<ops::Fp8WeightFragmentsOf> jobs;
  if (!formed_w_codes_.defined()) return jobs;
  for (ops::Fp8WeightPass pass : {ops::Fp8WeightPass::Forward, ops::Fp8WeightPass::BackwardData})
    if (ops::fp8_weight_pass_reads_fragments(formed_w_codes_.shape(), pass, where_.device)) {
      Tensor& fragments = formed_w_fragments_[static_cast<size_t>(pass)];
      fragments = Tensor::empty({formed_w_codes_.numel()}, DType::U8, where_.device);
      jobs.push_back({formed_w_codes_, pass, fragments});
    }
  return jobs;
}

std::optional<ops::Fp8RoundTrip> Conv2d::output_gradient_rounding(const Shape& dy) const {
  if (!fp8_) return std::nullopt;
  const Fp8Scaling& g = fp8_->grad_output;
  const Tensor codes = saved_w_codes_.defined() ? Tensor::empty(dy, DType::U8, where_.device, where_.format) : Tensor();
  return ops::Fp8RoundTrip{g.scale,  g.scale_inv,
                           g.format, record_amax_ ? g.current_amax() : Tensor(),
                           codes,    saved_w_codes_.defined() && saved_x_codes_.defined()};
}

std::optional<ops::Fp8RoundTrip> Conv2d::input_rounding() const {
  if (!fp8_) return std::nullopt;
  const Fp8Scaling& in = fp8_->input;
  return ops::Fp8RoundTrip{in.scale, in.scale_inv, in.format, record_amax_ ? in.current_amax() : Tensor(), Tensor()};
}

std::optional<std::array<Shape, 3>> Conv2d::codes_shapes(const Shape& x) const {
  if (!fp8_ || policy_.compute_dtype != DType::F16 || x.size() != 4 || x[1] != in_padded_) return std::nullopt;
  const Shape w = padded_weight_shape(in_padded_);
  // A transposed convolution's passes are those of the convolution from its output to its input
  // (the same weight tensor): its forward that one's backward-data, its input gradient that one's
  // forward, its filter gradient that one's with x and dy swapped.
  if (transposed_) {
    const Shape y{x[0], out_padded_, conv_transpose_out_size(x[2], kernel_, p_.stride, p_.pad),
                  conv_transpose_out_size(x[3], kernel_, p_.stride, p_.pad)};
    return std::array<Shape, 3>{y, w, x};
  }
  const Shape y{x[0], out_padded_, conv_out_size(x[2], kernel_, p_.stride, p_.pad),
                conv_out_size(x[3], kernel_, p_.stride, p_.pad)};
  return std::array<Shape, 3>{x, w, y};
}

bool Conv2d::runs_on_codes(const Shape& x) const {
  const std::optional<std::array<Shape, 3>> s = codes_shapes(x);
  return s && ops::fp8_conv2d_runs_on_codes((*s)[0], (*s)[1], (*s)[2], p_, where_.device);
}

namespace {

// Whether the GPU runs the convolution's forward (conv_forward) or backward-data from FP8 codes
// faster than in half, in the shapes s of its x, w and y (Conv2d::codes_shapes).
bool conv_pass_beats_half(const std::optional<std::array<Shape, 3>>& s, bool conv_forward, const Conv2dParams& p,
                          Device device) {
  if (!s) return false;
  const auto& [cx, w, cy] = *s;
  return conv_forward ? ops::fp8_conv2d_forward_beats_half(cx, w, cy, p, device)
                      : ops::fp8_conv2d_backward_data_beats_half(cy, w, cx, p, device);
}

}  // namespace

// A transposed convolution's forward is the backward-data of the convolution from its output to
// its input, and its input gradient that convolution's forward.
bool Conv2d::forward_runs_on_codes(const Shape& x) const {
  return conv_pass_beats_half(codes_shapes(x), !transposed_, p_, where_.device);
}

bool Conv2d::input_gradient_runs_on_codes(const Shape& x) const {
  return conv_pass_beats_half(codes_shapes(x), transposed_, p_, where_.device);
}

std::optional<ops::Fp8RoundTrip> Conv2d::input_codes(const Shape& x) const {
  const bool all_passes = runs_on_codes(x);
  if (!all_passes && !forward_runs_on_codes(x)) return std::nullopt;
  std::optional<ops::Fp8RoundTrip> r = input_rounding();
  r->codes = Tensor::empty(x, DType::U8, where_.device, where_.format);
  // Alone where every pass reads them; where only the forward does, beside the rounded values
  // that the backward's half passes read.
  r->codes_only = all_passes;
  return r;
}

Shape Conv2d::padded_weight_shape(int64_t in_channels) const {
  return transposed_ ? Shape{in_channels, out_padded_, kernel_, kernel_}
                     : Shape{out_padded_, in_channels, kernel_, kernel_};
}

Tensor Conv2d::padded(const Tensor& t, int64_t dim0, int64_t dim1) const {
  if (t.dim(0) == dim0 && t.dim(1) == dim1) return t;
  Tensor out = Tensor::empty({dim0, dim1, t.dim(2), t.dim(3)}, t.dtype(), t.device(), t.format());
  ops::copy_padded(t, out);
  return out;
}

Tensor Conv2d::compute_weight() {
  if (weight_.value.dtype() == policy_.compute_dtype) return weight_.value;
  // O1: fp32 weights are cast to half for every forward, as Apex's patched conv does.
  Tensor w = Tensor::empty(weight_.value.shape(), policy_.compute_dtype, where_.device, where_.format);
  ops::cast(weight_.value, w);
  return w;
}

Tensor Conv2d::forward(const Tensor& x_in, bool training) {
  Tensor x = x_in;
  input_converted_ = x.dtype() != policy_.compute_dtype || x.format() != where_.format;
  if (input_converted_) x = ops::converted(x_in, policy_.compute_dtype, where_.format, where_.device);
  const int64_t N = x.dim(0), H = x.dim(2), W = x.dim(3);
  GE_CHECK(x.dim(1) == in_ || x.dim(1) == in_padded_, describe(), ": input ", x.str(), " should have ", in_,
           " channels");
  input_channels_ = x.dim(1);
  // The output the BatchNorm before formed for this very input (give_output).
  took_output_ = given_y_.defined() && given_x_.data() == x.data() && given_x_.shape() == x.shape();
  if (took_output_) {
    Tensor y = std::move(given_y_);
    saved_x_ = x;
    saved_w_ = std::move(given_w_);
    given_x_ = Tensor();
    return y;
  }
  given_x_ = given_w_ = given_y_ = Tensor();  // they were for another input
  // The FP8 layers (never the fused, dot-taking or image layers: fp8_) read x and w as E4M3: x as
  // the BatchNorm before rounded it in a training forward (take_rounded_input), or rounded here.
  // Or as its codes (take_input_codes), which the forward and the filter gradient read instead.
  took_rounded_input_ =
      training && rounded_of_.defined() && rounded_of_.same_storage(x) && rounded_of_.shape() == x.shape();
  const Tensor x_codes = took_rounded_input_ ? given_x_codes_ : Tensor();
  took_input_codes_ = x_codes.defined();
  // The filter gradient reads the codes where it runs from codes (all three passes do); elsewhere
  // the rounded values x holds beside them.
  const Tensor x_codes_kept = x_codes.defined() && runs_on_codes(x.shape()) ? x_codes : Tensor();
  GE_CHECK(!given_x_codes_only_ || took_rounded_input_, describe(),
           ": the layer before wrote only the FP8 codes of its input, but the forward was handed ", x.str(),
           " instead");
  given_x_codes_only_ = false;
  if (took_rounded_input_ && !x_codes.defined()) x = rounded_x_;
  rounded_of_ = rounded_x_ = given_x_codes_ = saved_x_codes_ = Tensor();
  if (fp8_ && !took_rounded_input_) x = fp8_operand(x, fp8_->input, training);
  const Tensor unpadded = x;
  // A transposed convolution runs as a backward-data, which needs every channel in memory; the
  // forward takes its input as it is (ops.h: the GPU's 8-channel kernels read an image batch's
  // own channels, other kernels get a padded copy).
  // Except G's first layer in small batches: a transposed convolution of 1x1 maps is one GEMM on
  // the GPU in half precision (conv_gemm.h), which takes the noise's 100 channels as they are
  // (and cuDNN any count in f32). Padded, the noise and the weight are copied in the forward
  // and the weight's gradient trimmed in the backward: four kernels on G's chain. Unpadded,
  // cuBLAS runs its kernels for 4-byte aligned rows, slower than its 16-byte aligned ones: a
  // net gain at small batches, a loss at large ones (the tuning policy's cut-over).
  const int64_t in_run =
      transposed_ && H == 1 && W == 1 && p_.pad == 0 && N < tuning().unpadded_gemm_below_batch ? in_ : in_padded_;
  if (transposed_) x = padded(x, N, in_run);
  const Shape wp = padded_weight_shape(in_run);
  // The weight's E4M3 codes, formed in its round trip (the codes its rounded values stand for),
  // where a pass reads them: the forward where x came as codes, and the input gradient where the
  // GPU runs it faster from codes than in half. That one reads the output gradient's E5M2 codes
  // too, written beside its rounded values by the layer that writes it (output_gradient_rounding,
  // which asks for them where the backward keeps these).
  const bool fp8_training = fp8_ && training && policy_.compute_dtype == DType::F16;
  const bool input_gradient_on_codes = fp8_training && input_gradient_runs_on_codes({N, input_channels_, H, W});
  const bool weight_codes_read = fp8_training && (x_codes.defined() || input_gradient_on_codes);
  // Formed ahead for this version of the weight (form_fp8_weight), with its codes where they are read.
  const bool w_formed = fp8_ && training && formed_w_.defined() && (!weight_codes_read || formed_w_codes_.defined());
  if (fp8_ && training) weight_codes_read_ = weight_codes_read;
  // The ops' passes: a transposed convolution's forward is a backward-data, its input gradient a
  // forward (codes_shapes).
  const ops::Fp8WeightPass forward_pass = transposed_ ? ops::Fp8WeightPass::BackwardData : ops::Fp8WeightPass::Forward,
                           input_gradient_pass =
                               transposed_ ? ops::Fp8WeightPass::Forward : ops::Fp8WeightPass::BackwardData;
  Tensor w_codes, w_operand, w_fragments;
  if (w_formed) {
    w_operand = formed_w_;
    if (weight_codes_read) w_codes = formed_w_codes_;
    w_fragments = formed_weight_fragments(forward_pass);
  } else {
    w_operand = compute_weight();
    if (fp8_) w_operand = fp8_operand(w_operand, fp8_->weight, training, weight_codes_read ? &w_codes : nullptr);
  }
  Tensor w = padded(w_operand, wp[0], wp[1]);
  // The FP8 kernels take layers of 64 channels and more a side, whose weights are never padded.
  GE_CHECK(!w_codes.defined() || w_codes.shape() == wp, describe(), ": the FP8 codes of weight ", w_operand.str(),
           " would need padding to ", shape_str(wp));
  saved_w_codes_ = input_gradient_on_codes ? w_codes : Tensor();
  saved_w_fragments_ = input_gradient_on_codes && w_formed ? formed_weight_fragments(input_gradient_pass) : Tensor();
  const int64_t Ho = transposed_ ? conv_transpose_out_size(H, kernel_, p_.stride, p_.pad)
                                 : conv_out_size(H, kernel_, p_.stride, p_.pad);
  const int64_t Wo = transposed_ ? conv_transpose_out_size(W, kernel_, p_.stride, p_.pad)
                                 : conv_out_size(W, kernel_, p_.stride, p_.pad);
  // A transposed convolution's forward is a backward-data, which writes the channels its output
  // has (ops.h): G's last layer writes its 3 image channels, with no trimming copy.
  const int64_t y_channels = transposed_ && !keep_padded_output_ ? out_ : out_padded_;
  Tensor y = Tensor::empty({N, y_channels, Ho, Wo}, policy_.compute_dtype, where_.device, where_.format);
  if (fused_) {
    Tensor kept_y = y;  // what the backward reads as the activation's output
    const std::optional<ops::Fp8RoundTrip> rounding =
        rounds_output_for_ && training && !transposed_ ? rounds_output_for_->input_rounding() : std::nullopt;
    if (transposed_) {
      ops::conv_transpose2d_activation_forward(x, w, y, p_, *fused_);
    } else if (std::optional<ops::Fp8RoundTrip> codes =
                   rounding ? rounds_output_for_->input_codes(y.shape()) : std::nullopt) {
      // The codes alone where the next layer's passes all read codes and this layer's backward
      // passes can read them as y too: the layer's output is then kept as a byte a value, and
      // never written in half.
      codes->codes_only = codes->codes_only && ops::conv2d_activation_runs_from_codes(x.shape(), w.shape(), y.shape(),
                                                                                      p_, *fused_, where_.device);
      ops::conv2d_activation_forward(x, w, y, p_, *fused_, &*codes, nullptr);
      rounds_output_for_->take_input_codes(y, codes->codes, codes->codes_only);
      if (codes->codes_only) kept_y = codes->codes;
    } else if (rounding) {
      Tensor rounded = Tensor::empty(y.shape(), y.dtype(), where_.device, where_.format);
      ops::conv2d_activation_forward(x, w, y, p_, *fused_, &*rounding, &rounded);
      rounds_output_for_->take_rounded_input(y, rounded);
    } else {
      ops::conv2d_activation_forward(x, w, y, p_, *fused_);
    }
    saved_y_ = kept_y;
  } else if (transposed_ && x_codes.defined()) {
    // The backward-data of the convolution from y to x, from codes (forward_runs_on_codes), y's moments
    // formed as it is written where the BatchNorm after takes them.
    const Fp8Scaling &in = fp8_->input, &ws = fp8_->weight;
    const Fp8Tensor xq{x_codes, in.scale_inv, in.format}, wq{w_codes, ws.scale_inv, ws.format, w_fragments};
    Tensor moments;
    if (moments_for_ && moments_for_->takes_moments() && ops::fp8_conv2d_backward_data_moments(xq, wq, y, p_, moments))
      moments_for_->give_moments(y, std::move(moments));
    else
      ops::fp8_conv2d_backward_data(xq, wq, y, p_);
    saved_x_codes_ = x_codes_kept;
  } else if (transposed_) {
    Tensor moments;
    const bool formed = training && moments_for_ && moments_for_->takes_moments() &&
                        ops::conv_transpose2d_forward_moments(x, w, y, p_, moments);
    if (formed)
      moments_for_->give_moments(y, std::move(moments));
    else
      ops::conv_transpose2d_forward(x, w, y, p_);
  } else if (x_codes.defined()) {
    const Fp8Scaling &in = fp8_->input, &ws = fp8_->weight;
    ops::fp8_conv2d_forward({x_codes, in.scale_inv, in.format}, {w_codes, ws.scale_inv, ws.format, w_fragments}, y, p_);
    saved_x_codes_ = x_codes_kept;
  } else {
    ops::conv2d_forward(x, w, y, p_);
  }
  // The input is kept as it came. So a 3-channel image batch is held with 3 channels, not 8,
  // until the backward pass: at batch 1024 and 64x64, 40 MiB less for the fake batch D holds
  // while G's activations are alive (the step's peak).
  saved_x_ = unpadded;
  saved_w_ = w;
  return keep_padded_output_ ? y : padded(y, N, out_);
}

bool Conv2d::takes_dots_of(const Tensor& x) const {
  return can_take_dots() && x.rank() == 4 && x.dim(1) == in_ && in_padded_ == in_ && x.dim(2) == kernel_ &&
         x.dim(3) == kernel_ && x.dtype() == policy_.compute_dtype && x.format() == where_.format;
}

void Conv2d::give_output(const Tensor& x, const Tensor& w, Tensor dots) {
  GE_CHECK(takes_dots_of(x) && dots.numel() == x.dim(0), describe(), ": cannot take dots ", dots.str(), " for input ",
           x.str());
  given_x_ = x;
  given_w_ = w;
  given_y_ = std::move(dots);
}

void Conv2d::fuse_activation(const ops::FusedActivation& act) {
  GE_CHECK(can_fuse_activation(), describe(),
           ": an activation fuses only into a convolution whose output is written without channel padding");
  fused_ = act;
}

Tensor Conv2d::backward(Tensor dy_in, bool want_param_grads, bool want_input_grad) {
  GE_CHECK(saved_x_.defined(), "Conv2d::backward before forward");
  Tensor dy = dy_in;
  if (dy.dtype() != policy_.compute_dtype || dy.format() != where_.format)
    dy = ops::converted(dy_in, policy_.compute_dtype, where_.format, where_.device);
  // A convolution's backward passes read every output channel of dy. A transposed convolution's
  // output gradient is the x side of both (ops.h), which the GPU's 8-channel kernels read with
  // its own channels: G's last layer's 3, without a padding copy (faster than padding it to 8
  // first: docs/performance.md).
  if (!transposed_) dy = padded(dy, dy.dim(0), out_padded_);
  // E5M2, for both gradients: rounded here unless the layer that wrote dy rounded it.
  took_rounded_gradient_ = rounded_dy_.defined() && rounded_dy_.same_storage(dy) && rounded_dy_.shape() == dy.shape();
  const Tensor dy_codes = took_rounded_gradient_ ? rounded_dy_codes_ : Tensor();
  // Codes alone: dy's values were never written. Both passes read the codes (the forward ran from
  // codes: output_gradient_rounding), so any other dy is a broken link, not a gradient.
  GE_CHECK(!rounded_dy_codes_only_ ||
               (took_rounded_gradient_ && saved_w_codes_.defined() && saved_x_codes_.defined() && !fused_),
           describe(), ": the BatchNorm after it wrote only the FP8 codes of its output gradient, but the backward ",
           "was handed ", dy.str(), " instead");
  rounded_dy_ = rounded_dy_codes_ = Tensor();
  rounded_dy_codes_only_ = false;
  if (fp8_ && !took_rounded_gradient_) dy = fp8_operand(dy, fp8_->grad_output, true);
  // With a fused activation dy is its output's gradient (unless the next network's first layer
  // has taken it through the activation: receives_gradient_through_activation). Only one
  // gradient wanted of a convolution (the filter's in D's passes on data and on fake.detach(),
  // the input's in G's pass through D): one op forms the activation's gradient on the way in.
  // Otherwise (both wanted, or a transposed convolution) the activation's gradient first, in
  // place as the separate layer would, then the passes as usual; but where the forward kept the
  // activation's output as codes alone, which only the fused ops read, each of them forms it.
  const bool activation_pending = fused_ && !gradient_through_activation_;
  const bool y_codes = activation_pending && saved_y_.dtype() == DType::U8;
  const bool fused_filter = activation_pending && !transposed_ && (!want_input_grad || y_codes);
  const bool fused_input = activation_pending && !transposed_ && want_input_grad && (!want_param_grads || y_codes);
  if (activation_pending && !fused_filter && !fused_input)
    ops::activation_backward(fused_->kind, saved_y_, dy, dy, fused_->negative_slope);
  const Tensor y_for_input = fused_input ? saved_y_ : Tensor();
  if (want_param_grads) {
    const Tensor x_kept = saved_x_, y = saved_y_, x_codes = saved_x_codes_;
    const Shape w_shape = saved_w_.shape();
    auto filter_gradient = [this, x_kept, y, dy, x_codes, dy_codes, w_shape, fused_filter] {
      // A transposed convolution's weight is (Cin, Cout, ...): the input channels it ran with.
      const Tensor x = transposed_ ? padded(x_kept, x_kept.dim(0), w_shape[0]) : x_kept;
      const bool padded_weight = w_shape != weight_.model_grad.shape();
      Tensor dw = padded_weight ? Tensor::empty(w_shape, weight_.model_grad.dtype(), where_.device, where_.format)
                                : weight_.model_grad;
      // x came as codes (its half values unrounded or unwritten): from the codes, with dy's where
      // it has them (a transposed convolution's is the filter gradient of the convolution from its
      // output to its input: x and dy swapped).
      if (x_codes.defined() && dy_codes.defined()) {
        const Fp8Tensor xq{x_codes, fp8_->input.scale_inv, fp8_->input.format},
            dyq{dy_codes, fp8_->grad_output.scale_inv, fp8_->grad_output.format};
        ops::fp8_conv2d_backward_filter(transposed_ ? dyq : xq, transposed_ ? xq : dyq, dw, p_);
      } else if (x_codes.defined() && transposed_) {
        ops::conv_transpose2d_backward_filter(dequantized_as(x_codes, fp8_->input, x.dtype()), dy, dw, p_, 0.f);
      } else if (x_codes.defined()) {
        ops::conv2d_backward_filter(dequantized_as(x_codes, fp8_->input, x.dtype()), dy, dw, p_, 0.f);
      } else if (fused_filter) {
        ops::conv2d_activation_backward_filter(x, y, dy, dw, p_, *fused_, 0.f);
      } else if (transposed_) {
        ops::conv_transpose2d_backward_filter(x, dy, dw, p_, 0.f);
      } else {
        ops::conv2d_backward_filter(x, dy, dw, p_, 0.f);
      }
      if (padded_weight) ops::copy_padded(dw, weight_.model_grad);
    };
    // Nothing else to do meanwhile without the input gradient. The filter gradient is read only
    // after its loss's backward pass, which joins the lanes (dcgan_trainer.cpp).
    ConcurrentRegion* region = want_input_grad ? ConcurrentRegion::active(where_.device) : nullptr;
    if (region)
      region->on_side({x_kept, y, dy, x_codes, dy_codes}, filter_gradient);
    else
      filter_gradient();
  }
  // What the forward kept is not needed again: released now, as autograd does, so a step's
  // peak memory holds only the activations still ahead of their backward.
  const Tensor w = saved_w_, w_codes = std::move(saved_w_codes_), w_fragments = std::move(saved_w_fragments_);
  // A backward-data writes the channels its dx has (ops.h); a transposed convolution's is a
  // forward, which writes all of w's (its first dimension).
  const Shape x_shape{saved_x_.dim(0), transposed_ ? w.dim(0) : input_channels_, saved_x_.dim(2), saved_x_.dim(3)};
  const DType x_dtype = saved_x_.dtype();
  const Tensor x_kept = saved_x_;
  saved_x_ = saved_x_codes_ = Tensor();
  saved_w_ = Tensor();
  saved_y_ = Tensor();
  took_gradient_codes_ = false;
  if (!want_input_grad) return Tensor();
  // D's last layer: the BatchNorm before it forms this backward-data where it reads it.
  if (input_gradient_to_ && can_take_dots() && !input_converted_ && !input_activation_ && input_channels_ == in_) {
    input_gradient_to_->give_outer_gradient(dy, w, p_);
    return dy;
  }
  // Taken through the input's activation, the gradient must meet that activation's own output,
  // not a converted copy of it (the trainer gives both networks one precision policy).
  GE_CHECK(!input_activation_ || !input_converted_, describe(),
           ": the input gradient is taken through the activation before this layer, but the input came in ",
           "another dtype or layout than this layer computes in; give both layers the same precision policy");
  // Still to take, after the input gradient is written, unless its op takes it as it writes.
  std::optional<ops::InputActivation> through;
  if (input_activation_) through = ops::InputActivation{*input_activation_, x_kept};
  Tensor dx = Tensor::empty(x_shape, x_dtype, where_.device, where_.format);
  if (transposed_ && dy_codes.defined() && w_codes.defined()) {  // the forward of the convolution from y to x
    const Fp8Scaling &g = fp8_->grad_output, &ws = fp8_->weight;
    ops::fp8_conv2d_forward({dy_codes, g.scale_inv, g.format}, {w_codes, ws.scale_inv, ws.format, w_fragments}, dx, p_);
    took_gradient_codes_ = true;
  } else if (transposed_) {
    ops::conv_transpose2d_backward_data(dy, w, dx, p_);
  } else if (fused_input) {
    ops::conv2d_activation_backward_data(y_for_input, dy, w, dx, p_, *fused_, through ? &*through : nullptr);
    through.reset();
  } else if (dy_codes.defined() && w_codes.defined()) {
    const Fp8Scaling &g = fp8_->grad_output, &ws = fp8_->weight;
    ops::fp8_conv2d_backward_data({dy_codes, g.scale_inv, g.format}, {w_codes, ws.scale_inv, ws.format, w_fragments},
                                  dx, p_);
    took_gradient_codes_ = true;
  } else {
    ops::conv2d_backward_data(dy, w, dx, p_);
  }
  Tensor out = padded(dx, dx.dim(0), input_channels_);
  if (through) ops::activation_backward(through->act.kind, through->x, out, out, through->act.negative_slope);
  return out;
}

std::unique_ptr<Layer> Conv2d::twin() const {
  auto t = std::make_unique<Conv2d>(*this);
  // One zeroed buffer for the twins of every step, as the original's own gradient is zeroed: a
  // fresh buffer per step would need a zeroing pass each step, and without one compute-sanitizer's
  // initcheck reports its reads, because it does not see the writes of cuDNN's half-precision
  // filter-gradient kernels into a never-written buffer (the values read are the ones written:
  // the lanes' bitwise test in test_concurrent_region.cpp). The first twin comes in an eager
  // warm-up step, so the buffer is never allocated inside a graph capture.
  const Tensor& g = weight_.model_grad;
  if (!twin_grad_.defined()) twin_grad_ = Tensor::zeros(g.shape(), g.dtype(), g.device(), g.format());
  t->weight_.model_grad = twin_grad_;
  t->twin_grad_ = Tensor();
  t->saved_x_ = t->saved_w_ = t->saved_y_ = Tensor();
  t->moments_for_ = nullptr;  // Sequential::twin links the twin's own BatchNorm
  t->given_x_ = t->given_w_ = t->given_y_ = t->rounded_dy_ = t->rounded_dy_codes_ = t->saved_w_codes_ =
      t->saved_w_fragments_ = Tensor();
  t->rounded_of_ = t->rounded_x_ = t->given_x_codes_ = t->saved_x_codes_ = Tensor();
  t->rounded_dy_codes_only_ = t->given_x_codes_only_ = false;
  // formed_w_, its codes and fragments stay: the twin's passes read the version of the weight the original's read.
  t->rounds_output_for_ = nullptr;  // Sequential::twin links the twin's own convolution
  t->input_gradient_to_ = nullptr;  // Sequential::twin links the twin's own BatchNorm
  return t;
}

std::string Conv2d::describe() const {
  return std::string(transposed_ ? "ConvTranspose2d(" : "Conv2d(") + std::to_string(in_) + ", " + std::to_string(out_) +
         ", " + std::to_string(kernel_) + ", " + std::to_string(p_.stride) + ", " + std::to_string(p_.pad) +
         ", bias=False)";
}

std::string Conv2d::precision() const {
  std::string s = std::string("weights ") + dtype_name(weight_.value.dtype());
  if (weight_.master.defined()) s += " (+ f32 master)";
  s += ", computes in " + std::string(dtype_name(policy_.compute_dtype));
  if (policy_.compute_dtype == DType::F32) s += policy_.allow_tf32 ? " (TF32 allowed)" : " (no TF32)";
  if (fp8_) {
    s += " from FP8 operands (input and weight E4M3, output gradient E5M2, each rounded to FP8 and back)";
    if (where_.device.is_cuda() && policy_.compute_dtype == DType::F16)
      s += "; on FP8 Tensor Cores from FP8 codes where the GPU's kernels for the shape beat half's: the forward (from "
           "the input's codes, which the layer before writes), the input gradient (from the output gradient's codes, "
           "which the layer after writes), or all three passes";
  }
  s += ", accumulates in f32";
  if (policy_.fp8_convolutions && !fp8_) s += "; not FP8 (fewer than 8 channels on a side)";
  return s;
}

}  // namespace ge::nn
