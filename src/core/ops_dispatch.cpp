// ge::ops: argument checks shared by both backends, then dispatch on the device.
#include <atomic>
#include <cmath>
#include <string>

#include "core/backend.h"
#include "core/cpu_backend.h"
#include "core/fp8_scaling_math.h"
#ifdef GE_WITH_CUDA
#include "cuda/conv/conv_8ch.h"
#endif
#ifdef GE_WITH_ONEDNN
#include "onednn/fast_ops.h"
#endif

namespace ge {

int64_t conv_out_size(int64_t in, int64_t kernel, int stride, int pad) { return (in + 2 * pad - kernel) / stride + 1; }
int64_t conv_transpose_out_size(int64_t in, int64_t kernel, int stride, int pad) {
  return (in - 1) * stride - 2 * pad + kernel;
}

namespace ops {
namespace {

bool on_cpu(const Tensor& t) { return t.device().is_cpu(); }

#ifdef GE_WITH_CUDA
#define GE_DISPATCH(first, call) \
  do {                           \
    if (on_cpu(first))           \
      cpu::call;                 \
    else                         \
      gpu::call;                 \
  } while (0)
#else
#define GE_DISPATCH(first, call)                                                     \
  do {                                                                               \
    if (!on_cpu(first)) fail("a CUDA tensor reached an op in a build without CUDA"); \
    cpu::call;                                                                       \
  } while (0)
#endif

// CPU tensors run on the fast backend when it is chosen and built (core/cpu_backend.h) and
// takes the call; otherwise, and for the ops it does not cover, on the reference.
#ifdef GE_WITH_ONEDNN
#define GE_CPU_FAST(call)                                \
  do {                                                   \
    if (!(cpu_fast_active() && onednn::call)) cpu::call; \
  } while (0)
#else
#define GE_CPU_FAST(call) cpu::call
#endif

#ifdef GE_WITH_CUDA
#define GE_DISPATCH_FAST(first, call) \
  do {                                \
    if (on_cpu(first))                \
      GE_CPU_FAST(call);              \
    else                              \
      gpu::call;                      \
  } while (0)
#else
#define GE_DISPATCH_FAST(first, call)                                                \
  do {                                                                               \
    if (!on_cpu(first)) fail("a CUDA tensor reached an op in a build without CUDA"); \
    GE_CPU_FAST(call);                                                               \
  } while (0)
#endif

void same_device(const char* op, std::initializer_list<const Tensor*> ts) {
  const Tensor* first = nullptr;
  for (const Tensor* t : ts) {
    if (!t->defined()) continue;
    if (!first) first = t;
    GE_CHECK(t->device() == first->device(), op, ": tensors on ", first->device().str(), " and ", t->device().str());
  }
}

void floating4(const char* op, const Tensor& t) {
  GE_CHECK(t.rank() == 4 && is_floating(t.dtype()), op, ": expected a 4-D floating tensor, got ", t.str());
}

// Every pass takes an x with fewer channels than w (ops.h).
void check_conv(const char* op, const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p) {
  same_device(op, {&x, &w, &y});
  floating4(op, x);
  floating4(op, w);
  floating4(op, y);
  GE_CHECK(x.dtype() == w.dtype() && x.dtype() == y.dtype(), op, ": dtypes differ: ", x.str(), ", ", w.str(), ", ",
           y.str());
  GE_CHECK(p.stride >= 1 && p.pad >= 0, op, ": stride ", p.stride, " pad ", p.pad);
  GE_CHECK(x.dim(1) <= w.dim(1) && w.dim(0) == y.dim(1) && x.dim(0) == y.dim(0), op, ": x ", x.str(), " w ", w.str(),
           " y ", y.str());
  GE_CHECK(conv_out_size(x.dim(2), w.dim(2), p.stride, p.pad) == y.dim(2) &&
               conv_out_size(x.dim(3), w.dim(3), p.stride, p.pad) == y.dim(3),
           op, ": spatial sizes x ", x.str(), " w ", w.str(), " y ", y.str(), " stride ", p.stride, " pad ", p.pad);
}

// x with the channels it lacks against w as zeros, on the CPU (whose kernels read them all);
// the GPU backend handles a narrower x itself.
Tensor with_weight_channels(const Tensor& x, const Tensor& w) {
  return x.device().is_cuda() ? x : with_channels(x, w.dim(1));
}

bool fp8_value_dtype(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

void check_f32_scalar(const char* op, const char* what, const Tensor& t) {
  GE_CHECK(t.defined() && t.dtype() == DType::F32 && t.numel() == 1, op, ": ", what, " must be f32 (1), got ",
           t.defined() ? t.str() : std::string("an undefined tensor"));
}

// FP8 codes and the values they stand for pair up element by element in storage order.
void check_fp8_pair(const char* op, const Tensor& values, const Tensor& codes) {
  GE_CHECK(fp8_value_dtype(values.dtype()), op, ": values must be f32, f16 or bf16, got ", values.str());
  GE_CHECK(codes.dtype() == DType::U8 && codes.shape() == values.shape() && codes.format() == values.format(), op,
           ": codes ", codes.str(), " must be u8 of the shape and memory format of ", values.str());
}

// An op's Fp8RoundTrip of its output `out`: scalars on out's device, a format for out's values.
void check_fp8_round_trip(const char* op, const ops::Fp8RoundTrip& r, const Tensor& out) {
  GE_CHECK(fp8_value_dtype(out.dtype()), op, ": an FP8 round trip of ", out.str(), " needs f32, f16 or bf16");
  check_f32_scalar(op, "round trip scale", r.scale);
  check_f32_scalar(op, "round trip scale_inv", r.scale_inv);
  if (r.amax.defined()) check_f32_scalar(op, "round trip amax", r.amax);
  if (r.codes.defined()) check_fp8_pair(op, out, r.codes);
  GE_CHECK(!r.codes_only || r.codes.defined(), op, ": an FP8 round trip of ", out.str(),
           " with codes_only needs the codes tensor to write");
  same_device(op,
              {&out, &r.scale, &r.scale_inv, r.amax.defined() ? &r.amax : &out, r.codes.defined() ? &r.codes : &out});
}

}  // namespace

void conv2d_forward(const Tensor& x_in, const Tensor& w, Tensor& y, const Conv2dParams& p) {
  check_conv("conv2d_forward", x_in, w, y, p);
  const Tensor x = with_weight_channels(x_in, w);
  GE_DISPATCH_FAST(x, conv2d_forward(x, w, y, p));
}

void conv2d_backward_data(const Tensor& dy, const Tensor& w, Tensor& dx, const Conv2dParams& p) {
  check_conv("conv2d_backward_data", dx, w, dy, p);
  if (dx.device().is_cuda()) {  // the GPU backend handles a narrower dx itself
    GE_DISPATCH_FAST(dy, conv2d_backward_data(dy, w, dx, p));
    return;
  }
  // The CPU kernel writes all of w's channels.
  write_with_channels(dx, w.dim(1), [&](Tensor& full) { GE_DISPATCH_FAST(dy, conv2d_backward_data(dy, w, full, p)); });
}

void conv2d_backward_filter(const Tensor& x_in, const Tensor& dy, Tensor& dw, const Conv2dParams& p, float beta) {
  check_conv("conv2d_backward_filter", x_in, dw, dy, p);
  const Tensor x = with_weight_channels(x_in, dw);
  GE_DISPATCH_FAST(x, conv2d_backward_filter(x, dy, dw, p, beta));
}

namespace {

// The activation output y that a fused convolution's backward takes with dy: dy's dtype, or for
// ReLU and LeakyReLU the codes a forward with codes_only wrote.
void check_activation_output(const char* op, const Tensor& y, const Tensor& dy, const FusedActivation& act) {
  const bool codes = y.dtype() == DType::U8 && act.kind != Activation::Tanh;
  GE_CHECK(y.shape() == dy.shape() && (y.dtype() == dy.dtype() || codes) && y.format() == dy.format(), op, ": y ",
           y.str(), " and dy ", dy.str(), " must match (y: the activation's output, or for ReLU and LeakyReLU ",
           "its u8 codes written with codes_only)");
}

}  // namespace

bool conv2d_activation_runs_from_codes(const Shape& x, const Shape& w, const Shape& y, const Conv2dParams& p,
                                       const FusedActivation& act, Device device) {
#ifdef GE_WITH_CUDA
  if (device.is_cuda()) return gpu::conv2d_activation_codes_8ch_take(x, w, y, p, act);
#endif
  (void)x, (void)w, (void)y, (void)p, (void)act, (void)device;
  return false;
}

void conv2d_activation_forward(const Tensor& x_in, const Tensor& w, Tensor& y, const Conv2dParams& p,
                               const FusedActivation& act, const Fp8RoundTrip* round_copy, Tensor* rounded) {
  const char* op = "conv2d_activation_forward";
  check_conv(op, x_in, w, y, p);
  const Tensor x = with_weight_channels(x_in, w);
  GE_CHECK(!rounded || round_copy, op, ": rounded comes with round_copy");
  const bool codes_only = round_copy && round_copy->codes_only;
  if (round_copy) {
    check_fp8_round_trip(op, *round_copy, y);
    GE_CHECK(!rounded != !round_copy->codes.defined(), op,
             ": round_copy writes either `rounded` or its codes, exactly one of them");
    GE_CHECK(!codes_only || act.kind != Activation::Tanh, op,
             ": codes_only keeps the output of ReLU or LeakyReLU as codes, whose sign bits tell its gradient; not ",
             "Tanh's");
    if (rounded)
      GE_CHECK(rounded->shape() == y.shape() && rounded->dtype() == y.dtype() && rounded->format() == y.format() &&
                   rounded->device() == y.device() && rounded->data() != y.data(),
               op, ": rounded must be another tensor of y's shape, dtype, layout and device (", y.str(), "), is ",
               rounded->str());
#ifdef GE_WITH_CUDA
    if (x.device().is_cuda() && gpu::conv2d_forward_8ch(x, w, y, p, &act, round_copy, rounded)) return;
#endif
    GE_CHECK(!codes_only || x.device().is_cpu(), op, ": codes_only on the GPU takes only the shapes ",
             "conv2d_activation_runs_from_codes names; x ", x.str(), ", w ", w.str());
  }
  GE_DISPATCH_FAST(x, conv2d_activation_forward(x, w, y, p, act));
  if (!round_copy) return;
  const Tensor* amax = round_copy->amax.defined() ? &round_copy->amax : nullptr;
  if (rounded) {
    fp8_round_trip(y, round_copy->scale, round_copy->scale_inv, round_copy->format, *rounded, amax);
    return;
  }
  // The codes; fp8_quantize overwrites an amax, so y's goes to a scalar of its own, folded into
  // round_copy's by the round trip of that scalar (max |y| is the max of itself, NaN kept).
  Tensor codes = round_copy->codes, own_amax = Tensor::empty({1}, DType::F32, y.device());
  fp8_quantize(y, round_copy->scale, round_copy->format, codes, own_amax);
  if (codes_only) cpu::mark_activation_codes(y, codes);
  if (amax) {
    Tensor scratch = Tensor::empty({1}, DType::F32, y.device());
    fp8_round_trip(own_amax, round_copy->scale, round_copy->scale_inv, round_copy->format, scratch, amax);
  }
}

void conv2d_activation_backward_filter(const Tensor& x_in, const Tensor& y, const Tensor& dy, Tensor& dw,
                                       const Conv2dParams& p, const FusedActivation& act, float beta) {
  check_conv("conv2d_activation_backward_filter", x_in, dw, dy, p);
  const Tensor x = with_weight_channels(x_in, dw);
  same_device("conv2d_activation_backward_filter", {&x, &y, &dy, &dw});
  check_activation_output("conv2d_activation_backward_filter", y, dy, act);
  GE_DISPATCH_FAST(x, conv2d_activation_backward_filter(x, y, dy, dw, p, act, beta));
}

void conv2d_activation_backward_data(const Tensor& y, const Tensor& dy, const Tensor& w, Tensor& dx,
                                     const Conv2dParams& p, const FusedActivation& act, const InputActivation* input) {
  check_conv("conv2d_activation_backward_data", dx, w, dy, p);
  const Tensor no_input;
  same_device("conv2d_activation_backward_data", {&y, &dy, &w, &dx, input ? &input->x : &no_input});
  check_activation_output("conv2d_activation_backward_data", y, dy, act);
  GE_CHECK(
      !input || (input->x.shape() == dx.shape() && input->x.dtype() == dx.dtype() && input->x.format() == dx.format()),
      "conv2d_activation_backward_data: the input activation's output ", input ? input->x.str() : "", " must match dx ",
      dx.str());
  if (dx.device().is_cuda()) {  // the GPU backend handles a narrower dx itself
    GE_DISPATCH_FAST(dy, conv2d_activation_backward_data(y, dy, w, dx, p, act, input));
    return;
  }
  // The CPU kernel writes all of w's channels; the input activation's output gets them as zeros.
  write_with_channels(dx, w.dim(1), [&](Tensor& full) {
    InputActivation wide;
    if (input) wide = {input->act, with_channels(input->x, w.dim(1))};
    GE_DISPATCH_FAST(dy, conv2d_activation_backward_data(y, dy, w, full, p, act, input ? &wide : nullptr));
  });
}

namespace {
std::atomic<bool> g_deterministic_convolutions{false};
}  // namespace

void set_deterministic_convolutions(bool on) { g_deterministic_convolutions = on; }
bool deterministic_convolutions() { return g_deterministic_convolutions; }

// A transposed convolution with weight (Cin, Cout, R, S) is conv2d's backward-data with the
// same weight read as (K=Cin, C=Cout, R, S): its "input" is conv2d's output and vice versa.
void conv_transpose2d_forward(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p) {
  conv2d_backward_data(x, w, y, p);
}
void conv_transpose2d_activation_forward(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p,
                                         const FusedActivation& act) {
  check_conv("conv_transpose2d_activation_forward", y, w, x, p);
  if (y.device().is_cuda()) {  // the GPU backend handles a narrower y itself
    GE_DISPATCH_FAST(x, conv_transpose2d_activation_forward(x, w, y, p, act));
    return;
  }
  write_with_channels(
      y, w.dim(1), [&](Tensor& full) { GE_DISPATCH_FAST(x, conv_transpose2d_activation_forward(x, w, full, p, act)); });
}
void conv_transpose2d_backward_data(const Tensor& dy, const Tensor& w, Tensor& dx, const Conv2dParams& p) {
  conv2d_forward(dy, w, dx, p);
}
void conv_transpose2d_backward_filter(const Tensor& x, const Tensor& dy, Tensor& dw, const Conv2dParams& p,
                                      float beta) {
  conv2d_backward_filter(dy, x, dw, p, beta);
}

namespace {
void check_bn_params(const char* op, const Tensor& x, std::initializer_list<const Tensor*> per_channel) {
  floating4(op, x);
  for (const Tensor* t : per_channel) {
    if (!t->defined()) continue;
    GE_CHECK(t->numel() == x.dim(1) && is_floating(t->dtype()), op, ": per-channel tensor ", t->str(), " for input ",
             x.str());
  }
}
}  // namespace

void batchnorm_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                             Tensor& running_var, float momentum, float eps, Tensor& y, Tensor& save_mean,
                             Tensor& save_invstd, const BatchNormSync* sync) {
  same_device("batchnorm_forward_train",
              {&x, &gamma, &beta, &running_mean, &running_var, &y, &save_mean, &save_invstd});
  check_bn_params("batchnorm_forward_train", x, {&gamma, &beta, &running_mean, &running_var, &save_mean, &save_invstd});
  GE_CHECK(y.shape() == x.shape() && y.dtype() == x.dtype(), "batchnorm_forward_train: y ", y.str(), " x ", x.str());
  GE_CHECK(save_mean.dtype() == DType::F32 && save_invstd.dtype() == DType::F32,
           "batchnorm_forward_train: saved statistics must be f32");
  GE_CHECK(x.numel() / x.dim(1) > 1, "batchnorm_forward_train: expected more than 1 value per channel, got ", x.str());
  GE_DISPATCH_FAST(x, batchnorm_forward_train(x, gamma, beta, running_mean, running_var, momentum, eps, y, save_mean,
                                              save_invstd, nullptr, sync));
}

namespace {
void check_fusable(const FusedActivation& act, const char* op) {
  GE_CHECK(act.kind == Activation::ReLU || act.kind == Activation::LeakyReLU, op,
           ": only ReLU and LeakyReLU follow BatchNorm in DCGAN, got ", activation_name(act.kind));
}

// What every training forward of BatchNorm + activation checks of its tensors.
void check_activation_forward_train(const char* op, const FusedActivation& act, const Tensor& x, const Tensor& gamma,
                                    const Tensor& beta, const Tensor& running_mean, const Tensor& running_var,
                                    const Tensor& y, const Tensor& save_mean, const Tensor& save_invstd) {
  check_fusable(act, op);
  same_device(op, {&x, &gamma, &beta, &running_mean, &running_var, &y, &save_mean, &save_invstd});
  check_bn_params(op, x, {&gamma, &beta, &running_mean, &running_var, &save_mean, &save_invstd});
  GE_CHECK(y.shape() == x.shape() && y.dtype() == x.dtype(), op, ": y ", y.str(), " x ", x.str());
  GE_CHECK(save_mean.dtype() == DType::F32 && save_invstd.dtype() == DType::F32, op, ": saved statistics must be f32");
  GE_CHECK(x.numel() / x.dim(1) > 1, op, ": expected more than 1 value per channel, got ", x.str());
}

// D's last layer's filter: one output channel, x's image size, dtype and layout.
void check_image_filter(const char* op, const Tensor& x, const Tensor& w) {
  GE_CHECK(w.rank() == 4 && w.dim(0) == 1 && w.dim(1) == x.dim(1) && w.dim(2) == x.dim(2) && w.dim(3) == x.dim(3) &&
               w.dtype() == x.dtype() && w.format() == x.format(),
           op, ": w must be (1, ", x.dim(1), ", ", x.dim(2), ", ", x.dim(3), ") ", dtype_name(x.dtype()), " ",
           format_name(x.format()), ", is ", w.str());
}
}  // namespace

void batchnorm_activation_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                                        Tensor& running_var, float momentum, float eps, const FusedActivation& act,
                                        Tensor& y, Tensor& save_mean, Tensor& save_invstd, const BatchNormSync* sync,
                                        const Fp8RoundTrip* round_y) {
  const char* op = "batchnorm_activation_forward_train";
  check_activation_forward_train(op, act, x, gamma, beta, running_mean, running_var, y, save_mean, save_invstd);
  if (round_y) {
    check_fp8_round_trip(op, *round_y, y);
    GE_CHECK(!sync, op, ": round_y takes no --sync-bn");
#ifdef GE_WITH_CUDA
    if (x.device().is_cuda()) {
      gpu::batchnorm_forward_train_rounded(x, gamma, beta, running_mean, running_var, momentum, eps, y, save_mean,
                                           save_invstd, act, *round_y);
      return;
    }
#endif
  }
  GE_DISPATCH_FAST(x, batchnorm_forward_train(x, gamma, beta, running_mean, running_var, momentum, eps, y, save_mean,
                                              save_invstd, &act, sync));
  if (round_y) cpu::fp8_round_trip_in_place(*round_y, y);
}

bool batchnorm_activation_backward_recomputes(const Tensor& x, const FusedActivation& act) {
#ifdef GE_WITH_CUDA
  if (x.device().is_cuda()) return gpu::batchnorm_backward_recomputes(x, act);
#endif
  return false;  // the CPU backends read y
}

bool batchnorm_activation_forward_train_dot(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                            Tensor& running_mean, Tensor& running_var, [[maybe_unused]] float momentum,
                                            [[maybe_unused]] float eps, const FusedActivation& act, Tensor& y,
                                            Tensor& save_mean, Tensor& save_invstd, const Tensor& w, Tensor& dots) {
  const char* op = "batchnorm_activation_forward_train_dot";
  check_activation_forward_train(op, act, x, gamma, beta, running_mean, running_var, y, save_mean, save_invstd);
  same_device(op, {&x, &w, &dots});
  check_image_filter(op, x, w);
  GE_CHECK(dots.rank() == 4 && dots.dim(0) == x.dim(0) && dots.numel() == x.dim(0) && dots.dtype() == x.dtype(), op,
           ": dots must be (", x.dim(0), ", 1, 1, 1) ", dtype_name(x.dtype()), ", is ", dots.str());
#ifdef GE_WITH_CUDA
  if (x.device().is_cuda())
    return gpu::batchnorm_forward_train_dot(x, gamma, beta, running_mean, running_var, momentum, eps, act, y, save_mean,
                                            save_invstd, w, dots);
#endif
  return false;  // the CPU's BatchNorm forms no dot products
}

bool batchnorm_activation_backward_outer(const Tensor& x, const Tensor& y, const Tensor& dlogits, const Tensor& w,
                                         const Tensor& gamma, const Tensor& beta, const Tensor& save_mean,
                                         const Tensor& save_invstd, const FusedActivation& act, Tensor& dx,
                                         Tensor& dgamma, Tensor& dbeta, const Fp8RoundTrip* round_dx) {
  const char* op = "batchnorm_activation_backward_outer";
  if (round_dx) check_fp8_round_trip(op, *round_dx, dx);
  check_fusable(act, op);
  same_device(op, {&x, &y, &dlogits, &w, &gamma, &beta, &save_mean, &save_invstd, &dx, &dgamma, &dbeta});
  check_bn_params(op, x, {&gamma, &beta, &save_mean, &save_invstd, &dgamma, &dbeta});
  GE_CHECK(y.shape() == x.shape() && dx.shape() == x.shape() && y.dtype() == x.dtype() && dx.dtype() == x.dtype(), op,
           ": y ", y.str(), " and dx ", dx.str(), " must match x ", x.str());
  check_image_filter(op, x, w);
  GE_CHECK(dlogits.numel() == x.dim(0) && dlogits.dtype() == x.dtype(), op, ": dlogits must be (", x.dim(0),
           ", 1, 1, 1) ", dtype_name(x.dtype()), ", is ", dlogits.str());
#ifdef GE_WITH_CUDA
  if (x.device().is_cuda())
    return gpu::batchnorm_backward_outer(x, y, dlogits, w, gamma, beta, save_mean, save_invstd, act, dx, dgamma, dbeta,
                                         round_dx);
#endif
  return false;  // the CPU forms no gradient where it reads it
}

bool conv_transpose2d_forward_moments(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dParams& p,
                                      [[maybe_unused]] Tensor& moments) {
  check_conv("conv_transpose2d_forward_moments", y, w, x, p);
#ifdef GE_WITH_CUDA
  if (y.device().is_cuda()) return gpu::conv_transpose2d_forward_moments(x, w, y, p, moments);
#endif
  return false;  // the CPU's convolutions form no moments
}

void batchnorm_activation_forward_train_moments(const Tensor& x, const Tensor& moments, const Tensor& gamma,
                                                const Tensor& beta, Tensor& running_mean, Tensor& running_var,
                                                [[maybe_unused]] float momentum, [[maybe_unused]] float eps,
                                                const FusedActivation& act, Tensor& y, Tensor& save_mean,
                                                Tensor& save_invstd, const Fp8RoundTrip* round_y) {
  const char* op = "batchnorm_activation_forward_train_moments";
  check_activation_forward_train(op, act, x, gamma, beta, running_mean, running_var, y, save_mean, save_invstd);
  if (round_y) check_fp8_round_trip(op, *round_y, y);
  same_device(op, {&x, &moments});
  GE_CHECK(moments.dtype() == DType::F32 && moments.rank() == 3 && moments.dim(0) == 3 && moments.dim(1) > 0 &&
               moments.dim(2) == x.dim(1),
           op, ": moments must be f32 (3, parts, ", x.dim(1), "), got ", moments.str());
#ifdef GE_WITH_CUDA
  if (x.device().is_cuda()) {
    gpu::batchnorm_forward_train_moments(x, moments, gamma, beta, running_mean, running_var, momentum, eps, y,
                                         save_mean, save_invstd, &act, round_y);
    return;
  }
#endif
  fail(op, ": moments come from GPU kernels only; on ", x.device().str(), " use batchnorm_activation_forward_train");
}

void batchnorm_activation_forward_eval(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                       const Tensor& running_mean, const Tensor& running_var, float eps,
                                       const FusedActivation& act, Tensor& y) {
  check_fusable(act, "batchnorm_activation_forward_eval");
  same_device("batchnorm_activation_forward_eval", {&x, &gamma, &beta, &running_mean, &running_var, &y});
  check_bn_params("batchnorm_activation_forward_eval", x, {&gamma, &beta, &running_mean, &running_var});
  GE_CHECK(y.shape() == x.shape() && y.dtype() == x.dtype(), "batchnorm_activation_forward_eval: y ", y.str(), " x ",
           x.str());
  GE_DISPATCH_FAST(x, batchnorm_forward_eval(x, gamma, beta, running_mean, running_var, eps, y, &act));
}

void batchnorm_activation_backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& gamma,
                                   const Tensor& beta, const Tensor& save_mean, const Tensor& save_invstd,
                                   const FusedActivation& act, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                                   const BatchNormSync* sync, const Fp8RoundTrip* round_dx) {
  check_fusable(act, "batchnorm_activation_backward");
  if (round_dx) check_fp8_round_trip("batchnorm_activation_backward", *round_dx, dx);
  same_device("batchnorm_activation_backward",
              {&x, &y, &dy, &gamma, &beta, &save_mean, &save_invstd, &dx, &dgamma, &dbeta});
  check_bn_params("batchnorm_activation_backward", x, {&gamma, &beta, &save_mean, &save_invstd, &dgamma, &dbeta});
  for (const Tensor* t : std::initializer_list<const Tensor*>{&y, &dy, &dx})
    GE_CHECK(t->shape() == x.shape() && t->dtype() == x.dtype() && t->format() == x.format(),
             "batchnorm_activation_backward: x ", x.str(), ", y, dy and dx must match it, got ", t->str());
  GE_CHECK(dgamma.dtype() == gamma.dtype() && dbeta.dtype() == gamma.dtype() && beta.dtype() == gamma.dtype(),
           "batchnorm_activation_backward: beta and the parameter grads must have gamma's dtype");
  GE_DISPATCH_FAST(
      x, batchnorm_backward(x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta, &act, &y, &beta, sync, round_dx));
}

