// dpuctl's offline pieces: `config set` assignments, config diffs, error details, hex.
#include "control/cli/cli_format.h"

#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "control/api/appliance_service.h"

namespace dpu::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::ApplianceConfig parse(const std::string& json) {
  v1::ApplianceConfig c;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &c).ok()) << json;
  return c;
}

TEST(ConfigSet, BuildsDocumentAndMask) {
  google::protobuf::FieldMask mask;
  auto c = configFromAssignments({"dataplane.non_ip=DROP", "dataplane.timeouts.udp_s=30",
                                  "dataplane.flow_table.when_full=\"FORWARD\""},
                                 &mask);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dataplane().non_ip(), v1::DROP);
  EXPECT_EQ(c->dataplane().timeouts().udp_s(), 30u);
  EXPECT_EQ(c->dataplane().flow_table().when_full(), v1::FORWARD);
  EXPECT_THAT(mask.paths(), ::testing::ElementsAre("dataplane.non_ip", "dataplane.timeouts.udp_s",
                                                   "dataplane.flow_table.when_full"));
}

TEST(ConfigSet, EmptyValueClearsAndObjectsWork) {
  google::protobuf::FieldMask mask;
  auto c = configFromAssignments({"dataplane.tcp.midstream=", "dataplane.timeouts={\"icmp_s\":5}"},
                                 &mask);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dataplane().tcp().midstream(), v1::POLICY_DEFAULT);
  EXPECT_EQ(c->dataplane().timeouts().icmp_s(), 5u);
  EXPECT_EQ(mask.paths_size(), 2);
}

TEST(ConfigSet, RejectsBadArguments) {
  google::protobuf::FieldMask mask;
  auto c = configFromAssignments({"dataplane.non_ip"}, &mask);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("PATH=VALUE"));
  c = configFromAssignments({"dataplane.nope=1"}, &mask);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("'dataplane.nope'"));
  c = configFromAssignments({"version=3"}, &mask);
  EXPECT_FALSE(c.ok());
  c = configFromAssignments({"dataplane.timeouts={}", "dataplane.timeouts.udp_s=1"}, &mask);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("overlap"));
  c = configFromAssignments({"dataplane.non_ip=MAYBE"}, &mask);
  EXPECT_FALSE(c.ok());
  c = configFromAssignments({"dataplane.timeouts.udp_s=abc"}, &mask);
  EXPECT_FALSE(c.ok());
  c = configFromAssignments({}, &mask);
  EXPECT_FALSE(c.ok());
}

TEST(ConfigDiff, ListsChangedAddedRemovedLeaves) {
  auto a = parse(R"({"version":"7","dataplane":{"non_ip":"DROP","timeouts":{"udp_s":30}}})");
  auto b = parse(R"({"dataplane":{"non_ip":"FORWARD","tcp":{"midstream":"DROP"}}})");
  auto d = diffConfigs(a, b);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->size(), 3u);
  EXPECT_EQ((*d)[0].path, "dataplane.non_ip");
  EXPECT_EQ((*d)[0].kind, DiffLine::kChanged);
  EXPECT_EQ((*d)[0].committed, "\"DROP\"");
  EXPECT_EQ((*d)[0].proposed, "\"FORWARD\"");
  EXPECT_EQ((*d)[1].path, "dataplane.tcp.midstream");
  EXPECT_EQ((*d)[1].kind, DiffLine::kAdded);
  EXPECT_EQ((*d)[2].path, "dataplane.timeouts.udp_s");
  EXPECT_EQ((*d)[2].kind, DiffLine::kRemoved);
  EXPECT_EQ((*d)[2].committed, "30");
  std::string text = formatDiff(*d);
  EXPECT_THAT(text, HasSubstr("~ dataplane.non_ip: \"DROP\" -> \"FORWARD\""));
  // Versions are not content.
  auto same = diffConfigs(a, parse(R"({"version":"9","dataplane":{"non_ip":"DROP",
                                       "timeouts":{"udp_s":30}}})"));
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(same->empty());
}

