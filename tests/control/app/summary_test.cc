// The end-of-run summary: the headline (what was blocked, by which rule, why), the per-rule
// reports both replay and run fill from the dataplane (fillStageReports), and the numbers
// of the details (latency quantiles never above the max).
#include "control/app/summary.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "tests/util/snapshot_plane.h"

namespace dpu::ctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A dataplane that answers the per-rule counter calls with what the test set.
class FakePlane : public test::SnapshotPlane {
 public:
  std::vector<dp::RuleCounters> ruleCounters() const override { return fw; }
  std::vector<dp::DnsListCounters> dnsLists() const override { return dns; }
  std::vector<dp::LbBackendStats> lbBackendStats() const override { return lb; }
  std::vector<dp::DpiRuleCounters> dpiRuleCounters() const override { return dpi; }

  std::vector<dp::RuleCounters> fw;
  std::vector<dp::DnsListCounters> dns;
  std::vector<dp::LbBackendStats> lb;
  std::vector<dp::DpiRuleCounters> dpi;
};

// A snapshot with two firewall rules, one DNS list (counters come from the plane), two
// YARA rules and a service with three backends, and the plane's counters for them.
struct Demo {
  FakePlane plane;
  rules::Snapshot snap;
  Demo() {
    auto fw = std::make_shared<rules::CompiledFirewall>();
    fw->rules.push_back({"ssh-block", rules::FwAction::kDeny, 10, "no SSH into the server network"});
    fw->rules.push_back({"telnet-reject", rules::FwAction::kReject, 20, ""});
    fw->rules.push_back({"web-allow", rules::FwAction::kAllow, 30, "web is fine"});
    snap.firewall = fw;
    plane.fw = {{"ssh-block", 3, 180, 1, 0}, {"telnet-reject", 1, 60, 1, 0}, {"web-allow", 9, 900, 2, 0}};
    auto dpi = std::make_shared<rules::CompiledDpi>();
    dpi->rules.resize(2);
    dpi->rules[0].source = "demo.yar";
    dpi->rules[0].name = "EICAR_test_file";
    dpi->rules[0].action = rules::DpiAction::kReset;
    dpi->rules[1].source = "demo.yar";
    dpi->rules[1].name = "sqlmap_scanner";
    dpi->rules[1].action = rules::DpiAction::kAlert;
    snap.dpi = dpi;
    plane.dpi = {{"demo.yar:EICAR_test_file", 1, 0}, {"demo.yar:sqlmap_scanner", 0, 0}};
    auto lb = std::make_shared<rules::CompiledLb>();
    auto svc = std::make_shared<rules::CompiledLbService>();
    svc->model.id = "web";
    for (int i = 0; i < 3; ++i) {
      rules::CompiledLbBackend b;
      b.id = "web-" + std::to_string(i + 1);
      b.identity = 100 + i;
      svc->backends.push_back(b);
    }
    lb->services.push_back(svc);
    snap.lb = lb;
    plane.lb = {{100, 10, 1000, 0, 3}, {102, 8, 800, 1, 5}};  // web-2: no flow
    plane.dns = {{"malware", "nxdomain", 1, 0, 0.1, false, 2, 0}};
  }
};

TEST(Summary, FillStageReportsTakesEveryRuleListAndBackendFromThePlane) {
  Demo d;
  SummaryInput in;
  fillStageReports(d.plane, d.snap, in);
  ASSERT_EQ(in.fw_rules.size(), 3u);
  ASSERT_EQ(in.fw_rule_notes.size(), 3u);
  EXPECT_EQ(in.fw_rule_notes[0].action, "deny");
  EXPECT_EQ(in.fw_rule_notes[0].description, "no SSH into the server network");
  EXPECT_EQ(in.fw_rule_notes[1].action, "reject");
  ASSERT_EQ(in.dns_lists.size(), 1u);
  EXPECT_EQ(in.dns_lists[0].name, "malware");
  EXPECT_TRUE(in.dpi_enabled);
  EXPECT_EQ(in.dpi_accepted, 2u);
  ASSERT_EQ(in.dpi_rule_actions.size(), 2u);
  EXPECT_EQ(in.dpi_rule_actions[0], "reset");
  EXPECT_EQ(in.dpi_rule_actions[1], "alert");
  ASSERT_EQ(in.lb_backends.size(), 3u);
  EXPECT_EQ(in.lb_backends[0].backend, "web-1");
  EXPECT_EQ(in.lb_backends[0].flows, 3u);
  EXPECT_EQ(in.lb_backends[1].flows, 0u);
  EXPECT_EQ(in.lb_backends[2].flows, 5u);
}

