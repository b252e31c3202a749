// Settings chosen by environment variables (env_choice.h).
#include "ganengine/env_choice.h"
#include "scoped_env.h"
#include "test_util.h"

using namespace ge;
using namespace ge::test;

TEST_CASE("env choice: unset or empty is the default and a value not listed names every choice") {
  {
    ScopedEnv env{{"GE_TEST_CHOICE", nullptr}};
    CHECK(env_choice("GE_TEST_CHOICE", {"timed", "find"}) == "timed");
  }
  {
    ScopedEnv env{{"GE_TEST_CHOICE", ""}};
    CHECK(env_choice("GE_TEST_CHOICE", {"timed", "find"}) == "timed");
  }
  {
    ScopedEnv env{{"GE_TEST_CHOICE", "find"}};
    CHECK(env_choice("GE_TEST_CHOICE", {"timed", "find"}) == "find");
  }
  {
    ScopedEnv env{{"GE_TEST_CHOICE", "Find"}};
    CHECK_THROWS_WITH_AS(env_choice("GE_TEST_CHOICE", {"timed", "find"}),
                         "GE_TEST_CHOICE='Find': expected one of timed (the default), find", Error);
  }
}
