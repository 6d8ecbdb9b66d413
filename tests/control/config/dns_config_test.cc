// The dns section of a config document into the model (DNS filtering): defaults, enums,
// addresses and ports with field paths, list files made absolute and stamped, and the whole
// document through compileSnapshot (errors with the list file's line).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "control/config/config_loader.h"
#include "rules/compiled/snapshot.h"

namespace dpu::ctl {
namespace {

std::string allErrors(const rules::ConfigErrorList& errs) {
  std::string s;
  for (const auto& e : errs) s += rules::formatError(e) + "\n";
  return s;
}

TEST(DnsConfig, DefaultsAndValues) {
  auto cfg = parseConfig(R"({"dns": {"lists": [
      {"name": "a", "names": ["x.example"]},
      {"name": "s", "action": "DNS_SINKHOLE", "format": "DNS_FORMAT_HOSTS",
       "names": ["0.0.0.0 y.example"], "sinkhole_v4": ["192.0.2.1"], "sinkhole_v6": ["2001:db8::1"],
       "ttl": 60, "skip_bad_lines": true, "match_subdomains": true}],
      "extra_ports": [5353], "malformed": "DROP", "disable_cname_cloaking": true}})",
                         ConfigFormat::kJson, "t.json");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  auto m = toModel(*cfg);
  ASSERT_TRUE(m.ok()) << m.status();
  const rules::DnsModel& d = m->dns;
  ASSERT_EQ(d.lists.size(), 2u);
  EXPECT_EQ(d.lists[0].action, rules::DnsAction::kNxdomain);
  EXPECT_EQ(d.lists[0].format, rules::DnsListFormat::kAuto);
  EXPECT_EQ(d.lists[0].ttl, 300u);
  EXPECT_EQ(d.lists[0].bad_lines, rules::DnsBadLines::kReject);
  EXPECT_EQ(d.lists[1].action, rules::DnsAction::kSinkhole);
  EXPECT_EQ(d.lists[1].format, rules::DnsListFormat::kHosts);
  EXPECT_EQ(d.lists[1].ttl, 60u);
  EXPECT_EQ(d.lists[1].bad_lines, rules::DnsBadLines::kSkip);
  EXPECT_EQ(d.lists[1].plain_match, rules::DnsMatch::kSubtree);
  ASSERT_EQ(d.lists[1].sinkhole_v4.size(), 1u);
  EXPECT_EQ(d.lists[1].sinkhole_v4[0][3], 1);
  EXPECT_EQ(d.lists[1].sinkhole_v6[0][15], 1);
  EXPECT_EQ(d.extra_ports, std::vector<uint16_t>{5353});
  EXPECT_EQ(d.malformed, rules::Policy::kDrop);
  EXPECT_EQ(d.nonstandard, rules::Policy::kDrop);  // unset: the malformed policy
  EXPECT_FALSE(d.cname_cloaking);
  auto snap = rules::compileSnapshot(*m, 1);
  ASSERT_TRUE(snap.ok()) << snap.status();
  ASSERT_NE((*snap)->dns, nullptr);
  EXPECT_TRUE((*snap)->dns->lookupName("a.y.example").blocked());
  // No dns section: no compiled DNS.
  auto empty = toModel(*parseConfig("{}", ConfigFormat::kJson, "e.json"));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*rules::compileSnapshot(*empty, 1))->dns, nullptr);
}

// dns.nonstandard: unset follows dns.malformed; set, it is its own policy.
TEST(DnsConfig, NonstandardPolicyDefaultsToMalformed) {
  struct Case { const char* json; rules::Policy malformed, nonstandard; };
  for (const Case& c : {
           Case{R"({"dns": {"lists": [{"name": "a", "names": ["x.example"]}]}})",
                rules::Policy::kForward, rules::Policy::kForward},
           Case{R"({"dns": {"lists": [{"name": "a", "names": ["x.example"]}], "malformed": "DROP"}})",
                rules::Policy::kDrop, rules::Policy::kDrop},
           Case{R"({"dns": {"lists": [{"name": "a", "names": ["x.example"]}], "malformed": "DROP",
                "nonstandard": "FORWARD"}})",
                rules::Policy::kDrop, rules::Policy::kForward},
           Case{R"({"dns": {"lists": [{"name": "a", "names": ["x.example"]}], "nonstandard": "DROP"}})",
                rules::Policy::kForward, rules::Policy::kDrop}}) {
    auto cfg = parseConfig(c.json, ConfigFormat::kJson, "t.json");
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    auto m = toModel(*cfg);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->dns.malformed, c.malformed) << c.json;
    EXPECT_EQ(m->dns.nonstandard, c.nonstandard) << c.json;
    auto snap = rules::compileSnapshot(*m, 1);
    ASSERT_TRUE(snap.ok()) << snap.status();
    EXPECT_EQ((*snap)->dns->nonstandard, c.nonstandard) << c.json;
  }
}

