// The end-of-run summary: the DPI rule line names what it counts.
#include "control/app/summary.h"

#include <gtest/gtest.h>

#include <string>

namespace dpu::ctl {
namespace {

SummaryInput dpiInput(uint64_t loaded, uint64_t unsupported,
                      std::vector<dp::DpiRuleCounters> rules) {
  SummaryInput in;
  in.title = "test";
  in.dpi_enabled = true;
  in.dpi_accepted = loaded;
  in.dpi_unsupported = unsupported;
  in.dpi_rules = std::move(rules);
  return in;
}

std::string dpiLine(const std::string& text) {
  size_t at = text.find("dpi rules:");
  if (at == std::string::npos) return "";
  return text.substr(at, text.find('\n', at) - at);
}

TEST(Summary, DpiRuleLineCountsLoadedAndMatchedRules) {
  // Two rules loaded, none matched: not "2 matched".
  std::string none = formatSummary(dpiInput(2, 0, {{"a", 0, 0}, {"b", 0, 0}}));
  EXPECT_EQ(dpiLine(none), "dpi rules: 2 loaded, 0 matched; 0 unsupported (not loaded)");
  EXPECT_EQ(none.find("  a "), std::string::npos);
  // Three loaded, two matched (5 and 1 times), one unsupported; matching rules are listed.
  std::string some = formatSummary(dpiInput(3, 1, {{"a", 5, 1}, {"b", 0, 0}, {"c", 1, 2}}));
  EXPECT_EQ(dpiLine(some), "dpi rules: 3 loaded, 2 matched; 1 unsupported (not loaded)");
  EXPECT_NE(some.find("  a "), std::string::npos);
  EXPECT_NE(some.find("  c "), std::string::npos);
  EXPECT_EQ(some.find("  b "), std::string::npos);
  // The JSON summary says the same in its own terms.
  std::string js = summaryJson(dpiInput(3, 1, {{"a", 5, 1}, {"b", 0, 0}, {"c", 1, 2}}));
  EXPECT_NE(js.find("\"dpi_rules\":{\"accepted\":3,\"unsupported\":1,\"matches\":{\"a\":5,\"c\":1}}"),
            std::string::npos)
      << js;
}

TEST(Summary, NoDpiLineWithoutDpi) {
  SummaryInput in;
  EXPECT_EQ(dpiLine(formatSummary(in)), "");
}

}  // namespace
}  // namespace dpu::ctl
