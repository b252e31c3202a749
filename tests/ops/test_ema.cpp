// ops::ema_update, the moving average of weights behind --ema-decay: the CPU reference against
// the update written out here (two rounded products and a rounded sum in f32), its argument
// checks, and the GPU kernel against the CPU bitwise, eagerly and replayed from a CUDA graph.
#include <cstring>
#include <vector>

#include "core/backend.h"
#include "ganengine/cuda_graph.h"
#include "ganengine/ops.h"
#include "support/test_util.h"

using namespace ge;
using namespace ge::test;

namespace {

const Device kCpu = Device::cpu();

// The update of one element as ops.h defines it, for an average a and a value v already in f32.
float reference_update(float a, float v, double decay) {
  const auto keep = static_cast<float>(decay);
  const auto take = static_cast<float>(1.0 - decay);
  volatile float kept = keep * a;  // volatile: each product rounded to f32 on its own
  volatile float taken = take * v;
  return kept + taken;
}

// Averages and values of the shapes G has (conv weights, BatchNorm's gamma and beta), in f32 and
// the half types, NCHW and NHWC, plus sizes off the GPU's chunk and vector widths.
struct EmaCase {
  std::vector<Tensor> averages, values;
};

EmaCase make_case(Device device) {
  EmaCase c;
  const std::vector<Shape> shapes = {{100, 32, 4, 4}, {32}, {32}, {32, 16, 4, 4}, {16, 3, 4, 4}, {1}, {4099}};
  int k = 0;
  for (const Shape& s : shapes)
    for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
      const MemoryFormat f = s.size() == 4 && (k++ % 2) ? MemoryFormat::NHWC : MemoryFormat::NCHW;
      c.values.push_back(random_tensor(s, dt, kCpu, f).to(device));
      c.averages.push_back(random_tensor(s, DType::F32, kCpu, f).to(device));
    }
  return c;
}

std::vector<Tensor> clones(const std::vector<Tensor>& ts, Device device) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(t.to(device));
  return out;
}

}  // namespace

namespace cpu_checks {

TEST_CASE("cpu ops: ema_update is decay times the average plus one minus decay times the value") {
  for (double decay : {0.999, 0.5, 0.0, 0.9}) {
    CAPTURE(decay);
    const EmaCase c = make_case(kCpu);
    std::vector<Tensor> averages = clones(c.averages, kCpu);
    ops::ema_update(averages, c.values, decay);
    for (size_t i = 0; i < averages.size(); ++i) {
      CAPTURE(c.values[i].str());
      const std::vector<double> before = c.averages[i].to_doubles(), value = c.values[i].to_doubles(),
                                after = averages[i].to_doubles();
      for (size_t e = 0; e < after.size(); ++e) {
        const float want = reference_update(static_cast<float>(before[e]), static_cast<float>(value[e]), decay);
        if (static_cast<float>(after[e]) != want) {
          FAIL_CHECK("element ", e, ": ", after[e], " != ", want);
          break;
        }
      }
    }
  }
}

TEST_CASE("cpu ops: ema_update repeated converges to a constant value") {
  std::vector<Tensor> averages = {Tensor::zeros({5}, DType::F32)};
  const std::vector<Tensor> values = {Tensor::from_doubles({1, -2, 3, 0.5, 8}, {5}, DType::F32)};
  for (int i = 0; i < 200; ++i) ops::ema_update(averages, values, 0.9);
  const std::vector<double> got = averages[0].to_doubles(), want = values[0].to_doubles();
  for (size_t e = 0; e < got.size(); ++e) CHECK(got[e] == doctest::Approx(want[e]).epsilon(1e-6));
}

TEST_CASE("cpu ops: ema_update rejects averages that are not f32 or do not match their values") {
  std::vector<Tensor> half_average = {Tensor::zeros({4}, DType::F16)};
  const std::vector<Tensor> value = {Tensor::zeros({4}, DType::F32)};
  CHECK_THROWS_WITH_AS(ops::ema_update(half_average, value, 0.9), doctest::Contains("expected an f32 average"), Error);
  std::vector<Tensor> short_average = {Tensor::zeros({3}, DType::F32)};
  CHECK_THROWS_WITH_AS(ops::ema_update(short_average, value, 0.9), doctest::Contains("ema_update: average"), Error);
  std::vector<Tensor> two = {Tensor::zeros({4}, DType::F32), Tensor::zeros({4}, DType::F32)};
  CHECK_THROWS_WITH_AS(ops::ema_update(two, value, 0.9), doctest::Contains("2 averages for 1 values"), Error);
  std::vector<Tensor> average = {Tensor::zeros({4}, DType::F32)};
  CHECK_THROWS_WITH_AS(ops::ema_update(average, value, 1.5), doctest::Contains("decay 1.5"), Error);
}

}  // namespace cpu_checks

namespace gpu_checks {

TEST_CASE("gpu ops: ema_update matches the CPU bitwise") {
  GE_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  const EmaCase c = make_case(kCpu);
  std::vector<Tensor> cpu_averages = clones(c.averages, kCpu);
  std::vector<Tensor> gpu_averages = clones(c.averages, gpu);
  const std::vector<Tensor> gpu_values = clones(c.values, gpu);
  for (int step = 0; step < 3; ++step) {
    ops::ema_update(cpu_averages, c.values, 0.999);
    ops::ema_update(gpu_averages, gpu_values, 0.999);
  }
  for (size_t i = 0; i < cpu_averages.size(); ++i) {
    CAPTURE(c.values[i].str());
    CHECK(same_bytes(gpu_averages[i], cpu_averages[i]));
  }
}

TEST_CASE("gpu ops: ema_update captured in a CUDA graph and replayed matches eager updates") {
  GE_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  const EmaCase c = make_case(kCpu);
  std::vector<Tensor> eager = clones(c.averages, gpu), replayed = clones(c.averages, gpu);
  const std::vector<Tensor> values = clones(c.values, gpu);
  CudaGraph graph;
  graph.capture(gpu, [&] { ops::ema_update(replayed, values, 0.99); });  // records, runs nothing
  for (int step = 0; step < 4; ++step) {
    ops::ema_update(eager, values, 0.99);
    graph.replay();
  }
  synchronize(gpu);
  for (size_t i = 0; i < eager.size(); ++i) {
    CAPTURE(c.values[i].str());
    CHECK(same_bytes(replayed[i], eager[i]));
  }
}

}  // namespace gpu_checks
