// Cases that exist to be run by tests/cli/test_skip_reporting.cpp in a child process: the skip
// rules of support/test_skip.h, seen from outside. doctest::skip() keeps them out of every
// ordinary run; the child runs them with --no-skip.
#include "support/test_skip.h"

#include <string>

TEST_CASE("skip fixture: a skip before any assertion" * doctest::skip()) {
  GE_SKIP_TEST(std::string("the fixture's reason"));
}

TEST_CASE("skip fixture: a skip after a passing assertion" * doctest::skip()) {
  CHECK(1 + 1 == 2);
  GE_SKIP_TEST(std::string("the fixture's reason"));
}

TEST_CASE("skip fixture: a skip after a failing assertion" * doctest::skip()) {
  CHECK(1 + 1 == 3);
  GE_SKIP_TEST(std::string("the fixture's reason"));
}

TEST_CASE("skip fixture: a passing case" * doctest::skip()) { CHECK(2 * 2 == 4); }
