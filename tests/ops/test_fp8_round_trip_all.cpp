// ops::fp8_round_trip_all: on the CPU bitwise one ops::fp8_round_trip after the other, values,
// codes and amaxes (two trips folding into one amax included); on the GPU bitwise the CPU's, for
// trips that share one launch (of up to eight: more take several), and for those that cannot
// (f32, another format or dtype than the first trip's, unaligned views) and go one by one.
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "ganengine/fp8.h"
#include "ganengine/ops.h"
#include "support/test_util.h"

using namespace ge;
using namespace ge::test;

namespace {

struct TripSpec {
  int64_t n;
  DType dtype;
  Fp8Format format;
  float scale;
  bool amax, codes;
  int64_t offset = 0;  // x and y as views starting this many elements into their storage
  int amax_slot = -1;  // >= 0: folds into the amax of that earlier trip
};

// Values over many binades of both signs, with infinities, a NaN and values beyond every range.
Tensor spread(int64_t n, DType dtype) {
  std::vector<double> v = random_values(n, -20.0, 14.0);
  const std::vector<double> signs = random_values(n);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::copysign(std::exp2(v[i]), signs[i]);
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> edges = {0.0, -0.0, inf, -inf, 1e6, 448.0, 57344.0, 0x1p-9};
  for (size_t i = 0; i < edges.size() && i < v.size(); ++i) v[v.size() - 1 - i] = edges[i];
  if (n > 100) v[n / 2] = std::numeric_limits<double>::quiet_NaN();
  return Tensor::from_doubles(v, {n}, dtype);
}

struct Trips {
  std::vector<ops::Fp8RoundTripOf> trips;
  std::vector<Tensor> amaxes;
};

// The trips of `specs` on `device`, x from `xs` (CPU tensors), y and codes poisoned, each amax
// starting at 0.25.
Trips make_trips(const std::vector<TripSpec>& specs, const std::vector<Tensor>& xs, Device device) {
  Trips t;
  for (size_t i = 0; i < specs.size(); ++i) {
    const TripSpec& s = specs[i];
    const Tensor storage = xs[i].to(device);
    const Tensor x = storage.slice0(s.offset, s.offset + s.n);
    Tensor y_storage = poisoned_like(storage, device);
    Tensor amax = s.amax_slot >= 0 ? t.amaxes[s.amax_slot] : f32_scalar(0.25f, device);
    t.amaxes.push_back(amax);
    Tensor codes = s.codes ? Tensor::empty({s.n}, DType::U8, device) : Tensor();
    if (codes.defined()) poison(codes);
    t.trips.push_back(ops::Fp8RoundTripOf{x, f32_scalar(s.scale, device), f32_scalar(1.0f / s.scale, device), s.format,
                                          y_storage.slice0(s.offset, s.offset + s.n),
                                          s.amax || s.amax_slot >= 0 ? amax : Tensor(), codes});
  }
  return t;
}

std::vector<Tensor> inputs_for(const std::vector<TripSpec>& specs) {
  std::vector<Tensor> xs;
  for (const TripSpec& s : specs) xs.push_back(spread(s.n + s.offset, s.dtype));
  return xs;
}

void check_same_trips(const Trips& a, const Trips& b) {
  REQUIRE(a.trips.size() == b.trips.size());
  for (size_t i = 0; i < a.trips.size(); ++i) {
    CAPTURE(i);
    CHECK(same_values_or_both_nan(a.trips[i].y, b.trips[i].y));
    if (a.trips[i].codes.defined()) CHECK(same_bytes(a.trips[i].codes, b.trips[i].codes));
    CHECK(same_bytes(a.amaxes[i], b.amaxes[i]));
  }
}

const std::vector<TripSpec> kMixed = {
    {131072, DType::F16, Fp8Format::E4M3, 1.0f, true, true},
    {12345, DType::F16, Fp8Format::E4M3, 8.0f, true, false},  // a tail of one pack short of eight
    {7, DType::F16, Fp8Format::E4M3, 0.5f, false, true},      // the tail alone
    {4096, DType::F16, Fp8Format::E4M3, 2.0f, true, true, 0, 0},
    {1000, DType::F16, Fp8Format::E4M3, 1.0f, true, true, 3},  // unaligned: one by one
    {2048, DType::BF16, Fp8Format::E4M3, 1.0f, true, true},    // another dtype: one by one
    {2048, DType::F16, Fp8Format::E5M2, 1.0f, true, true},     // another format: one by one
    {999, DType::F32, Fp8Format::E4M3, 4.0f, true, true},      // f32: one by one
};

}  // namespace

