// The value of a numeric flag, read strictly: the whole text is the number, or the value is
// refused with an error that names the flag, quotes the value and says what the flag accepts.
// Nothing is read past a number ("1x", "0.5abc"), rounded into range, wrapped around or taken
// from an empty text, and NaN and infinities are no values of any flag.
#pragma once
#include <cfloat>
#include <cstdint>
#include <string>

namespace ge::cli {

// A whole number in [min, max]: an optional sign, then decimal digits or 0x and hex digits
// (cxxopts' spelling, which the flags have always taken). `expected` says what the flag
// accepts, e.g. "a positive number of images".
int64_t parse_integer_flag(const std::string& flag, const std::string& text, int64_t min, int64_t max,
                           const std::string& expected);

// The same for a flag that takes every 64-bit unsigned value (a seed); no sign.
uint64_t parse_unsigned_flag(const std::string& flag, const std::string& text, const std::string& expected);

// Whether text is a decimal number as parse_real_flag takes it (before its range check).
bool is_decimal_number(const std::string& text);

// A finite decimal number, [+-]digits[.digits][e[+-]digits] (".5" and "5." too), whose
// magnitude is at most `max_magnitude` (the largest double by default; FLT_MAX for a float).
double parse_real_flag(const std::string& flag, const std::string& text, const std::string& expected,
                       double max_magnitude = DBL_MAX);

}  // namespace ge::cli