// Issue 30: the summary says when a rule set cannot see files: HTTP parsing turned off
// (dpi.http.enabled false), or a rule set scoped to the raw stream; nothing when every rule
// set sees them.
TEST(Summary, SaysWhenARuleSetCannotSeeFiles) {
  Demo d;
  auto warned = [&](const char* what) {
    SummaryInput in;
    fillStageReports(d.plane, d.snap, in);
    std::string all;
    for (const std::string& w : in.warnings) all += w + "\n";
    return all.find(what) != std::string::npos;
  };
  d.snap.dpi_settings.http.enabled = true;
  EXPECT_FALSE(warned("http parsing off"));
  EXPECT_FALSE(warned("raw stream only"));
  d.snap.dpi_settings.scopes = {{"demo.yar", rules::DpiInspect::kStream}};
  EXPECT_TRUE(warned("rule set 'demo.yar' inspects the raw stream only"));
  d.snap.dpi_settings.scopes = {{"demo.yar", rules::DpiInspect::kBoth}};
  EXPECT_FALSE(warned("raw stream only"));
  d.snap.dpi_settings.http.enabled = false;
  EXPECT_TRUE(warned("http parsing off (dpi.http.enabled false)"));
}

TEST(Summary, HeadlineSaysWhatWasBlockedByWhichRuleAndWhyBeforeTheDetails) {
  Demo d;
  SummaryInput in;
  in.title = "t";
  auto& t = in.counters.total;
  t.rx_packets[0] = 60;
  t.verdicts[static_cast<int>(dp::Verdict::kForward)] = 52;
  t.verdicts[static_cast<int>(dp::Verdict::kDrop)] = 6;
  t.verdicts[static_cast<int>(dp::Verdict::kReject)] = 2;
  t.fw_denied = 3;
  t.fw_rejected = 1;
  t.dns[dp::kDnsQueries] = 3;
  t.dns[dp::kDnsBlocked] = 1;
  t.dns[dp::kDnsAnswersSent] = 1;
  t.drops[static_cast<int>(dp::DropReason::kFragOverlap)] = 1;
  fillStageReports(d.plane, d.snap, in);
  dp::Event e{};
  e.type = dp::EventType::kDns;
  std::strcpy(e.dns_name, "update.malware.example");
  std::strcpy(e.dns_list, "malware");
  e.dns_action = static_cast<uint8_t>(rules::DnsAction::kNxdomain);
  noteDnsBlock(e, in);
  noteDnsBlock(e, in);
  dp::Event other = e;
  other.type = dp::EventType::kDrop;  // not a DNS block: ignored
  noteDnsBlock(other, in);
  std::string s = formatSummary(in);
  size_t details = s.find("\ndetails\n");
  ASSERT_NE(details, std::string::npos) << s;
  std::string head = s.substr(0, details);
  EXPECT_THAT(head, HasSubstr("what happened: 60 packets in, 52 forwarded, 6 dropped, 2 rejected\n"));
  EXPECT_THAT(head, HasSubstr("  firewall  denied 1 flow (3 packets) by rule ssh-block: "
                              "\"no SSH into the server network\"\n"));
  EXPECT_THAT(head, HasSubstr("  firewall  rejected 1 flow (1 packet) by rule telnet-reject "
                              "(answered: TCP reset / ICMP unreachable)\n"));
  EXPECT_THAT(head, Not(HasSubstr("web-allow")));  // allowed traffic is no headline
  EXPECT_THAT(head, Not(HasSubstr("default policy")));  // every denial has its rule
  EXPECT_THAT(head, HasSubstr("  dns       blocked update.malware.example (2 queries): list "
                              "malware, answered NXDOMAIN\n"));
  EXPECT_THAT(head, HasSubstr("  dpi       2 YARA rules loaded, 1 matched"));
  EXPECT_THAT(head, HasSubstr("  dpi       rule demo.yar:EICAR_test_file matched 1 time: reset, "
                              "flow reset (TCP RST both ways)\n"));
  EXPECT_THAT(head, Not(HasSubstr("sqlmap_scanner")));  // did not match
  EXPECT_THAT(head, HasSubstr("  lb        service web: 8 flows over its backends: web-1 3, "
                              "web-2 0, web-3 5\n"));
  EXPECT_THAT(head, HasSubstr("  other     dropped 1 packet: fragment_overlap 1\n"));
  // The details follow: the counters are all still there.
  EXPECT_THAT(s.substr(details), HasSubstr("drops by reason"));
  EXPECT_THAT(s.substr(details), HasSubstr("ssh-block"));
}

