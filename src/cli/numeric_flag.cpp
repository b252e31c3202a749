#include "cli/numeric_flag.h"

#include <cmath>
#include <cstdlib>
#include <limits>

#include "ganengine/error.h"

namespace ge::cli {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

[[noreturn]] void not_a_number(const std::string& flag, const std::string& text, const char* kind,
                               const std::string& expected) {
  fail(flag, " '", text, "' is not a valid value (expected ", kind, ": ", expected, ")");
}

[[noreturn]] void out_of_range(const std::string& flag, const std::string& text, const std::string& expected) {
  fail(flag, " '", text, "' is out of range (expected ", expected, ")");
}

// The magnitude of an unsigned decimal or 0x-hex text; false when it is not one. Sets
// `overflow` instead of wrapping when it exceeds 64 bits.
bool magnitude_of(const std::string& digits, uint64_t& value, bool& overflow) {
  value = 0;
  overflow = false;
  const bool hex = digits.size() > 2 && digits[0] == '0' && digits[1] == 'x';
  const size_t start = hex ? 2 : 0;
  const uint64_t base = hex ? 16 : 10;
  if (digits.size() == start) return false;
  for (size_t i = start; i < digits.size(); ++i) {
    const int d = hex ? hex_value(digits[i]) : (is_digit(digits[i]) ? digits[i] - '0' : -1);
    if (d < 0) return false;
    if (__builtin_mul_overflow(value, base, &value) || __builtin_add_overflow(value, static_cast<uint64_t>(d), &value))
      overflow = true;
  }
  return true;
}

}  // namespace

int64_t parse_integer_flag(const std::string& flag, const std::string& text, int64_t min, int64_t max,
                           const std::string& expected) {
  const bool negative = !text.empty() && text[0] == '-';
  const bool sign = negative || (!text.empty() && text[0] == '+');
  uint64_t magnitude = 0;
  bool overflow = false;
  if (!magnitude_of(text.substr(sign ? 1 : 0), magnitude, overflow))
    not_a_number(flag, text, "a whole number", expected);
  // int64's range is [-2^63, 2^63 - 1]: the magnitude of its smallest value is one more.
  const uint64_t limit =
      negative ? uint64_t(std::numeric_limits<int64_t>::max()) + 1 : uint64_t(std::numeric_limits<int64_t>::max());
  if (overflow || magnitude > limit) out_of_range(flag, text, expected);
  const int64_t value =
      negative ? (magnitude == limit ? std::numeric_limits<int64_t>::min() : -static_cast<int64_t>(magnitude))
               : static_cast<int64_t>(magnitude);
  if (value < min || value > max) out_of_range(flag, text, expected);
  return value;
}

uint64_t parse_unsigned_flag(const std::string& flag, const std::string& text, const std::string& expected) {
  uint64_t value = 0;
  bool overflow = false;
  if (!magnitude_of(text, value, overflow)) {
    if (!text.empty() && text[0] == '-') out_of_range(flag, text, expected);
    not_a_number(flag, text, "a whole number", expected);
  }
  if (overflow) out_of_range(flag, text, expected);
  return value;
}

bool is_decimal_number(const std::string& text) {
  // strtod alone would also take "nan", "inf", hex floats and leading spaces, and would stop
  // quietly before trailing garbage.
  size_t i = 0;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
  size_t mantissa_digits = 0;
  while (i < text.size() && is_digit(text[i])) ++i, ++mantissa_digits;
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && is_digit(text[i])) ++i, ++mantissa_digits;
  }
  if (mantissa_digits == 0) return false;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    size_t exponent_digits = 0;
    while (i < text.size() && is_digit(text[i])) ++i, ++exponent_digits;
    if (exponent_digits == 0) return false;
  }
  return i == text.size();
}

double parse_real_flag(const std::string& flag, const std::string& text, const std::string& expected,
                       double max_magnitude) {
  if (!is_decimal_number(text)) not_a_number(flag, text, "a number", expected);
  const double value = std::strtod(text.c_str(), nullptr);  // the C locale: '.' is the decimal point
  if (!std::isfinite(value) || std::fabs(value) > max_magnitude) out_of_range(flag, text, expected);
  return value;
}

}  // namespace ge::cli