void batchnorm_forward_eval(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                            const Tensor& running_var, float eps, Tensor& y) {
  same_device("batchnorm_forward_eval", {&x, &gamma, &beta, &running_mean, &running_var, &y});
  check_bn_params("batchnorm_forward_eval", x, {&gamma, &beta, &running_mean, &running_var});
  GE_CHECK(y.shape() == x.shape() && y.dtype() == x.dtype(), "batchnorm_forward_eval: y ", y.str(), " x ", x.str());
  GE_DISPATCH_FAST(x, batchnorm_forward_eval(x, gamma, beta, running_mean, running_var, eps, y, nullptr));
}

void batchnorm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,
                        const Tensor& save_invstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                        const BatchNormSync* sync) {
  same_device("batchnorm_backward", {&x, &dy, &gamma, &save_mean, &save_invstd, &dx, &dgamma, &dbeta});
  check_bn_params("batchnorm_backward", x, {&gamma, &save_mean, &save_invstd, &dgamma, &dbeta});
  GE_CHECK(dy.shape() == x.shape() && dx.shape() == x.shape() && dy.dtype() == x.dtype() && dx.dtype() == x.dtype(),
           "batchnorm_backward: x ", x.str(), " dy ", dy.str(), " dx ", dx.str());
  GE_CHECK(dgamma.dtype() == gamma.dtype() && dbeta.dtype() == gamma.dtype(),
           "batchnorm_backward: parameter grads must have gamma's dtype");
  GE_DISPATCH_FAST(x, batchnorm_backward(x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta, nullptr, nullptr,
                                         nullptr, sync, nullptr));
}

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::ReLU: return "ReLU";
    case Activation::LeakyReLU: return "LeakyReLU";
    case Activation::Tanh: return "Tanh";
  }
  return "?";
}