// Without the names (a live run), the lists that blocked are the headline; the DNS table
// of the details has its rows (run printed the header alone: it never asked for the lists).
TEST(Summary, LiveHeadlineNamesTheListsAndTheDnsTableHasRows) {
  Demo d;
  SummaryInput in;
  in.counters.total.dns[dp::kDnsQueries] = 3;
  in.counters.total.dns[dp::kDnsBlocked] = 2;
  fillStageReports(d.plane, d.snap, in);
  std::string s = formatSummary(in);
  EXPECT_THAT(s, HasSubstr("  dns       list malware blocked 2 queries, answered NXDOMAIN\n"));
  EXPECT_THAT(s, HasSubstr("\n  malware "));  // the row of the per-list table
  // No lists at all: no table header without rows.
  SummaryInput bare;
  bare.counters.total.dns[dp::kDnsQueries] = 3;
  EXPECT_THAT(formatSummary(bare), Not(HasSubstr("names    blocked")));
}

// A capture that blocks thousands of names: the headline names the first ones and counts
// the rest (and collecting them stays cheap).
TEST(Summary, BlockedNamesAreCappedInTheHeadline) {
  SummaryInput in;
  dp::Event e{};
  e.type = dp::EventType::kDns;
  std::strcpy(e.dns_list, "malware");
  e.dns_action = static_cast<uint8_t>(rules::DnsAction::kNxdomain);
  for (int i = 0; i < 1000; ++i) {
    std::snprintf(e.dns_name, sizeof(e.dns_name), "n%d.malware.example", i);
    noteDnsBlock(e, in);
  }
  EXPECT_EQ(in.dns_blocked.size(), SummaryInput::kDnsBlockedNames);
  EXPECT_EQ(in.dns_blocked_other, 1000 - SummaryInput::kDnsBlockedNames);
  std::string s = formatSummary(in);
  EXPECT_THAT(s, HasSubstr("  dns       blocked n0.malware.example (1 query): list malware"));
  EXPECT_THAT(s, HasSubstr("  dns       blocked 990 more queries for other names"));
}

// Cloaked resolver answers count as blocked in the DNS counters, not as blocked queries.
TEST(Summary, DnsHeadlineTellsBlockedQueriesFromCloakedAnswers) {
  SummaryInput in;
  auto& t = in.counters.total;
  t.dns[dp::kDnsQueries] = 10;
  t.dns[dp::kDnsBlocked] = 4;
  t.dns[dp::kDnsCloaked] = 1;
  t.dns[dp::kDnsAnswersSent] = 4;
  EXPECT_THAT(formatSummary(in),
              HasSubstr("  dns       10 queries inspected: 3 blocked, 7 passed on; 4 answers sent "
                        "by the appliance; 1 resolver answer replaced (CNAME to a blocked name)\n"));
}

TEST(Summary, DenialsWithoutARuleAreTheDefaultPolicy) {
  SummaryInput in;
  in.counters.total.fw_denied = 4;
  EXPECT_THAT(formatSummary(in),
              HasSubstr("  firewall  4 packets denied by the default policy (no rule matched)\n"));
}

// The report: "p99.9 114.7 us   max 113.8 us". The slowest packets share a bucket whose
// upper bound is above the max: the quantiles are clamped to it.
TEST(Summary, LatencyQuantilesAreNeverAboveTheMax) {
  SummaryInput in;
  auto& t = in.counters.total;
  t.rx_packets[0] = 1000;
  t.cycles[dp::kCyParse] = 1000000;
  t.tsc_hz = 2000000000;
  t.latency[dp::latencyBucket(2000)] = 990;
  t.latency[dp::latencyBucket(113800)] = 10;
  t.latency_max_ns = 113800;
  ASSERT_GT(dp::latencyBucketLimit(dp::latencyBucket(113800)), 113800u);
  std::string s = formatSummary(in);
  EXPECT_THAT(s, HasSubstr("p99.9 113.8 us   max 113.8 us")) << s;
}

// The DPI detail line names what it counts (issue 21).
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
