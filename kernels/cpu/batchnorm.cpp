// CPU reference for BatchNorm2d: per-channel statistics over (N, H, W), computed in double and
// rounded once on store. The formulas are PyTorch's:
//   training:  mean, var = batch mean and biased variance; invstd = 1 / sqrt(var + eps)
//              y = (x - mean) * invstd * gamma + beta
//              running = (1 - momentum) * running + momentum * stat, with the UNBIASED variance
//   backward:  dbeta = sum dy, dgamma = sum dy * xhat,
//              dx = gamma * invstd / M * (M * dy - dbeta - xhat * dgamma),   M = N*H*W
// save_mean / save_invstd are f32 by contract; any floating dtype is accepted here so that the
// f64 gradient checks keep full precision between the forward and the backward pass.
#include <cmath>
#include <initializer_list>
#include <vector>

#include "core/backend.h"
#include "cpu/cpu_util.h"

namespace ge {
namespace cpu {
namespace {

// Calls fn(i) for the logical index i (NCHW order) of every element of channel c of a
// (N, C, H, W) tensor. Kernels address tensors through logical indices so that x, y, dy and dx
// may each be in either memory format.
template <class Fn>
void for_each_in_channel(const Shape& s, int64_t c, const Fn& fn) {
  const int64_t N = s[0], C = s[1], HW = s[2] * s[3];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = (n * C + c) * HW; i < (n * C + c + 1) * HW; ++i) fn(i);
}

void check_activation(const Tensor& t, const char* what) {
  require_cpu_floating(t, what);
  GE_CHECK(t.rank() == 4, what, " must be 4-D (N,C,H,W), got ", t.str());
}

void check_per_channel(const Tensor& t, int64_t C, const char* what) {
  require_cpu_floating(t, what);
  GE_CHECK(t.numel() == C, what, " must hold one value per channel (", C, "), got ", t.str());
}

using TensorList = std::initializer_list<const Tensor*>;

double at(const Tensor& t, int64_t i) { return load_as_double(t.data(), t.dtype(), i); }
void put(Tensor& t, int64_t i, double v) { store_from_double(t.data(), t.dtype(), i, v); }

}  // namespace

void batchnorm_forward_train(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                             Tensor& running_var, float momentum, float eps, Tensor& y, Tensor& save_mean,
                             Tensor& save_invstd, const ops::FusedActivation* act, const ops::BatchNormSync* sync) {
  check_activation(x, "batchnorm x");
  check_activation(y, "batchnorm y");
  require_same_shape(x, y, "x", "y");
  const int64_t C = x.shape()[1], M = x.shape()[0] * x.shape()[2] * x.shape()[3];
  for (const Tensor* t : TensorList{&gamma, &beta, &running_mean, &running_var, &save_mean, &save_invstd})
    check_per_channel(*t, C, "batchnorm per-channel tensor");
  GE_CHECK(M > 1 || sync, "batchnorm training needs more than one value per channel, got ", x.str());

  // This batch's mean and sum of squared deviations per channel, in two passes (no
  // cancellation when the mean is large).
  std::vector<double> mean(static_cast<size_t>(C)), m2(static_cast<size_t>(C));
  parallel_for(C, [&](int64_t c) {
    double sum = 0.0;
    for_each_in_channel(x.shape(), c, [&](int64_t i) { sum += load_logical(x, i); });
    const double mu = sum / static_cast<double>(M);
    double sq = 0.0;
    for_each_in_channel(x.shape(), c, [&](int64_t i) {
      const double d = load_logical(x, i) - mu;
      sq += d * d;
    });
    mean[static_cast<size_t>(c)] = mu;
    m2[static_cast<size_t>(c)] = sq;
  });
  double count = static_cast<double>(M);
  if (sync) {
    // Chan et al. over the replicas: the global mean from the counts and sums, then each
    // replica's squared deviations moved to that mean.
    std::vector<double> first(static_cast<size_t>(2 * C));
    for (int64_t c = 0; c < C; ++c) {
      first[static_cast<size_t>(c)] = static_cast<double>(M);
      first[static_cast<size_t>(C + c)] = static_cast<double>(M) * mean[static_cast<size_t>(c)];
    }
    Tensor sums = Tensor::from_doubles(first, {2 * C}, DType::F64);
    sync->all_reduce_sum(sums);
    const std::vector<double> total = sums.to_doubles();
    std::vector<double> second(static_cast<size_t>(C));
    for (int64_t c = 0; c < C; ++c) {
      const double global = total[static_cast<size_t>(C + c)] / total[static_cast<size_t>(c)];
      const double d = mean[static_cast<size_t>(c)] - global;
      second[static_cast<size_t>(c)] = m2[static_cast<size_t>(c)] + static_cast<double>(M) * d * d;
      mean[static_cast<size_t>(c)] = global;
    }
    Tensor deviations = Tensor::from_doubles(second, {C}, DType::F64);
    sync->all_reduce_sum(deviations);
    m2 = deviations.to_doubles();
    count = total[0];
    Tensor counted = Tensor::from_doubles({count}, {1}, DType::F64);
    Tensor out = sync->total_count;
    ops::cast(counted, out);
  }

  parallel_for(C, [&](int64_t c) {
    const double mu = mean[static_cast<size_t>(c)];
    const double var = m2[static_cast<size_t>(c)] / count;
    const double invstd = 1.0 / std::sqrt(var + static_cast<double>(eps));
    const double g = at(gamma, c), b = at(beta, c);
    for_each_in_channel(x.shape(), c,
                        [&](int64_t i) { store_logical(y, i, (load_logical(x, i) - mu) * invstd * g + b); });

    put(save_mean, c, mu);
    put(save_invstd, c, invstd);
    // A non-finite batch (overflowed activations) must not poison the running statistics.
    if (std::isfinite(mu) && std::isfinite(var)) {
      const double m = momentum;
      const double unbiased = var * count / (count - 1);
      put(running_mean, c, (1.0 - m) * at(running_mean, c) + m * mu);
      put(running_var, c, (1.0 - m) * at(running_var, c) + m * unbiased);
    }
  });
  // The reference of the fused op is the two ops in sequence.
  if (act) cpu::activation_forward(act->kind, y, y, act->negative_slope);
}

void batchnorm_forward_eval(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                            const Tensor& running_var, float eps, Tensor& y, const ops::FusedActivation* act) {
  check_activation(x, "batchnorm x");
  check_activation(y, "batchnorm y");
  require_same_shape(x, y, "x", "y");
  const int64_t C = x.shape()[1];
  for (const Tensor* t : {&gamma, &beta, &running_mean, &running_var})
    check_per_channel(*t, C, "batchnorm per-channel tensor");

  // Element-wise in logical order, so x and y may differ in memory format.
  const int64_t HW = x.shape()[2] * x.shape()[3];
  parallel_for(x.shape()[0] * C, [&](int64_t nc) {
    const int64_t c = nc % C;
    const double invstd = 1.0 / std::sqrt(at(running_var, c) + static_cast<double>(eps));
    const double mean = at(running_mean, c), g = at(gamma, c), b = at(beta, c);
    for (int64_t i = nc * HW; i < (nc + 1) * HW; ++i) store_logical(y, i, (load_logical(x, i) - mean) * invstd * g + b);
  });
  if (act) cpu::activation_forward(act->kind, y, y, act->negative_slope);
}

void batchnorm_backward(const Tensor& x, const Tensor& dy_out, const Tensor& gamma, const Tensor& save_mean,
                        const Tensor& save_invstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                        const ops::FusedActivation* act, const Tensor* y_act, const Tensor* /*beta*/,
                        const ops::BatchNormSync* sync, const ops::Fp8RoundTrip* round_dx) {
  // With a fused activation, its gradient comes first, as the unfused layers would compute it
  // (from y_act: the reference reads what the forward wrote).
  Tensor dy = dy_out;
  if (act) {
    GE_CHECK(y_act && y_act->defined(), "batchnorm backward with a fused activation needs the activation's output");
    dy = Tensor::empty(dy_out.shape(), dy_out.dtype(), dy_out.device(), dy_out.format());
    cpu::activation_backward(act->kind, *y_act, dy_out, dy, act->negative_slope);
  }
  check_activation(x, "batchnorm x");
  check_activation(dy, "batchnorm dy");
  check_activation(dx, "batchnorm dx");
  require_same_shape(x, dy, "x", "dy");
  require_same_shape(x, dx, "x", "dx");
  const int64_t C = x.shape()[1];
  for (const Tensor* t : TensorList{&gamma, &save_mean, &save_invstd, &dgamma, &dbeta})
    check_per_channel(*t, C, "batchnorm per-channel tensor");
  GE_CHECK(dgamma.dtype() == gamma.dtype() && dbeta.dtype() == gamma.dtype(),
           "batchnorm dgamma/dbeta must have gamma's dtype ", dtype_name(gamma.dtype()));

  // dx may alias dy, so every channel's dy is read before any dx is written.
  std::vector<std::vector<double>> xhat(static_cast<size_t>(C)), grad(static_cast<size_t>(C));
  std::vector<double> sums(static_cast<size_t>(2 * C));  // sum of dy, then of dy * xhat
  parallel_for(C, [&](int64_t c) {
    const double mean = at(save_mean, c), invstd = at(save_invstd, c);
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for_each_in_channel(x.shape(), c, [&](int64_t i) {
      const double xh = (load_logical(x, i) - mean) * invstd;
      const double d = load_logical(dy, i);
      xhat[static_cast<size_t>(c)].push_back(xh);
      grad[static_cast<size_t>(c)].push_back(d);
      sum_dy += d;
      sum_dy_xhat += d * xh;
    });
    // This replica's parameter gradients, also with --sync-bn (PyTorch's SyncBatchNorm).
    put(dbeta, c, sum_dy);
    put(dgamma, c, sum_dy_xhat);
    sums[static_cast<size_t>(c)] = sum_dy;
    sums[static_cast<size_t>(C + c)] = sum_dy_xhat;
  });
  double M = static_cast<double>(x.shape()[0] * x.shape()[2] * x.shape()[3]);
  if (sync) {
    Tensor total = Tensor::from_doubles(sums, {2 * C}, DType::F64);
    sync->all_reduce_sum(total);
    sums = total.to_doubles();
    M = sync->total_count.to_doubles()[0];
  }
  parallel_for(C, [&](int64_t c) {
    const double k = at(gamma, c) * at(save_invstd, c) / M;
    const double sum_dy = sums[static_cast<size_t>(c)], sum_dy_xhat = sums[static_cast<size_t>(C + c)];
    size_t j = 0;
    for_each_in_channel(x.shape(), c, [&](int64_t i) {
      store_logical(dx, i,
                    k * (M * grad[static_cast<size_t>(c)][j] - sum_dy - xhat[static_cast<size_t>(c)][j] * sum_dy_xhat));
      ++j;
    });
  });
  // The reference rounds dx as a pass of its own: what the GPU's dx pass writes in one.
  if (round_dx) fp8_round_trip_in_place(*round_dx, dx);
}

}  // namespace cpu
}  // namespace ge