void activation_forward(Activation a, const Tensor& x, Tensor& y, float negative_slope) {
  same_device("activation_forward", {&x, &y});
  GE_CHECK(x.shape() == y.shape() && x.dtype() == y.dtype() && x.format() == y.format() && is_floating(x.dtype()),
           "activation_forward: x ", x.str(), " y ", y.str());
  GE_DISPATCH_FAST(x, activation_forward(a, x, y, negative_slope));
}

void activation_backward(Activation a, const Tensor& y, const Tensor& dy, Tensor& dx, float negative_slope) {
  same_device("activation_backward", {&y, &dy, &dx});
  GE_CHECK(y.shape() == dy.shape() && y.shape() == dx.shape() && y.dtype() == dy.dtype() && y.dtype() == dx.dtype() &&
               y.format() == dy.format() && y.format() == dx.format(),
           "activation_backward: y ", y.str(), " dy ", dy.str(), " dx ", dx.str());
  GE_DISPATCH_FAST(y, activation_backward(a, y, dy, dx, negative_slope));
}

void bce_with_logits_forward(const Tensor& logits, float target, Tensor& loss, Tensor& mean_sigmoid) {
  same_device("bce_with_logits_forward", {&logits, &loss, &mean_sigmoid});
  GE_CHECK(is_floating(logits.dtype()) && logits.numel() > 0, "bce_with_logits_forward: logits ", logits.str());
  GE_CHECK(loss.dtype() == DType::F32 && loss.numel() == 1, "bce_with_logits_forward: loss must be f32 (1)");
  GE_CHECK(!mean_sigmoid.defined() || (mean_sigmoid.dtype() == DType::F32 && mean_sigmoid.numel() == 1),
           "bce_with_logits_forward: mean_sigmoid must be f32 (1)");
  GE_DISPATCH(logits, bce_with_logits_forward(logits, target, loss, mean_sigmoid));
}