// An empty section on one side that the other side fills is an addition (or removal) of
// what fills it, not a line "- firewall: {}   (file: default)" of its own.
TEST(ConfigDiff, EmptySectionFilledByTheOtherSideIsNoLine) {
  auto a = parse(R"({"firewall":{},"dataplane":{"timeouts":{}}})");
  auto b = parse(R"({"firewall":{"rules":[{"id":"ssh","action":"DENY"}]},
                     "dataplane":{"timeouts":{"udp_s":30}}})");
  auto d = diffConfigs(a, b);
  ASSERT_TRUE(d.ok()) << d.status();
  std::string text = formatDiff(*d);
  EXPECT_THAT(text, Not(HasSubstr("firewall: {}")));
  EXPECT_THAT(text, Not(HasSubstr("dataplane.timeouts: {}")));
  EXPECT_THAT(text, HasSubstr("+ firewall.rules[0].id: \"ssh\""));
  EXPECT_THAT(text, HasSubstr("+ dataplane.timeouts.udp_s: 30"));
  for (const auto& l : *d) EXPECT_EQ(l.kind, DiffLine::kAdded) << l.path;
  // The other way round: the rules are removed, the now empty section is no line either.
  auto back = diffConfigs(b, a);
  ASSERT_TRUE(back.ok());
  for (const auto& l : *back) {
    EXPECT_EQ(l.kind, DiffLine::kRemoved) << l.path;
    EXPECT_NE(l.committed, "{}") << l.path;
  }
  // An empty section against nothing at all is still a line.
  auto gone = diffConfigs(a, parse(R"({"dataplane":{"timeouts":{}}})"));
  ASSERT_TRUE(gone.ok());
  ASSERT_EQ(gone->size(), 1u);
  EXPECT_EQ((*gone)[0].path, "firewall");
  EXPECT_EQ((*gone)[0].kind, DiffLine::kRemoved);
}

TEST(ErrorDetails, ServerEncodingDecodesOnTheClient) {
  ctl::ApplyError err;
  rules::ConfigError e1;
  e1.section = "dataplane";
  e1.field = "dataplane.timeouts.udp_s";
  e1.reason = "0 is out of range [1, 86400]";
  rules::ConfigError e2 = e1;
  e2.field = "dataplane.fragments.max_fragments";
  e2.file = "rules.txt";
  e2.line = 12;
  err.errors = {e1, e2};
  err.status = rules::errorsToStatus(err.errors);
  grpc::Status st = ctl::applyErrorToGrpc(err);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  auto errs = configErrorsFromStatus(st);
  ASSERT_EQ(errs.size(), 2u);
  EXPECT_EQ(formatConfigError(errs[0]), "dataplane.timeouts.udp_s: 0 is out of range [1, 86400]");
  EXPECT_EQ(formatConfigError(errs[1]),
            "rules.txt:12: dataplane.fragments.max_fragments: 0 is out of range [1, 86400]");
  // Other failures carry no details.
  ctl::ApplyError conflict;
  conflict.status = absl::AbortedError("config version moved");
  grpc::Status c = ctl::applyErrorToGrpc(conflict);
  EXPECT_EQ(c.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_TRUE(configErrorsFromStatus(c).empty());
}

// A DNS error names its list as a list (it said "rule 'ads'" before), on both sides.
TEST(ErrorDetails, DnsErrorsNameTheList) {
  ctl::ApplyError err;
  rules::ConfigError e;
  e.section = "dns";
  e.rule = "ads";
  e.file = "ads.txt";
  e.line = 3;
  e.field = "dns.lists[0].files[0]";
  e.reason = "Adblock rule expected";
  rules::ConfigError f = e;
  f.section = "firewall";
  f.rule = "web";
  err.errors = {e, f};
  err.status = rules::errorsToStatus(err.errors);
  EXPECT_EQ(rules::formatError(e), "ads.txt:3: list 'ads': dns.lists[0].files[0]: Adblock rule expected");
  EXPECT_EQ(rules::formatError(f), "ads.txt:3: rule 'web': dns.lists[0].files[0]: Adblock rule expected");
  auto errs = configErrorsFromStatus(ctl::applyErrorToGrpc(err));
  ASSERT_EQ(errs.size(), 2u);
  EXPECT_EQ(formatConfigError(errs[0]), rules::formatError(e));
  EXPECT_EQ(formatConfigError(errs[1]), rules::formatError(f));
}

TEST(Hex, ParsesSeparatedBytes) {
  EXPECT_EQ(*parseHex("0x0a0B"), std::string("\x0a\x0b", 2));
  EXPECT_EQ(*parseHex("de:ad be-ef"), std::string("\xde\xad\xbe\xef", 4));
  EXPECT_FALSE(parseHex("abc").ok());
  EXPECT_FALSE(parseHex("zz").ok());
  EXPECT_FALSE(parseHex("").ok());
}

}  // namespace
}  // namespace dpu::cli

