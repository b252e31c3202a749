// One exception type for everything a user can cause (bad files, bad flags, bad shapes):
// the message names what was wrong and what was expected, and the CLI prints it and exits 1.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace ge {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
inline void append(std::ostringstream&) {}
template <class T, class... Rest>
void append(std::ostringstream& os, const T& v, const Rest&... rest) {
  os << v;
  append(os, rest...);
}
}  // namespace detail

template <class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream os;
  detail::append(os, parts...);
  throw Error(os.str());
}

// Internal invariant or argument check: the message says which condition broke and where.
#define GE_CHECK(cond, ...)                                                              \
  do {                                                                                   \
    if (!(cond)) ::ge::fail(__FILE__, ":", __LINE__, ": ", __VA_ARGS__, " [" #cond "]"); \
  } while (0)

}  // namespace ge