void bce_with_logits_backward(const Tensor& logits, float target, const Tensor& scale, Tensor& dlogits) {
  same_device("bce_with_logits_backward", {&logits, &scale, &dlogits});
  GE_CHECK(dlogits.numel() == logits.numel() && dlogits.dtype() == logits.dtype(), "bce_with_logits_backward: dlogits ",
           dlogits.str(), " logits ", logits.str());
  GE_CHECK(scale.dtype() == DType::F32 && scale.numel() >= 1, "bce_with_logits_backward: scale must be f32");
  GE_DISPATCH(logits, bce_with_logits_backward(logits, target, scale, dlogits));
}

void cast(const Tensor& src, Tensor& dst) {
  same_device("cast", {&src, &dst});
  GE_CHECK(src.shape() == dst.shape() && is_floating(src.dtype()) && is_floating(dst.dtype()), "cast: ", src.str(),
           " to ", dst.str());
  GE_DISPATCH_FAST(src, cast(src, dst));
}

Tensor converted(const Tensor& src, DType dtype, MemoryFormat format, Device device) {
  if (src.rank() != 4) format = MemoryFormat::NCHW;
  // Convert where the data is, then move: a cast on the GPU is cheaper than on the host.
  Tensor dst = Tensor::empty(src.shape(), dtype, src.device(), format);
  if (dtype == src.dtype() && format == src.format())
    dst.copy_from(src);
  else
    cast(src, dst);
  return dst.device() == device ? dst : dst.to(device);
}

