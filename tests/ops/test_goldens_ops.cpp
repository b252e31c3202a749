// Every op against PyTorch (float64 results of f32 inputs): the CPU reference in NCHW, and the
// GPU in both layouts. fp32 must agree within 1e-5 of the tensor norm.
#include <cstdlib>

#include "ganengine/ops.h"
#include "support/golden.h"

using namespace ge;
using namespace ge::test;

namespace {

constexpr double kTol = 1e-5;

void expect_close(const Tensor& ours, const SafeTensorsFile& f, const std::string& key) {
  double err = rel_error(ours.to_doubles(), golden_tensor(f, key).to_doubles());
  INFO(key, ": relative error ", err);
  CHECK(err < kTol);
}

Tensor like(const Tensor& t) { return Tensor::empty(t.shape(), t.dtype(), t.device(), t.format()); }

void conv_cases(Device d, MemoryFormat fmt, bool transposed) {
  const auto& f = golden("golden_ops.safetensors");
  const std::string kind = transposed ? "convt" : "conv";
  for (int i = 0;; ++i) {
    const std::string pre = kind + std::to_string(i) + ".";
    auto meta = f.metadata.find(kind + std::to_string(i));
    if (meta == f.metadata.end()) {
      CHECK(i >= 4);  // the golden holds at least four cases of each
      break;
    }
    Conv2dParams p;
    p.stride = std::atoi(meta->second.c_str());
    p.pad = std::atoi(meta->second.c_str() + meta->second.find(',') + 1);
    Tensor x = golden_on(f, pre + "x", d, fmt), w = golden_on(f, pre + "w", d, fmt), dy = golden_on(f, pre + "dy", d, fmt);
    Tensor y = Tensor::empty(dy.shape(), DType::F32, d, fmt), dx = like(x), dw = like(w);
    for (Tensor* t : {&y, &dx, &dw}) poison(*t);
    if (transposed) {
      ops::conv_transpose2d_forward(x, w, y, p);
      ops::conv_transpose2d_backward_data(dy, w, dx, p);
      ops::conv_transpose2d_backward_filter(x, dy, dw, p);
    } else {
      ops::conv2d_forward(x, w, y, p);
      ops::conv2d_backward_data(dy, w, dx, p);
      ops::conv2d_backward_filter(x, dy, dw, p);
    }
    expect_close(y, f, pre + "y");
    expect_close(dx, f, pre + "dx");
    expect_close(dw, f, pre + "dw");
  }
}

void batchnorm_cases(Device d, MemoryFormat fmt) {
  const auto& f = golden("golden_ops.safetensors");
  for (int i = 0; i < 3; ++i) {
    const std::string pre = "bn" + std::to_string(i) + ".";
    Tensor x = golden_on(f, pre + "x", d, fmt), dy = golden_on(f, pre + "dy", d, fmt);
    Tensor gamma = golden_on(f, pre + "gamma", d), beta = golden_on(f, pre + "beta", d);
    Tensor rm = golden_on(f, pre + "running_mean", d), rv = golden_on(f, pre + "running_var", d);
    const int64_t C = x.dim(1);
    Tensor y = like(x), dx = like(x), y_eval = like(x);
    Tensor mean = Tensor::empty({C}, DType::F32, d), invstd = Tensor::empty({C}, DType::F32, d);
    Tensor dgamma = like(gamma), dbeta = like(beta);
    for (Tensor* t : {&y, &dx, &y_eval, &mean, &invstd, &dgamma, &dbeta}) poison(*t);
    ops::batchnorm_forward_eval(x, gamma, beta, rm, rv, 1e-5f, y_eval);
    expect_close(y_eval, f, pre + "y_eval");
    ops::batchnorm_forward_train(x, gamma, beta, rm, rv, 0.1f, 1e-5f, y, mean, invstd);
    ops::batchnorm_backward(x, dy, gamma, mean, invstd, dx, dgamma, dbeta);
    expect_close(y, f, pre + "y");
    expect_close(rm, f, pre + "running_mean_after");
    expect_close(rv, f, pre + "running_var_after");
    expect_close(dx, f, pre + "dx");
    expect_close(dgamma, f, pre + "dgamma");
    expect_close(dbeta, f, pre + "dbeta");
  }
}

void activation_cases(Device d, MemoryFormat fmt) {
  const auto& f = golden("golden_ops.safetensors");
  const std::pair<const char*, ops::Activation> acts[] = {
      {"relu", ops::Activation::ReLU}, {"leaky_relu", ops::Activation::LeakyReLU}, {"tanh", ops::Activation::Tanh}};
  for (auto& [name, a] : acts) {
    const std::string pre = std::string(name) + ".";
    Tensor x = golden_on(f, pre + "x", d, fmt), dy = golden_on(f, pre + "dy", d, fmt);
    Tensor y = like(x), dx = like(x);
    poison(y);
    poison(dx);
    ops::activation_forward(a, x, y, 0.2f);
    ops::activation_backward(a, y, dy, dx, 0.2f);
    expect_close(y, f, pre + "y");
    expect_close(dx, f, pre + "dx");
  }
}

void bce_cases(Device d) {
  const auto& f = golden("golden_ops.safetensors");
  int cases = 0;
  for (int i = 0; i < 4; ++i)
    for (int t = 0; t < 2; ++t)
      for (int s : {1, 1024}) {
        const std::string pre = "bce" + std::to_string(i) + "_t" + std::to_string(t) + "_s" + std::to_string(s) + ".";
        Tensor logits = golden_on(f, pre + "logits", d);
        Tensor loss = Tensor::empty({1}, DType::F32, d), ms = Tensor::empty({1}, DType::F32, d), dl = like(logits);
        Tensor scale = Tensor::from_doubles({double(s)}, {1}, DType::F32, d);
        for (Tensor* p : {&loss, &ms, &dl}) poison(*p);
        ops::bce_with_logits_forward(logits, float(t), loss, ms);
        ops::bce_with_logits_backward(logits, float(t), scale, dl);
        expect_close(loss, f, pre + "loss");
        expect_close(ms, f, pre + "mean_sigmoid");
        expect_close(dl, f, pre + "dlogits");
        ++cases;
      }
  CHECK(cases == 16);
}

}  // namespace