// --- dpi --- `dpuctl stats` shows the DPI counters, the rule counts and the rules that
// matched; `dpuctl events` shows an alert's tags.
namespace dpu::cli {
namespace {

TEST(DpiFormat, StatsAndEvents) {
  v1::Stats s;
  s.mutable_total()->mutable_dpi()->set_bytes_scanned(1234);
  s.mutable_total()->mutable_dpi()->set_resets(2);
  s.mutable_dpi()->set_rules_accepted(10);
  s.mutable_dpi()->set_rules_unsupported(3);
  auto* r = s.mutable_dpi()->add_rules();
  r->set_id("local:evil");
  r->set_action("reset");
  r->set_matches(2);
  std::string o = formatStats(s, nullptr);
  EXPECT_NE(o.find("bytes scanned 1234"), std::string::npos) << o;
  EXPECT_NE(o.find("reset 2"), std::string::npos) << o;
  EXPECT_NE(o.find("rules: 10 matched, 3 unsupported"), std::string::npos) << o;
  EXPECT_NE(o.find("rule local:evil"), std::string::npos) << o;
  EXPECT_EQ(formatStats(v1::Stats(), nullptr).find("\ndpi\n"), std::string::npos) << "no dpi block when DPI is off";
  v1::Event e;
  e.set_type("alert");
  e.add_tags("c2");
  e.add_tags("exfil");
  EXPECT_NE(formatEvent(e).find("tags c2,exfil"), std::string::npos);
}

// `dpuctl stats`: the signature engine's counters, when it inspected anything.
TEST(SignatureFormat, StatsShowTheEngineCounters) {
  v1::Stats s;
  v1::SignatureCounters* g = s.mutable_total()->mutable_signatures();
  g->set_inspected(120);
  g->set_candidates(14);
  g->set_matches(5);
  g->set_alerts(3);
  g->set_rejects(2);
  std::string o = formatStats(s, nullptr);
  EXPECT_NE(o.find("signatures\n  inspected 120   candidates 14   matched 5   acted on: alert 3"),
            std::string::npos)
      << o;
  EXPECT_NE(o.find("reject 2"), std::string::npos) << o;
  EXPECT_EQ(o.find("pcre undecided"), std::string::npos) << "no second line when all are 0";
  g->set_hits_dropped(7);
  o = formatStats(s, nullptr);
  EXPECT_NE(o.find("hits dropped 7"), std::string::npos) << o;
  EXPECT_EQ(formatStats(v1::Stats(), nullptr).find("\nsignatures\n"), std::string::npos);
}

// `dpuctl stats`: the normalization counters (fragments reassembled, TCP streams), shown
// when there is something to show.
// --- http --- explain's HTTP matches: the rule, the transaction, the file.
TEST(ExplainFormat, HttpMatchesNameTransactionAndFile) {
  v1::ExplainResponse r;
  r.set_verdict("drop");
  auto* m = r.add_http_matches();
  m->set_rule("f:pe");
  m->set_action("drop");
  m->set_method("GET");
  m->set_host("dl.test");
  m->set_url("/a.exe");
  m->set_status(200);
  m->set_tx_id(1);
  m->set_filename("a.exe");
  m->set_direction("response");
  m->set_offset_from(0);
  m->set_offset_to(512);
  m->set_size(512);
  m->set_state("closed");
  m->set_sha256("ab12");
  const std::string o = formatExplain(r);
  EXPECT_NE(o.find("http files\n  rule f:pe (drop)\n"), std::string::npos) << o;
  EXPECT_NE(o.find("transaction 1: GET dl.test/a.exe -> 200"), std::string::npos) << o;
  EXPECT_NE(o.find("file 'a.exe' (response body): bytes 0..512 of it in this packet, closed, size 512, sha256 ab12"),
            std::string::npos) << o;
}

TEST(StatsFormat, NormalizationCounters) {
  v1::Stats s;
  v1::ReassemblyCounters* r = s.mutable_total()->mutable_reassembly();
  r->set_reassembled(12);
  r->set_overlap_different(2);
  r->set_no_buffer(5);
  r->set_fail_closed(5);
  (*s.mutable_total()->mutable_tcp_stream())["segments"] = 100;
  (*s.mutable_total()->mutable_tcp_stream())["bad_checksum"] = 3;
  const std::string o = formatStats(s, nullptr);
  EXPECT_NE(o.find("reassembly\n  datagrams 12"), std::string::npos) << o;
  EXPECT_NE(o.find("different 2"), std::string::npos) << o;
  EXPECT_NE(o.find("no buffer 5"), std::string::npos) << o;
  EXPECT_NE(o.find("fail closed 5"), std::string::npos) << o;
  EXPECT_NE(o.find("tcp stream\n  bad_checksum 3 segments 100"), std::string::npos) << o;
  const std::string none = formatStats(v1::Stats(), nullptr);
  EXPECT_EQ(none.find("reassembly"), std::string::npos) << none;
  EXPECT_EQ(none.find("tcp stream"), std::string::npos) << none;
}

}  // namespace
}  // namespace dpu::cli