void unscale_grads(const std::vector<Tensor>& src, const std::vector<Tensor>& dst, const Tensor& scale,
                   Tensor& found_inf, bool accumulate) {
  GE_CHECK(src.size() == dst.size(), "unscale_grads: ", src.size(), " sources for ", dst.size(), " destinations");
  if (src.empty()) return;
  for (size_t i = 0; i < src.size(); ++i) {
    same_device("unscale_grads", {&src[i], &dst[i], &scale, &found_inf});
    GE_CHECK(src[i].numel() == dst[i].numel() && dst[i].dtype() == DType::F32 && is_floating(src[i].dtype()),
             "unscale_grads: ", src[i].str(), " into ", dst[i].str());
  }
  GE_CHECK(scale.dtype() == DType::F32 && found_inf.dtype() == DType::F32,
           "unscale_grads: scale/found_inf must be f32");
  GE_DISPATCH_FAST(scale, unscale_grads(src, dst, scale, found_inf, accumulate));
}

void scale_inplace(const Tensor& t, float factor) {
  GE_CHECK(is_floating(t.dtype()), "scale_inplace: ", t.str());
  GE_DISPATCH_FAST(t, scale_inplace(t, factor));
}

void copy_padded(const Tensor& src, Tensor& dst) {
  same_device("copy_padded", {&src, &dst});
  GE_CHECK(src.rank() == 4 && dst.rank() == 4 && src.dim(2) == dst.dim(2) && src.dim(3) == dst.dim(3) &&
               src.dtype() == dst.dtype() && src.format() == dst.format(),
           "copy_padded: ", src.str(), " -> ", dst.str(),
           " (expected 4-D tensors of one dtype and layout that differ only in their first two sizes)");
  GE_DISPATCH(src, copy_padded(src, dst));
}

