// CPU reference for ops::fp8_quantize, ops::fp8_dequantize, ops::fp8_round_trip and
// ops::fp8_round_trip_all (one round trip after the other): plain loops over the elements in
// storage order (codes and values share shape and memory format, so the i-th stored elements pair
// up), each element through core/fp8_scaling_math.h as the CUDA kernels (kernels/cuda/fp8_cast.cu)
// take it. amax is the maximum of fp8_amax_key over x, bitwise what the GPU's atomics leave.
#include <algorithm>
#include <cstdint>

#include "core/backend.h"
#include "core/fp8_scaling_math.h"
#include "cpu/cpu_util.h"

namespace ge {
namespace cpu {

void fp8_quantize(const Tensor& x, const Tensor& scale, Fp8Format format, Tensor& q, Tensor& amax) {
  require_cpu_floating(x, "fp8_quantize x");
  const float s = scale.data_as<float>()[0];
  uint8_t* codes = q.data_as<uint8_t>();
  uint32_t amax_key = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const auto v = static_cast<float>(load_as_double(x.data(), x.dtype(), i));  // exact: x is f32 or narrower
    codes[i] = fp8_quantize_element(v, s, format);
    amax_key = std::max(amax_key, fp8_amax_key(v));
  }
  amax.data_as<float>()[0] = bits_float(amax_key);
}

void fp8_dequantize(const Tensor& q, const Tensor& scale_inv, Fp8Format format, Tensor& y) {
  require_cpu_floating(y, "fp8_dequantize y");
  const float s = scale_inv.data_as<float>()[0];
  const uint8_t* codes = q.data_as<uint8_t>();
  for (int64_t i = 0; i < q.numel(); ++i)
    store_from_double(y.data(), y.dtype(), i, static_cast<double>(fp8_dequantize_element(codes[i], s, format)));
}

void fp8_round_trip(const Tensor& x, const Tensor& scale, const Tensor& scale_inv, Fp8Format format, Tensor& y,
                    const Tensor* amax, Tensor* codes) {
  require_cpu_floating(x, "fp8_round_trip x");
  const float s = scale.data_as<float>()[0], s_inv = scale_inv.data_as<float>()[0];
  uint32_t amax_key = amax ? float_bits(amax->data_as<float>()[0]) : 0u;
  uint8_t* q = codes ? codes->data_as<uint8_t>() : nullptr;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const auto v = static_cast<float>(load_as_double(x.data(), x.dtype(), i));  // exact: x is f32 or narrower
    amax_key = std::max(amax_key, fp8_amax_key(v));
    const uint8_t code = fp8_quantize_element(v, s, format);
    if (q) q[i] = code;
    store_from_double(y.data(), y.dtype(), i, static_cast<double>(fp8_round_trip_of_code(v, code, s_inv, format)));
  }
  if (amax) amax->data_as<float>()[0] = bits_float(amax_key);
}

void fp8_round_trip_all(const std::vector<ops::Fp8RoundTripOf>& trips) {
  for (const ops::Fp8RoundTripOf& t : trips) {
    Tensor y = t.y, codes = t.codes;
    fp8_round_trip(t.x, t.scale, t.scale_inv, t.format, y, t.amax.defined() ? &t.amax : nullptr,
                   codes.defined() ? &codes : nullptr);
  }
}

void fp8_round_trip_in_place(const ops::Fp8RoundTrip& r, Tensor& t) {
  Tensor codes = r.codes;  // from the values before they are rounded
  fp8_round_trip(t, r.scale, r.scale_inv, r.format, t, r.amax.defined() ? &r.amax : nullptr,
                 codes.defined() ? &codes : nullptr);
}

}  // namespace cpu
}  // namespace ge