// `dpuctl stats --watch` after the first sample: rates, and only the counters that changed.
namespace dpu::cli {
namespace {

TEST(StatsWatch, ShowsRatesAndOnlyChangedCounters) {
  v1::Stats a;
  a.set_timestamp_unix_ns(1'000'000'000);
  a.set_config_version(3);
  auto* pa = a.add_ports();
  pa->set_side("A");
  pa->set_name("net_pcap0");
  pa->set_rx_packets(1000);
  pa->set_rx_bytes(64000);
  a.mutable_total()->set_forwarded(900);
  a.mutable_total()->set_dropped(100);
  (*a.mutable_total()->mutable_drops())["firewall_deny"] = 100;
  (*a.mutable_total()->mutable_drops())["dns_block"] = 5;
  a.mutable_total()->set_flows_active(10);
  a.mutable_total()->set_flows_created(10);
  v1::Stats b = a;
  b.set_timestamp_unix_ns(3'000'000'000);  // 2 s later
  b.mutable_ports(0)->set_rx_packets(3000);
  b.mutable_ports(0)->set_rx_bytes(64000 + 2000 * 64);
  b.mutable_total()->set_forwarded(2700);
  b.mutable_total()->set_dropped(300);
  (*b.mutable_total()->mutable_drops())["firewall_deny"] = 300;
  b.mutable_total()->set_flows_active(12);
  b.mutable_total()->set_flows_created(14);
  std::string o = formatStatsChanges(b, a);
  EXPECT_NE(o.find("+2.00 s"), std::string::npos) << o;
  EXPECT_NE(o.find("rx 1.0 k/s 512.0 kbit/s"), std::string::npos) << o;  // 2000 pkts, 128000 B in 2 s
  EXPECT_NE(o.find("forwarded 900 /s"), std::string::npos) << o;
  EXPECT_NE(o.find("dropped 100 /s"), std::string::npos) << o;
  EXPECT_NE(o.find("new flows 2 /s"), std::string::npos) << o;
  EXPECT_NE(o.find("drops[firewall_deny]"), std::string::npos) << o;
  EXPECT_NE(o.find("+200  (100 /s)"), std::string::npos) << o;
  EXPECT_NE(o.find("flows_active"), std::string::npos) << o;
  EXPECT_NE(o.find("+2"), std::string::npos) << o;
  // unchanged counters are not printed
  EXPECT_EQ(o.find("dns_block"), std::string::npos) << o;
  EXPECT_EQ(o.find("config_version"), std::string::npos) << o;
  // nothing changed: said so
  std::string same = formatStatsChanges(a, a);
  EXPECT_NE(same.find("(no counter changed)"), std::string::npos) << same;
}

}  // namespace
}  // namespace dpu::cli