void write_with_channels(Tensor& t, int64_t channels, const std::function<void(Tensor&)>& write) {
  GE_CHECK(t.rank() == 4, "write_with_channels: ", t.str(), " is not 4-D");
  if (t.dim(1) == channels) {
    write(t);
    return;
  }
  Tensor full = Tensor::empty({t.dim(0), channels, t.dim(2), t.dim(3)}, t.dtype(), t.device(), t.format());
  write(full);
  copy_padded(full, t);
}

Tensor with_channels(const Tensor& t, int64_t channels) {
  GE_CHECK(t.rank() == 4, "with_channels: ", t.str(), " is not 4-D");
  if (t.dim(1) == channels) return t;
  Tensor out = Tensor::empty({t.dim(0), channels, t.dim(2), t.dim(3)}, t.dtype(), t.device(), t.format());
  copy_padded(t, out);
  return out;
}

void loss_scaler_update(Tensor& state, const Tensor& found_inf, const ScalerConfig& cfg) {
  same_device("loss_scaler_update", {&state, &found_inf});
  GE_CHECK(state.dtype() == DType::F32 && state.numel() == 2 && found_inf.dtype() == DType::F32,
           "loss_scaler_update: state must be f32 (2), found_inf f32 (1)");
  GE_DISPATCH(state, loss_scaler_update(state, found_inf, cfg));
}

