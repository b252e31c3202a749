#include "ganengine/env_choice.h"

#include <cstdlib>

#include "ganengine/error.h"

namespace ge {

std::string env_choice(const char* name, std::initializer_list<const char*> choices) {
  GE_CHECK(choices.size() > 0, "env_choice(", name, "): no choices");
  const char* v = std::getenv(name);
  if (!v || !*v) return *choices.begin();
  std::string expected;
  for (const char* c : choices) {
    if (std::string(v) == c) return c;
    expected += (expected.empty() ? std::string(c) + " (the default)" : std::string(", ") + c);
  }
  fail(name, "='", v, "': expected one of ", expected);
}

}  // namespace ge
