// FP8 bit conversions (core/fp8_bits.h), the CPU reference of FP8 training: every value of
// tests/goldens/golden_fp8.safetensors (tools/make_fp8_goldens.py: every half value, the ties and
// near-ties of every FP8 value, saturation, random floats) encoded bit for bit as the library
// casts do, and the decoding checked against the formats' definitions.
#include <cmath>
#include <cstdint>
#include <string>

#include "core/fp8_bits.h"
#include "support/golden.h"

using ge::Fp8Format;

namespace {

const char* name_of(Fp8Format f) { return f == Fp8Format::E4M3 ? "e4m3" : "e5m2"; }

}  // namespace

TEST_CASE("fp8 bits: float to E4M3 and E5M2 rounds to nearest even and saturates as the golden casts") {
  const ge::SafeTensorsFile& g = ge::test::golden("golden_fp8.safetensors");
  const ge::Tensor& inputs = ge::test::golden_tensor(g, "inputs");
  REQUIRE(inputs.numel() > 65536);  // every half value and the edges
  const float* x = inputs.data_as<float>();
  for (Fp8Format f : {Fp8Format::E4M3, Fp8Format::E5M2}) {
    CAPTURE(name_of(f));
    const uint8_t* want = ge::test::golden_tensor(g, name_of(f)).data_as<uint8_t>();
    int64_t wrong = 0, nans = 0;
    for (int64_t i = 0; i < inputs.numel(); ++i) {
      const uint8_t got = ge::float_to_fp8_bits(x[i], f);
      if (std::isnan(x[i])) {
        ++nans;
        CHECK(std::isnan(ge::fp8_bits_to_float(got, f)));
        continue;
      }
      if (got != want[i] && ++wrong <= 5)
        FAIL_CHECK(x[i], " encodes to ", int(got), " where the golden (", g.metadata.at("made_by"), ") has ",
                   int(want[i]));
    }
    CHECK(wrong == 0);
    CHECK(nans > 0);
  }
}

TEST_CASE("fp8 bits: decoding follows the formats' definitions and encoding a decoded value gives it back") {
  struct Expect {
    Fp8Format f;
    float max, min_subnormal, min_normal;
  };
  for (const Expect& e :
       {Expect{Fp8Format::E4M3, 448.0f, 0x1p-9f, 0x1p-6f}, Expect{Fp8Format::E5M2, 57344.0f, 0x1p-16f, 0x1p-14f}}) {
    CAPTURE(name_of(e.f));
    CHECK(ge::fp8_max(e.f) == e.max);
    CHECK(ge::fp8_bits_to_float(1, e.f) == e.min_subnormal);
    CHECK(ge::fp8_bits_to_float(e.f == Fp8Format::E4M3 ? 0x08 : 0x04, e.f) == e.min_normal);
    float previous = -1.0f;
    int finite = 0;
    for (int code = 0; code < 0x80; ++code) {
      CAPTURE(code);
      const float v = ge::fp8_bits_to_float(static_cast<uint8_t>(code), e.f);
      const float negative = ge::fp8_bits_to_float(static_cast<uint8_t>(code | 0x80), e.f);
      if (!std::isfinite(v)) {
        CHECK((std::isnan(negative) || negative == -v));
        continue;
      }
      ++finite;
      CHECK(v > previous);  // codes are ordered as their values
      previous = v;
      CHECK(negative == -v);
      CHECK(std::signbit(negative));
      CHECK(int(ge::float_to_fp8_bits(v, e.f)) == code);
      CHECK(int(ge::float_to_fp8_bits(-v, e.f)) == (code | 0x80));
    }
    CHECK(previous == e.max);
    CHECK(finite == (e.f == Fp8Format::E4M3 ? 127 : 124));  // E4M3: one NaN; E5M2: inf and 3 NaNs
  }
  CHECK(std::isinf(ge::fp8_bits_to_float(0x7C, Fp8Format::E5M2)));
  CHECK(std::isnan(ge::fp8_bits_to_float(0x7F, Fp8Format::E4M3)));
  CHECK(int(ge::float_to_fp8_bits(INFINITY, Fp8Format::E5M2)) == 0x7B);  // saturating, not inf
  CHECK(int(ge::float_to_fp8_bits(-INFINITY, Fp8Format::E4M3)) == 0xFE);
}