void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& exp_avg,
               const std::vector<Tensor>& exp_avg_sq, Tensor& step, const Tensor& skip, const AdamConfig& cfg,
               const std::vector<Tensor>& half_copies, const PendingGrads* pending) {
  const size_t n = params.size();
  GE_CHECK(grads.size() == n && exp_avg.size() == n && exp_avg_sq.size() == n &&
               (half_copies.empty() || half_copies.size() == n),
           "adam_step: lists of different lengths");
  for (size_t i = 0; i < n; ++i) {
    same_device("adam_step", {&params[i], &grads[i], &exp_avg[i], &exp_avg_sq[i], &step, &skip});
    const DType state = params[i].dtype();
    GE_CHECK(state == DType::F32 || state == DType::F16 || state == DType::BF16, "adam_step: parameter ",
             params[i].str());
    GE_CHECK(grads[i].dtype() == DType::F32 && grads[i].numel() == params[i].numel(), "adam_step: grad ",
             grads[i].str(), " for parameter ", params[i].str());
    for (const Tensor* t : {&exp_avg[i], &exp_avg_sq[i]})
      GE_CHECK(t->dtype() == state && t->numel() == params[i].numel(), "adam_step: moment ", t->str(),
               " for parameter ", params[i].str());
    if (!half_copies.empty() && half_copies[i].defined())
      GE_CHECK(state == DType::F32 && half_copies[i].numel() == params[i].numel() &&
                   (half_copies[i].dtype() == DType::F16 || half_copies[i].dtype() == DType::BF16),
               "adam_step: half copy ", half_copies[i].str(), " of ", params[i].str());
  }
  GE_CHECK(step.dtype() == DType::F32 && step.numel() == 1 && skip.dtype() == DType::F32 && skip.numel() >= 1 &&
               skip.numel() <= 8,
           "adam_step: step must be f32 (1), skip f32 (1..8)");
  if (pending) {
    GE_CHECK(pending->src.size() == n, "adam_step: ", pending->src.size(), " pending gradients for ", n, " parameters");
    same_device("adam_step", {&step, &pending->scale, &pending->found_inf});
    GE_CHECK(pending->scale.dtype() == DType::F32 && pending->scale.numel() == 1 &&
                 pending->found_inf.dtype() == DType::F32 && pending->found_inf.numel() == 1,
             "adam_step: pending scale/found_inf must be f32 (1)");
    for (size_t i = 0; i < n; ++i) {
      same_device("adam_step", {&pending->src[i], &params[i]});
      GE_CHECK(pending->src[i].dtype() == params[i].dtype() && pending->src[i].numel() == params[i].numel(),
               "adam_step: pending gradient ", pending->src[i].str(), " must have the dtype and size of ",
               params[i].str());
    }
  }
  if (n == 0) return;
  GE_DISPATCH_FAST(step, adam_step(params, grads, exp_avg, exp_avg_sq, step, skip, cfg, half_copies, pending));
}

void ema_update(const std::vector<Tensor>& averages, const std::vector<Tensor>& values, double decay) {
  GE_CHECK(averages.size() == values.size(), "ema_update: ", averages.size(), " averages for ", values.size(),
           " values");
  GE_CHECK(decay >= 0 && decay <= 1, "ema_update: decay ", decay, " (expected 0..1)");
  for (size_t i = 0; i < averages.size(); ++i) {
    same_device("ema_update", {&averages[i], &values[i]});
    GE_CHECK(averages[i].dtype() == DType::F32 && is_floating(values[i].dtype()) &&
                 averages[i].shape() == values[i].shape() && averages[i].format() == values[i].format(),
             "ema_update: average ", averages[i].str(), " of ", values[i].str(),
             " (expected an f32 average of the value's shape and memory format)");
  }
  if (averages.empty()) return;
  GE_DISPATCH(averages[0], ema_update(averages, values, decay));
}

