#include "support/test_skip.h"

#include <cstdio>
#include <map>
#include <mutex>

namespace ge::test {
namespace {

struct SkipLedger {
  std::mutex mutex;
  bool current_skipped = false;
  std::string current_reason;
  int ran = 0;
  int failed = 0;
  int skipped = 0;
  int skipped_after_assertions = 0;
  std::map<std::string, int> by_reason;
};

SkipLedger& ledger() {
  static SkipLedger l;
  return l;
}

// Sees every case start and end (a listener: the chosen reporter still prints as usual).
class SkipListener : public doctest::IReporter {
 public:
  explicit SkipListener(const doctest::ContextOptions& /*options*/) {}
  void report_query(const doctest::QueryData& /*data*/) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& /*stats*/) override {}
  void test_case_start(const doctest::TestCaseData& tc) override {
    std::lock_guard<std::mutex> lock(ledger().mutex);
    ledger().current_skipped = false;
    ledger().current_reason.clear();
    name_ = tc.m_name;
  }
  void test_case_reenter(const doctest::TestCaseData& /*tc*/) override {}
  void test_case_end(const doctest::CurrentTestCaseStats& stats) override {
    SkipLedger& l = ledger();
    std::lock_guard<std::mutex> lock(l.mutex);
    ++l.ran;
    if (!l.current_skipped) {
      if (!stats.testCaseSuccess) ++l.failed;
      return;
    }
    if (stats.numAssertsCurrentTest > 0 || !stats.testCaseSuccess) {
      // The case checked something and then skipped: count it as the failure it hides.
      ++l.failed;
      ++l.skipped_after_assertions;
      std::printf("ganengine tests: ERROR: '%s' skipped (%s) after %d assertion(s) had run: a skip must come first\n",
                  name_.c_str(), l.current_reason.c_str(), stats.numAssertsCurrentTest);
      return;
    }
    ++l.skipped;
    ++l.by_reason[l.current_reason];
  }
  void test_case_exception(const doctest::TestCaseException& /*e*/) override {}
  void subcase_start(const doctest::SubcaseSignature& /*s*/) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData& /*a*/) override {}
  void log_message(const doctest::MessageData& /*m*/) override {}
  void test_case_skipped(const doctest::TestCaseData& /*tc*/) override {}

 private:
  std::string name_;
};

}  // namespace

void skip_current_case(const std::string& reason) {
  std::printf("test skipped: %s\n", reason.c_str());
  std::fflush(stdout);
  std::lock_guard<std::mutex> lock(ledger().mutex);
  ledger().current_skipped = true;
  ledger().current_reason = reason;
}

int finish_run(int doctest_status) {
  const SkipLedger& l = ledger();
  std::printf("ganengine tests: %d ran, %d passed, %d failed, %d skipped\n", l.ran, l.ran - l.failed - l.skipped,
              l.failed, l.skipped);
  for (const auto& [reason, count] : l.by_reason)
    std::printf("ganengine tests: skipped %d: %s\n", count, reason.c_str());
  if (doctest_status != 0 || l.failed > 0) return 1;
  if (l.ran == 1 && l.skipped == 1) return kSkipExitCode;
  return 0;
}

}  // namespace ge::test

DOCTEST_REGISTER_LISTENER("ganengine-skips", 1, ge::test::SkipListener);