// dns.tcp_midstream: unset follows dns.malformed; set, it is its own policy; it reaches the
// compiled DNS the worker reads.
TEST(DnsConfig, TcpMidstreamPolicyDefaultsToMalformed) {
  struct Case { const char* json; rules::Policy midstream; };
  for (const Case& c : {
           Case{R"({"dns": {"lists": [{"name": "a", "names": ["x.example"]}]}})", rules::Policy::kForward},
           Case{R"({"dns": {"lists": [{"name": "a", "names": ["x.example"]}], "malformed": "DROP"}})",
                rules::Policy::kDrop},
           Case{R"({"dns": {"lists": [{"name": "a", "names": ["x.example"]}], "malformed": "DROP",
                "tcp_midstream": "FORWARD"}})", rules::Policy::kForward},
           Case{R"({"dns": {"lists": [{"name": "a", "names": ["x.example"]}], "tcp_midstream": "DROP"}})",
                rules::Policy::kDrop}}) {
    auto cfg = parseConfig(c.json, ConfigFormat::kJson, "t.json");
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    auto m = toModel(*cfg);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->dns.tcp_midstream, c.midstream) << c.json;
    auto snap = rules::compileSnapshot(*m, 1);
    ASSERT_TRUE(snap.ok()) << snap.status();
    EXPECT_EQ((*snap)->dns->tcp_midstream, c.midstream) << c.json;
  }
}

TEST(DnsConfig, FieldErrors) {
  auto cfg = parseConfig(R"({"dns": {"lists": [
      {"name": "s", "action": "DNS_SINKHOLE", "names": ["x.example"],
       "sinkhole_v4": ["300.1.1.1"], "sinkhole_v6": ["not-v6"], "ttl": 9999999}],
      "extra_ports": [70000, 53]}})",
                         ConfigFormat::kJson, "t.json");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  rules::ConfigErrorList errs;
  auto m = toModel(*cfg, &errs);
  ASSERT_FALSE(m.ok());
  std::string all = allErrors(errs);
  EXPECT_NE(all.find("dns.lists[0].sinkhole_v4[0]"), std::string::npos) << all;
  EXPECT_NE(all.find("dns.lists[0].sinkhole_v6[0]"), std::string::npos) << all;
  EXPECT_NE(all.find("dns.extra_ports[0]"), std::string::npos) << all;
}

TEST(DnsConfig, FilesRelativeToTheConfigAndBadLines) {
  char tmpl[] = "/tmp/dns_config.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  std::ofstream(dir + "/list.txt") << "ok.example\nbad..example\n";
  std::ofstream(dir + "/config.json")
      << R"({"dns": {"lists": [{"name": "f", "format": "DNS_FORMAT_PLAIN", "files": ["list.txt"]}]}})";
  auto cfg = loadConfigFile(dir + "/config.json");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->dns().lists(0).files(0), dir + "/list.txt");
  auto m = toModel(*cfg);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->dns.lists[0].file_stamps.size(), 1u);
  EXPECT_NE(m->dns.lists[0].file_stamps[0], 0u);
  rules::ConfigErrorList errs;
  auto snap = rules::compileSnapshot(*m, 1, &errs);
  ASSERT_FALSE(snap.ok());
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].file, dir + "/list.txt");
  EXPECT_EQ(errs[0].line, 2);
  EXPECT_EQ(errs[0].rule, "f");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dpu::ctl