void fp8_quantize(const Tensor& x, const Tensor& scale, Fp8Format format, Tensor& q, Tensor& amax) {
  same_device("fp8_quantize", {&x, &scale, &q, &amax});
  check_fp8_pair("fp8_quantize", x, q);
  check_f32_scalar("fp8_quantize", "scale", scale);
  check_f32_scalar("fp8_quantize", "amax", amax);
  GE_DISPATCH(x, fp8_quantize(x, scale, format, q, amax));
}

void fp8_dequantize(const Tensor& q, const Tensor& scale_inv, Fp8Format format, Tensor& y) {
  same_device("fp8_dequantize", {&q, &scale_inv, &y});
  check_fp8_pair("fp8_dequantize", y, q);
  check_f32_scalar("fp8_dequantize", "scale_inv", scale_inv);
  GE_DISPATCH(q, fp8_dequantize(q, scale_inv, format, y));
}

void fp8_update_scales(const std::vector<Fp8Scaling>& states, const Fp8DelayedScaling& recipe) {
  GE_CHECK(recipe.amax_history_len >= 1, "fp8_update_scales: amax_history_len ", recipe.amax_history_len,
           " (expected at least 1)");
  // The smaller format's numerator must stay a normal float for the scale to be one rounding.
  GE_CHECK(recipe.margin >= 0 && std::isnormal(fp8_scaled_max(Fp8Format::E4M3, recipe.margin)),
           "fp8_update_scales: margin ", recipe.margin, " (expected 0..134)");
  GE_CHECK(recipe.amax_compute_algo == Fp8AmaxAlgo::Max || recipe.amax_compute_algo == Fp8AmaxAlgo::MostRecent,
           "fp8_update_scales: unknown amax_compute_algo");
  for (const Fp8Scaling& s : states) {
    GE_CHECK(s.amax_history.defined() && s.amax_history.dtype() == DType::F32 &&
                 s.amax_history.shape() == Shape{recipe.amax_history_len},
             "fp8_update_scales: amax history ",
             s.amax_history.defined() ? s.amax_history.str() : std::string("undefined"), " (expected f32 (",
             recipe.amax_history_len, "))");
    check_f32_scalar("fp8_update_scales", "scale", s.scale);
    check_f32_scalar("fp8_update_scales", "scale_inv", s.scale_inv);
    same_device("fp8_update_scales", {&states[0].amax_history, &s.amax_history, &s.scale, &s.scale_inv});
  }
  if (states.empty()) return;
  GE_DISPATCH(states[0].amax_history, fp8_update_scales(states, recipe));
}

namespace {
void check_fp8_round_trip_args(const char* op, const Tensor& x, const Tensor& scale, const Tensor& scale_inv,
                               const Tensor& y, const Tensor* amax, const Tensor* codes) {
  same_device(op, {&x, &scale, &scale_inv, &y, amax ? amax : &x, codes ? codes : &x});
  GE_CHECK(
      fp8_value_dtype(x.dtype()) && fp8_value_dtype(y.dtype()) && x.shape() == y.shape() && x.format() == y.format(),
      op, ": x ", x.str(), " and y ", y.str(), " must be f32, f16 or bf16 of one shape and layout");
  check_f32_scalar(op, "scale", scale);
  check_f32_scalar(op, "scale_inv", scale_inv);
  if (amax) check_f32_scalar(op, "amax", *amax);
  GE_CHECK(!codes || (codes->dtype() == DType::U8 && codes->shape() == x.shape() && codes->format() == x.format()), op,
           ": codes ", codes ? codes->str() : std::string(), " must be u8 of the shape and layout of ", x.str());
}
}  // namespace

void fp8_round_trip(const Tensor& x, const Tensor& scale, const Tensor& scale_inv, Fp8Format format, Tensor& y,
                    const Tensor* amax, Tensor* codes) {
  check_fp8_round_trip_args("fp8_round_trip", x, scale, scale_inv, y, amax, codes);
  GE_DISPATCH(x, fp8_round_trip(x, scale, scale_inv, format, y, amax, codes));
}

void fp8_round_trip_all(const std::vector<Fp8RoundTripOf>& trips) {
  for (const Fp8RoundTripOf& t : trips) {
    GE_CHECK(t.x.defined() && t.y.defined(), "fp8_round_trip_all: every trip needs x and y");
    check_fp8_round_trip_args("fp8_round_trip_all", t.x, t.scale, t.scale_inv, t.y,
                              t.amax.defined() ? &t.amax : nullptr, t.codes.defined() ? &t.codes : nullptr);
    same_device("fp8_round_trip_all", {&trips[0].x, &t.x});
  }
  if (trips.empty()) return;
  GE_DISPATCH(trips[0].x, fp8_round_trip_all(trips));
}

void fill_uniform(Tensor& t, uint64_t seed, uint64_t offset) {
  GE_CHECK(is_floating(t.dtype()), "fill_uniform: ", t.str());
  GE_DISPATCH(t, fill_uniform(t, seed, offset));
}

void fill_normal(Tensor& t, uint64_t seed, uint64_t offset, float mean, float stddev) {
  GE_CHECK(is_floating(t.dtype()), "fill_normal: ", t.str());
  GE_DISPATCH(t, fill_normal(t, seed, offset, mean, stddev));
}

}  // namespace ops
}  // namespace ge