TEST_CASE("golden/cpu: conv2d and conv_transpose2d match PyTorch") {
  conv_cases(Device::cpu(), MemoryFormat::NCHW, false);
  conv_cases(Device::cpu(), MemoryFormat::NCHW, true);
  conv_cases(Device::cpu(), MemoryFormat::NHWC, false);
}
TEST_CASE("golden/cpu: batchnorm matches PyTorch") {
  batchnorm_cases(Device::cpu(), MemoryFormat::NCHW);
  batchnorm_cases(Device::cpu(), MemoryFormat::NHWC);
}
TEST_CASE("golden/cpu: activations match PyTorch") { activation_cases(Device::cpu(), MemoryFormat::NCHW); }
TEST_CASE("golden/cpu: BCE with logits matches PyTorch") { bce_cases(Device::cpu()); }

TEST_CASE("golden/gpu: conv2d and conv_transpose2d match PyTorch (fp32 no TF32)") {
  GE_REQUIRE_GPU();
  for (MemoryFormat fmt : {MemoryFormat::NCHW, MemoryFormat::NHWC}) {
    conv_cases(Device::cuda(0), fmt, false);
    conv_cases(Device::cuda(0), fmt, true);
  }
}
TEST_CASE("golden/gpu: batchnorm matches PyTorch") {
  GE_REQUIRE_GPU();
  batchnorm_cases(Device::cuda(0), MemoryFormat::NCHW);
  batchnorm_cases(Device::cuda(0), MemoryFormat::NHWC);
}
TEST_CASE("golden/gpu: activations and BCE match PyTorch") {
  GE_REQUIRE_GPU();
  activation_cases(Device::cuda(0), MemoryFormat::NHWC);
  bce_cases(Device::cuda(0));
}