TEST_CASE("cpu ops: fp8_round_trip_all is each fp8_round_trip in turn with its amax and codes") {
  const std::vector<Tensor> xs = inputs_for(kMixed);
  const Trips all = make_trips(kMixed, xs, Device::cpu()), one_by_one = make_trips(kMixed, xs, Device::cpu());
  ops::fp8_round_trip_all(all.trips);
  for (const ops::Fp8RoundTripOf& t : one_by_one.trips) {
    Tensor y = t.y, codes = t.codes;
    ops::fp8_round_trip(t.x, t.scale, t.scale_inv, t.format, y, t.amax.defined() ? &t.amax : nullptr,
                        codes.defined() ? &codes : nullptr);
  }
  check_same_trips(all, one_by_one);
  CHECK(std::isnan(all.amaxes[0].item()));  // the NaN of trip 0's values, folded with trip 3's
  CHECK(all.amaxes[2].item() == 0.25f);     // trip 2 records none
}

TEST_CASE("cpu ops: fp8_round_trip_all rejects a trip whose operands do not match") {
  Tensor x = Tensor::zeros({16}, DType::F16), short_y = Tensor::zeros({15}, DType::F16);
  const std::vector<ops::Fp8RoundTripOf> trips = {
      {x, f32_scalar(1.0f), f32_scalar(1.0f), Fp8Format::E4M3, Tensor::zeros({16}, DType::F16), Tensor(), Tensor()},
      {x, f32_scalar(1.0f), f32_scalar(1.0f), Fp8Format::E4M3, short_y, Tensor(), Tensor()}};
  CHECK_THROWS_WITH_AS(ops::fp8_round_trip_all(trips), doctest::Contains("fp8_round_trip_all: x"), Error);
  const std::vector<ops::Fp8RoundTripOf> no_y = {
      {x, f32_scalar(1.0f), f32_scalar(1.0f), Fp8Format::E4M3, Tensor(), Tensor(), Tensor()}};
  CHECK_THROWS_WITH_AS(ops::fp8_round_trip_all(no_y), doctest::Contains("needs x and y"), Error);
}

TEST_CASE("gpu ops: fp8_round_trip_all matches the CPU bitwise in one launch and in the trips it runs one by one") {
  GE_REQUIRE_GPU();
  std::vector<TripSpec> many;  // ten trips of one launch's kind: two launches
  for (int i = 0; i < 10; ++i)
    many.push_back({1024 * (i + 1) + 8 * i, DType::F16, Fp8Format::E4M3, 1.0f + i, i % 3 != 0, i % 2 == 0});
  std::vector<TripSpec> bf16_first = kMixed;
  std::swap(bf16_first[0], bf16_first[5]);  // the first trip sets the launch's dtype
  for (const std::vector<TripSpec>& specs : {kMixed, bf16_first, many}) {
    const std::vector<Tensor> xs = inputs_for(specs);
    const Trips cpu = make_trips(specs, xs, Device::cpu()), gpu = make_trips(specs, xs, Device::cuda(0));
    ops::fp8_round_trip_all(cpu.trips);
    ops::fp8_round_trip_all(gpu.trips);
    check_same_trips(gpu, cpu);
  }
}
