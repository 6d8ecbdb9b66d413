#include "control/config/config_loader.h"
#include "control/config/json_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dpu::ctl {
namespace {

absl::StatusOr<rules::ConfigModel> load(const std::string& text,
                                        ConfigFormat f = ConfigFormat::kJson) {
  auto c = parseConfig(text, f, "test.json");
  if (!c.ok()) return c.status();
  return toModel(*c);
}

TEST(ConfigLoader, EmptyObjectMeansDefaults) {
  auto m = load("{}");
  ASSERT_TRUE(m.ok()) << m.status();
  rules::DataplaneSettings d;
  EXPECT_EQ(m->dataplane.flow_capacity, d.flow_capacity);
  EXPECT_EQ(m->dataplane.flow_capacity, 1u << 20);
  EXPECT_EQ(m->dataplane.non_ip, rules::Policy::kForward);
  EXPECT_EQ(m->dataplane.malformed, rules::Policy::kDrop);
  EXPECT_EQ(m->dataplane.frag_overlapping, rules::Policy::kDrop);
  EXPECT_EQ(m->dataplane.tcp_midstream, rules::Policy::kForward);
}

TEST(ConfigLoader, FieldsAreApplied) {
  auto m = load(R"({"dataplane": {"flowTable": {"capacityPerWorker": 65536, "whenFull": "DROP"},
                   "timeouts": {"udpS": 30, "tcpEstablishedS": 600},
                   "nonIp": "DROP", "malformed": "FORWARD",
                   "fragments": {"overlapping": "FORWARD", "timeoutMs": 500},
                   "tcp": {"midstream": "DROP"}}})");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->dataplane.flow_capacity, 65536u);
  EXPECT_EQ(m->dataplane.flow_when_full, rules::Policy::kDrop);
  EXPECT_EQ(m->dataplane.udp_s, 30u);
  EXPECT_EQ(m->dataplane.tcp_established_s, 600u);
  EXPECT_EQ(m->dataplane.tcp_syn_s, 60u);  // untouched default
  EXPECT_EQ(m->dataplane.non_ip, rules::Policy::kDrop);
  EXPECT_EQ(m->dataplane.malformed, rules::Policy::kForward);
  EXPECT_EQ(m->dataplane.frag_overlapping, rules::Policy::kForward);
  EXPECT_EQ(m->dataplane.frag_timeout_ms, 500u);
  EXPECT_EQ(m->dataplane.tcp_midstream, rules::Policy::kDrop);
}

// --- tcp stream --- normalization settings: defaults, values, range and power-of-two errors.
TEST(ConfigLoader, TcpStreamSettings) {
  auto d = load("{}");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->dataplane.tcp_overlap_reset);
  EXPECT_EQ(d->dataplane.tcp_window_bytes, 4096u);
  EXPECT_EQ(d->dataplane.tcp_windows_per_worker, 8192u);
  EXPECT_EQ(d->dataplane.tcp_dns_fail, rules::Policy::kDrop);
  EXPECT_EQ(d->dataplane.tcp_dpi_fail, rules::Policy::kForward);
  EXPECT_TRUE(d->dataplane.tcp_verify_checksum);
  auto m = load(R"({"dataplane": {"tcp": {"overlap": "OVERLAP_RESET", "overlapWindowBytes": 1024,
                   "overlapWindowsPerWorker": 100, "dnsFail": "FORWARD", "dpiFail": "DROP",
                   "skipChecksum": true}}})");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->dataplane.tcp_overlap_reset);
  EXPECT_EQ(m->dataplane.tcp_window_bytes, 1024u);
  EXPECT_EQ(m->dataplane.tcp_windows_per_worker, 100u);
  EXPECT_EQ(m->dataplane.tcp_dns_fail, rules::Policy::kForward);
  EXPECT_EQ(m->dataplane.tcp_dpi_fail, rules::Policy::kDrop);
  EXPECT_FALSE(m->dataplane.tcp_verify_checksum);
  auto p = load(R"({"dataplane": {"tcp": {"overlapWindowBytes": 1000}}})");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("dataplane.tcp.overlap_window_bytes"), std::string::npos)
      << p.status();
  EXPECT_NE(p.status().message().find("power of two"), std::string::npos) << p.status();
  auto r = load(R"({"dataplane": {"tcp": {"overlapWindowsPerWorker": 8}}})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("dataplane.tcp.overlap_windows_per_worker"),
            std::string::npos)
      << r.status();
  // Reorder buffers: on by default; sized; off (segments beyond a hole dropped); range.
  EXPECT_EQ(d->dataplane.tcp_reorder_bytes, 2097152u);
  EXPECT_EQ(d->dataplane.tcp_reorder_buffers_per_worker, 128u);
  auto o = load(R"({"dataplane": {"tcp": {"reorderBytes": 4096, "reorderBuffersPerWorker": 16}}})");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->dataplane.tcp_reorder_bytes, 4096u);
  EXPECT_EQ(o->dataplane.tcp_reorder_buffers_per_worker, 16u);
  auto off = load(R"({"dataplane": {"tcp": {"dropOutOfOrder": true}}})");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(off->dataplane.tcp_reorder_bytes, 0u);
  auto small = load(R"({"dataplane": {"tcp": {"reorderBytes": 100}}})");
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.status().message().find("dataplane.tcp.reorder_bytes"), std::string::npos)
      << small.status();
  // Hold mode: off by default; on with its pool and timeout; not without reorder buffers;
  // ranges named by field.
  EXPECT_FALSE(d->dataplane.tcp_hold_out_of_order);
  EXPECT_EQ(d->dataplane.tcp_hold_packets_per_worker, 1024u);
  EXPECT_EQ(d->dataplane.tcp_hold_timeout_ms, 1000u);
  auto hold = load(R"({"dataplane": {"tcp": {"holdOutOfOrder": true, "holdPacketsPerWorker": 64,
                                             "holdTimeoutMs": 300}}})");
  ASSERT_TRUE(hold.ok()) << hold.status();
  EXPECT_TRUE(hold->dataplane.tcp_hold_out_of_order);
  EXPECT_EQ(hold->dataplane.tcp_hold_packets_per_worker, 64u);
  EXPECT_EQ(hold->dataplane.tcp_hold_timeout_ms, 300u);
  for (const auto& [json, field] : std::vector<std::pair<const char*, const char*>>{
           {R"({"dataplane": {"tcp": {"holdOutOfOrder": true, "dropOutOfOrder": true}}})",
            "dataplane.tcp.hold_out_of_order"},
           {R"({"dataplane": {"tcp": {"holdPacketsPerWorker": 70000}}})",
            "dataplane.tcp.hold_packets_per_worker"},
           {R"({"dataplane": {"tcp": {"holdTimeoutMs": 5}}})", "dataplane.tcp.hold_timeout_ms"}}) {
    auto bad = load(json);
    ASSERT_FALSE(bad.ok()) << json;
    EXPECT_NE(bad.status().message().find(field), std::string::npos) << bad.status();
  }
}

TEST(ConfigLoader, ProtoFieldNamesAreAcceptedToo) {
  auto m = load(R"({"dataplane": {"flow_table": {"capacity_per_worker": 2048}}})");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->dataplane.flow_capacity, 2048u);
}

TEST(ConfigLoader, UnknownFieldIsRejectedByName) {
  auto m = load(R"({"dataplane": {"flowTable": {"capacity": 10}}})");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("capacity"), std::string::npos) << m.status();
  EXPECT_NE(m.status().message().find("test.json"), std::string::npos) << m.status();
}

TEST(ConfigLoader, BadEnumValueIsRejectedByName) {
  auto m = load(R"({"dataplane": {"nonIp": "MAYBE"}})");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("dataplane.non_ip"), std::string::npos) << m.status();
}

TEST(ConfigLoader, WrongTypeIsRejected) {
  auto m = load(R"({"dataplane": {"flowTable": {"capacityPerWorker": "lots"}}})");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("dataplane.flow_table.capacity_per_worker"), std::string::npos) << m.status();
}

TEST(ConfigLoader, OutOfRangeNamesTheFieldPath) {
  auto m = load(R"({"dataplane": {"flowTable": {"capacityPerWorker": 5}}})");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("dataplane.flow_table.capacity_per_worker"),
            std::string::npos)
      << m.status();
  auto t = load(R"({"dataplane": {"fragments": {"maxFragments": 1000}}})");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("dataplane.fragments.max_fragments"), std::string::npos)
      << t.status();
}

TEST(ConfigLoader, MalformedJsonIsRejected) {
  auto m = load(R"({"dataplane": )");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ConfigLoader, TextFormatWithLineNumbers) {
  auto ok = load("dataplane {\n  timeouts { udp_s: 9 }\n}\n", ConfigFormat::kText);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->dataplane.udp_s, 9u);
  auto bad = load("dataplane {\n  timeouts { udp_seconds: 9 }\n}\n", ConfigFormat::kText);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("udp_seconds"), std::string::npos) << bad.status();
}

TEST(ConfigLoader, FormatFollowsExtension) {
  EXPECT_EQ(formatForPath("a.json"), ConfigFormat::kJson);
  EXPECT_EQ(formatForPath("a.txtpb"), ConfigFormat::kText);
  EXPECT_EQ(formatForPath("a.textproto"), ConfigFormat::kText);
}

TEST(ConfigLoader, MissingFileIsNotFound) {
  auto c = loadConfigFile("/nonexistent/dpu.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
}

TEST(ConfigLoader, ShippedExampleConfigIsValid) {
  auto c = loadConfigFile(std::string(DPU_SOURCE_DIR) + "/examples/config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  auto m = toModel(*c);
  EXPECT_TRUE(m.ok()) << m.status();
}

}  // namespace
}  // namespace dpu::ctl

namespace dpu::ctl {
namespace {

TEST(ConfigLoader, EveryBadFieldIsReported) {
  auto c = parseConfig(R"({"dataplane": {"flowTable": {"capacityPerWorker": 5, "agingSlice": 99999},
                          "fragments": {"maxFragments": 1}}})",
                       ConfigFormat::kJson, "t.json");
  ASSERT_TRUE(c.ok());
  rules::ConfigErrorList errors;
  auto m = toModel(*c, &errors);
  ASSERT_FALSE(m.ok());
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0].field, "dataplane.flow_table.capacity_per_worker");
  EXPECT_EQ(errors[1].field, "dataplane.flow_table.aging_slice");
  EXPECT_EQ(errors[2].field, "dataplane.fragments.max_fragments");
  EXPECT_EQ(errors[0].section, "dataplane");
  EXPECT_NE(m.status().message().find("3 errors"), std::string::npos) << m.status();
}

}  // namespace
}  // namespace dpu::ctl

// --- firewall and GeoIP sections, rule files and IP set files --------------------------------

namespace dpu::ctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

#ifndef DPU_MMDB_DIR
#define DPU_MMDB_DIR ""
#endif
const std::string kCountryDb =
    std::string(DPU_MMDB_DIR) + "/maxmind+MaxMind-DB/test-data/GeoLite2-Country-Test.mmdb";
const std::string kAsnDb =
    std::string(DPU_MMDB_DIR) + "/maxmind+MaxMind-DB/test-data/GeoLite2-ASN-Test.mmdb";

class FirewallLoader : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dpu_fw_loader.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::string p = dir_ + "/" + name;
    std::ofstream(p) << text;
    return p;
  }
  // Parses `json` and converts it; the errors (if any) in `errors`.
  absl::StatusOr<rules::ConfigModel> model(const std::string& json, rules::ConfigErrorList* errors,
                                           ModelDetails* details = nullptr) {
    auto c = parseConfig(json, ConfigFormat::kJson, "t.json");
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return c.status();
    return toModel(*c, errors, details);
  }
  std::vector<std::string> fields(const rules::ConfigErrorList& errors) {
    std::vector<std::string> out;
    for (const auto& e : errors) out.push_back(e.field);
    return out;
  }
  std::string dir_;
};

TEST_F(FirewallLoader, NoFirewallSectionMeansNoRulesAndAllowDefaults) {
  rules::ConfigErrorList errors;
  auto m = model("{}", &errors);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->firewall.rules.empty());
  EXPECT_EQ(m->firewall.default_a_to_b, rules::FwAction::kAllow);
  EXPECT_EQ(m->firewall.default_b_to_a, rules::FwAction::kAllow);
  EXPECT_TRUE(m->firewall.reevaluate_on_change);
  EXPECT_TRUE(m->firewall.geoip_database.empty());
}

TEST_F(FirewallLoader, InlineRulesSetsAndDefaultsAreMapped) {
  rules::ConfigErrorList errors;
  ModelDetails details;
  auto m = model(R"({"firewall": {
      "default_a_to_b": "DENY", "default_b_to_a": "REJECT", "keep_established_on_change": true,
      "ip_sets": [{"name": "corp", "prefixes": ["10.0.0.0/8", "2001:db8::/32", "192.0.2.1"]}],
      "rules": [
        {"id": "ssh", "priority": 10, "action": "DENY", "direction": "A_TO_B",
         "protocols": ["tcp"], "src": ["@corp"], "dst": ["198.51.100.0/24", "2001:db8:1::/48"],
         "dst_ports": ["22", "2222-2223"], "vlan": 0, "description": "no ssh"},
        {"id": "web", "action": "ALLOW", "protocols": ["TCP", "17", "sctp"],
         "src_ports": ["any"], "dst_ports": ["443"]}
      ]}})",
                 &errors, &details);
  ASSERT_TRUE(m.ok()) << m.status();
  const rules::FirewallModel& fw = m->firewall;
  EXPECT_EQ(fw.default_a_to_b, rules::FwAction::kDeny);
  EXPECT_EQ(fw.default_b_to_a, rules::FwAction::kReject);
  EXPECT_FALSE(fw.reevaluate_on_change);
  ASSERT_EQ(fw.rules.size(), 2u);
  const rules::FirewallRule& ssh = fw.rules[0];
  EXPECT_EQ(ssh.id, "ssh");
  EXPECT_EQ(ssh.priority, 10);
  EXPECT_EQ(ssh.action, rules::FwAction::kDeny);
  EXPECT_EQ(ssh.direction, rules::FwDirection::kAtoB);
  EXPECT_EQ(ssh.protocols, std::vector<uint8_t>{6});
  ASSERT_EQ(ssh.src.size(), 3u);  // the set, expanded
  EXPECT_EQ(rules::formatPrefix(ssh.src[2]), "192.0.2.1/32");
  EXPECT_EQ(ssh.dst.size(), 2u);
  EXPECT_EQ(ssh.dst_ports.size(), 2u);
  ASSERT_TRUE(ssh.vlan.has_value());
  EXPECT_EQ(*ssh.vlan, 0);
  EXPECT_EQ(ssh.description, "no ssh");
  EXPECT_TRUE(ssh.file.empty());
  EXPECT_EQ(fw.rules[1].protocols, (std::vector<uint8_t>{6, 17, 132}));
  EXPECT_TRUE(fw.rules[1].src_ports.empty());
  ASSERT_EQ(details.firewall_rules.size(), 2u);
  EXPECT_EQ(details.firewall_rules[0].src, std::vector<std::string>{"@corp"});
  // The spec round-trips to the same proto rule.
  auto c = parseConfig(R"({"firewall": {"rules": [{"id": "x", "action": "REJECT",
      "direction": "B_TO_A", "protocols": ["udp"], "src": ["10.0.0.0/8"], "dst_ports": ["53"],
      "vlan": 7, "src_countries": ["US"], "description": "d", "priority": -1}]}})",
                       ConfigFormat::kJson, "t.json");
  ASSERT_TRUE(c.ok());
  v1::FirewallRule back = protoFromSpec(specFromProto(c->firewall().rules(0), 0));
  EXPECT_EQ(back.SerializeAsString(), c->firewall().rules(0).SerializeAsString());
}

TEST_F(FirewallLoader, EveryBadFieldIsNamed) {
  rules::ConfigErrorList errors;
  auto m = model(R"({"firewall": {
      "default_b_to_a": 9,
      "ip_sets": [{"name": "corp", "prefixes": ["10.0.0.0/8", "10.0.0.1/8", "@other"]},
                  {"name": "bad name"}, {"name": "empty"}],
      "rules": [
        {"id": "a", "protocols": ["tcp"]},
        {"id": "b", "action": "DENY", "protocols": ["icmp"], "dst_ports": ["22"]},
        {"id": "c", "action": "DENY", "src": ["@nope"], "src_countries": ["US"]},
        {"id": "d", "action": "DENY", "vlan": 4096, "direction": 7},
        {"id": "b", "action": "ALLOW"}
      ]}})",
                 &errors);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(fields(errors),
              ::testing::ElementsAre("firewall.default_b_to_a",
                                     "firewall.ip_sets[0].prefixes[1]",
                                     "firewall.ip_sets[0].prefixes[2]",
                                     "firewall.ip_sets[1].name", "firewall.ip_sets[2]",
                                     "firewall.rules[3].direction", "firewall.rules[4].id",
                                     "firewall.rules[0].action", "firewall.rules[1].dst_ports",
                                     "firewall.rules[2].src"));
  EXPECT_EQ(errors[1].reason, "10.0.0.1/8 has host bits set (did you mean 10.0.0.0/8?)");
  EXPECT_EQ(errors[1].rule, "corp");
  EXPECT_THAT(errors[6].reason, HasSubstr("also used by firewall.rules[1]"));
  EXPECT_THAT(errors[9].reason, HasSubstr("unknown IP set '@nope'"));
  for (const auto& e : errors) {
    EXPECT_TRUE(e.section == "firewall") << e.field;
    EXPECT_THAT(std::string(m.status().message()), HasSubstr(e.field));
  }
  // Countries without a database, and a VLAN out of range, once the rest is fixed.
  errors.clear();
  m = model(R"({"firewall": {"rules": [
      {"id": "c", "action": "DENY", "src_countries": ["US"]},
      {"id": "d", "action": "DENY", "vlan": 4096}]}})",
            &errors);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(fields(errors), ::testing::ElementsAre("firewall.rules[0].src_countries",
                                                     "firewall.rules[1].vlan"));
  EXPECT_THAT(errors[0].reason, HasSubstr("rule 'c' matches countries but no GeoIP database"));
}

TEST_F(FirewallLoader, RuleFilesAreAppendedInOrderWithTheirLines) {
  std::string text = write("a.rules",
                           "# site rules\n"
                           "deny tcp any any -> 192.0.2.0/24 22 prio 10 id ssh-block\n"
                           "allow udp @corp any -> any 53\n");
  std::string json = write("b.json", R"({"rules": [
  {"id": "doca-1", "src_ip": "1.1.1.1", "dst_port": 80, "protocol": "tcp"}
]})");
  std::string set = write("corp.txt", "# corp\n10.0.0.0/8\n\n172.16.0.0/12  # lab\n");
  rules::ConfigErrorList errors;
  ModelDetails details;
  auto m = model(absl::StrCat(R"({"firewall": {
      "ip_sets": [{"name": "corp", "file": ")", set, R"("}],
      "rules": [{"id": "inline", "action": "ALLOW"}],
      "rule_files": [")", text, R"(", ")", json, R"("]}})"),
                 &errors, &details);
  ASSERT_TRUE(m.ok()) << m.status();
  const auto& rs = m->firewall.rules;
  ASSERT_EQ(rs.size(), 4u);
  EXPECT_EQ(rs[0].id, "inline");
  EXPECT_EQ(rs[1].id, "ssh-block");
  EXPECT_EQ(rs[1].file, text);
  EXPECT_EQ(rs[1].line, 2);
  EXPECT_EQ(rs[2].id, "a.rules:3");
  ASSERT_EQ(rs[2].src.size(), 2u);
  EXPECT_EQ(rules::formatPrefix(rs[2].src[1]), "172.16.0.0/12");
  EXPECT_EQ(rs[3].id, "doca-1");
  EXPECT_EQ(rs[3].action, rules::FwAction::kDeny);
  EXPECT_EQ(rs[3].line, 2);
  ASSERT_EQ(details.firewall_rules.size(), 4u);
  EXPECT_EQ(details.firewall_rules[2].file, text);
  EXPECT_EQ(details.firewall_rules[3].syntax, rules::RuleSyntax::kJson);
}

TEST_F(FirewallLoader, ErrorsInFilesNameFileLineAndField) {
  std::string text = write("bad.rules",
                           "deny tcp any any -> any 22 id ok\n"
                           "deny icmp any any -> any 22 id icmp-ports\n"
                           "deny tcp any any -> any 22 id ok\n");
  std::string set = write("bad-set.txt", "10.0.0.0/8\n10.0.0.1/8\n");
  rules::ConfigErrorList errors;
  auto m = model(absl::StrCat(R"({"firewall": {
      "ip_sets": [{"name": "s", "file": ")", set, R"("}],
      "rules": [{"id": "icmp-ports", "action": "DENY"}],
      "rule_files": [")", text, R"(", ")", dir_, R"(/missing.rules"]}})"),
                 &errors);
  ASSERT_FALSE(m.ok());
  std::vector<std::string> got;
  for (const auto& e : errors) got.push_back(rules::formatError(e));
  EXPECT_THAT(got, ::testing::ElementsAre(
                       set + ":2: rule 's': prefix: 10.0.0.1/8 has host bits set (did you mean "
                             "10.0.0.0/8?)",
                       dir_ + "/missing.rules: firewall.rule_files[1]: cannot open: No such file "
                              "or directory",
                       text + ":2: rule 'icmp-ports': id: duplicate id 'icmp-ports': also used "
                              "by firewall.rules[0]",
                       text + ":3: rule 'ok': id: duplicate id 'ok': also used by " + text + ":1",
                       text + ":2: rule 'icmp-ports': dst_port: ports only apply to tcp, udp "
                              "and sctp, and the rule's protocols include icmp (put those in a "
                              "rule of their own, without ports)"));
}

// A directory named as a YARA rule file was read as an empty file (no rules, no error).
TEST_F(FirewallLoader, DpiRuleFileThatIsADirectoryIsRefused) {
  rules::ConfigErrorList errors;
  auto m = model(absl::StrCat(R"({"dpi": {"rule_files": [")", dir_, R"("]}})"), &errors);
  ASSERT_FALSE(m.ok());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "dpi.rule_files[0]");
  EXPECT_NE(errors[0].reason.find(dir_ + ": is a directory"), std::string::npos) << errors[0].reason;
}

TEST_F(FirewallLoader, RelativePathsFollowTheConfigFile) {
  std::filesystem::create_directories(dir_ + "/etc/rules");
  write("etc/rules/site.rules", "deny tcp any any -> any 23 id telnet\n");
  write("etc/corp.txt", "10.0.0.0/8\n");
  std::string cfg = write("etc/dpu.json", R"({"firewall": {
      "ip_sets": [{"name": "corp", "file": "corp.txt"}],
      "rule_files": ["rules/site.rules"],
      "rules": [{"id": "x", "action": "ALLOW", "src": ["@corp"]}]}})");
  // Loaded from elsewhere: the paths are the config file's, and absolute from now on.
  auto c = loadConfigFile(cfg);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->firewall().rule_files(0), dir_ + "/etc/rules/site.rules");
  EXPECT_EQ(c->firewall().ip_sets(0).file(), dir_ + "/etc/corp.txt");
  auto m = toModel(*c);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->firewall.rules.size(), 2u);
  EXPECT_EQ(m->firewall.rules[1].id, "telnet");
  // A document given as text keeps them relative (to the working directory).
  auto raw = parseConfig(R"({"firewall": {"rule_files": ["rules/site.rules"]}})",
                         ConfigFormat::kJson, "raw.json");
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->firewall().rule_files(0), "rules/site.rules");
  resolveRelativePaths(&*raw, dir_ + "/etc");
  EXPECT_EQ(raw->firewall().rule_files(0), dir_ + "/etc/rules/site.rules");
  // A document without those sections is left exactly as it was.
  v1::ApplianceConfig empty;
  resolveRelativePaths(&empty, dir_);
  EXPECT_EQ(empty.ByteSizeLong(), 0u);
}

TEST_F(FirewallLoader, GeoipDatabaseIsCheckedAndCountriesWork) {
  if (!std::filesystem::exists(kCountryDb) || !std::filesystem::exists(kAsnDb)) {
    GTEST_SKIP() << "MaxMind test databases absent (" << DPU_MMDB_DIR << ")";
  }
  rules::ConfigErrorList errors;
  auto m = model(absl::StrCat(R"({"geoip": {"database": ")", kCountryDb, R"("},
      "firewall": {"rules": [{"id": "geo", "action": "DENY", "src_countries": ["GB", "US"]}]}})"),
                 &errors);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->firewall.geoip_database, kCountryDb);
  EXPECT_NE(m->firewall.geoip_database_stamp, 0u);
  EXPECT_EQ(m->firewall.rules[0].src_countries.size(), 2u);

  errors.clear();
  m = model(absl::StrCat(R"({"geoip": {"database": ")", kAsnDb, R"("}})"), &errors);
  ASSERT_FALSE(m.ok());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].section, "geoip");
  EXPECT_EQ(errors[0].field, "geoip.database");
  EXPECT_THAT(errors[0].reason, HasSubstr("no country data"));

  errors.clear();
  m = model(R"({"geoip": {"database": "/nonexistent/x.mmdb"}})", &errors);
  ASSERT_FALSE(m.ok());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "geoip.database");
  EXPECT_THAT(errors[0].reason, HasSubstr("/nonexistent/x.mmdb: cannot open"));
}

TEST_F(FirewallLoader, CountriesTheDatabaseDoesNotKnowAreWarnedAbout) {
  if (!std::filesystem::exists(kCountryDb)) {
    GTEST_SKIP() << "MaxMind test database absent (" << DPU_MMDB_DIR << ")";
  }
  // The test database has GB, SE, US, ... but no network in North Korea or Andorra.
  std::string rules = write("geo.rules", "deny any any any -> any any src-country GB,AD id g\n");
  rules::ConfigErrorList errors;
  ModelDetails details;
  auto m = model(absl::StrCat(R"({"geoip": {"database": ")", kCountryDb, R"("},
      "firewall": {"rule_files": [")", rules, R"("],
                   "rules": [{"id": "a", "action": "DENY", "src_countries": ["GB", "SE"]},
                             {"id": "b", "action": "DENY", "src_countries": ["KP", "GB"],
                              "dst_countries": ["KP", "AD"]}]}})"),
                 &errors, &details);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(details.warnings.size(), 2u) << absl::StrJoin(details.warnings, "\n");
  EXPECT_THAT(details.warnings[0], HasSubstr("rule 'b': KP,AD are in no network of "));
  EXPECT_THAT(details.warnings[0], HasSubstr("the rule matches no address of those countries"));
  EXPECT_THAT(details.warnings[1], HasSubstr(rules + ":1: rule 'g': AD is in no network of"));
  // Not an ISO code at all: an error, whatever the database.
  errors.clear();
  m = model(absl::StrCat(R"({"geoip": {"database": ")", kCountryDb, R"("},
      "firewall": {"rules": [{"id": "u", "action": "DENY", "src_countries": ["UK"]}]}})"),
            &errors);
  ASSERT_FALSE(m.ok());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0].reason, HasSubstr("the United Kingdom is GB"));
}

TEST_F(FirewallLoader, TheEntryCapIsCheckedHere) {
  // 1500 x 1500 prefixes: 2,250,000 entries, over the 2,000,000 cap.
  std::string src, dst;
  for (int i = 0; i < 1500; ++i) {
    absl::StrAppend(&src, i ? "\n" : "", "10.", i / 256, ".", i % 256, ".0/24");
    absl::StrAppend(&dst, i ? "\n" : "", "172.", 16 + i / 256, ".", i % 256, ".0/24");
  }
  std::string a = write("a.txt", src), b = write("b.txt", dst);
  rules::ConfigErrorList errors;
  auto m = model(absl::StrCat(R"({"firewall": {
      "ip_sets": [{"name": "a", "file": ")", a, R"("}, {"name": "b", "file": ")", b, R"("}],
      "rules": [{"id": "huge", "action": "DENY", "protocols": ["tcp"], "src": ["@a"],
                 "dst": ["@b"]}]}})"),
                 &errors);
  ASSERT_FALSE(m.ok());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].rule, "huge");
  EXPECT_EQ(errors[0].field, "firewall.rules[0]");
  EXPECT_THAT(errors[0].reason, HasSubstr("expands to 2250000 ACL entries"));
  EXPECT_THAT(errors[0].reason, HasSubstr("limit of 500000 entries (firewall.max_acl_entries, "
                                          "default)"));
}

TEST_F(FirewallLoader, TheEntryBudgetIsConfigurable) {
  std::string src;
  for (int i = 0; i < 100; ++i) absl::StrAppend(&src, "\"10.0.", i, ".0/24\",");
  src.pop_back();
  const std::string rule = absl::StrCat(R"({"id": "r", "action": "DENY", "protocols": ["tcp"],
      "src": [)", src, R"(], "dst_ports": ["1-8029"]})");
  rules::ConfigErrorList errors;
  auto m = model(absl::StrCat(R"({"firewall": {"max_acl_entries": 99, "rules": [)", rule, "]}}"),
                 &errors);
  ASSERT_FALSE(m.ok());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].rule, "r");
  EXPECT_THAT(errors[0].reason, HasSubstr("expands to 100 ACL entries"));
  EXPECT_THAT(errors[0].reason, HasSubstr("limit of 99 entries (firewall.max_acl_entries)"));
  errors.clear();
  m = model(absl::StrCat(R"({"firewall": {"max_acl_entries": 100, "rules": [)", rule, "]}}"),
            &errors);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->firewall.max_acl_entries, 100u);
  errors.clear();
  m = model(R"({"firewall": {"max_acl_entries": 4000001}})", &errors);
  ASSERT_FALSE(m.ok());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "firewall.max_acl_entries");
  EXPECT_THAT(errors[0].reason, HasSubstr("out of range [1, 4000000]"));
}

// --- issue 19.4: every error of a document in one answer ---------------------------------

std::string allText(const rules::ConfigErrorList& errors) {
  std::string s;
  for (const auto& e : errors) s += rules::formatError(e) + "\n";
  return s;
}

TEST(ConfigLoaderAllErrors, TypeEnumAndUnknownFieldErrorsTogetherWithSemanticOnes) {
  ParsedConfig p = parseConfigAll(R"({
    "dataplane": {"nonIp": "MAYBE", "flowTable": {"capacityPerWorker": -3, "agingSlise": 5},
                  "timeouts": {"udpS": true}},
    "firewall": {"defaultAToB": "deny",
                 "rules": [{"id": "a", "action": "ALLOW", "dstPorts": ["70000"]}, "junk",
                           {"id": "c", "action": "DENY", "protocols": "tcp"}]},
    "bogus": 1})", ConfigFormat::kJson, "t.json");
  ASSERT_TRUE(p.usable);
  std::string parse = allText(p.errors);
  EXPECT_EQ(p.errors.size(), 8u) << parse;
  EXPECT_THAT(parse, HasSubstr("dataplane.non_ip: \"MAYBE\" is not one of POLICY_DEFAULT, FORWARD, DROP"));
  EXPECT_THAT(parse, HasSubstr("dataplane.flow_table.capacity_per_worker: -3 is out of range for uint32"));
  EXPECT_THAT(parse, HasSubstr("dataplane.flow_table.agingSlise: unknown field \"agingSlise\" in FlowTableConfig (did you mean aging_slice?)"));
  EXPECT_THAT(parse, HasSubstr("dataplane.timeouts.udp_s: expected an integer (uint32), got boolean true"));
  EXPECT_THAT(parse, HasSubstr("firewall.default_a_to_b: \"deny\" is not one of ACTION_DEFAULT, ALLOW, DENY, REJECT (did you mean DENY?)"));
  EXPECT_THAT(parse, HasSubstr("firewall.rules[1]: expected an object (FirewallRule), got string \"junk\""));
  EXPECT_THAT(parse, HasSubstr("rule 'c': firewall.rules[2].protocols: expected a list"));
  EXPECT_THAT(parse, HasSubstr("t.json: bogus: unknown field"));
  // The rest parsed: the semantic errors come in the same answer, the indices of the rules
  // after the bad one kept, and nothing repeats a parse error.
  rules::ConfigErrorList all = allErrors(p);
  std::string text = allText(all);
  EXPECT_THAT(text, HasSubstr("rule 'a': firewall.rules[0].dst_ports"));
  EXPECT_THAT(text, Not(HasSubstr("firewall.rules[2].action")));
  EXPECT_THAT(text, Not(HasSubstr("firewall.rules[1].action"))) << "left out: not 'required'";
  // parseConfig (what SIGHUP and the fuzz target use) lists them all in its message.
  auto st = parseConfig(R"({"dataplane": {"nonIp": "MAYBE", "bogus": 1}})", ConfigFormat::kJson, "u.json");
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(std::string(st.status().message()), HasSubstr("u.json: invalid config: 2 errors"));
}

TEST(ConfigLoaderAllErrors, SyntaxErrorHasItsLine) {
  ParsedConfig p = parseConfigAll("{\n  \"dataplane\": {\n    \"nonIp\": DROP\n  }\n}\n",
                                  ConfigFormat::kJson, "s.json");
  EXPECT_FALSE(p.usable);
  ASSERT_EQ(p.errors.size(), 1u);
  EXPECT_EQ(p.errors[0].line, 3);
  EXPECT_THAT(p.errors[0].reason, HasSubstr("not JSON"));
  ParsedConfig ok = parseConfigAll(R"({"dataplane": {"nonIp": "DROP"}})", ConfigFormat::kJson, "o.json");
  EXPECT_TRUE(ok.usable);
  EXPECT_TRUE(ok.errors.empty());
  EXPECT_EQ(ok.config.dataplane().non_ip(), v1::DROP);
}

// A number a double cannot hold is refused as not JSON; nlohmann's out_of_range (406) used
// to escape the pre-pass and abort the process (found by the config fuzz target).
TEST(ConfigLoaderAllErrors, NumberOverflowIsAnErrorNotAnException) {
  ParsedConfig p = parseConfigAll(R"({"dataplane": {"timeouts": {"udp_s": 531e309}}})",
                                  ConfigFormat::kJson, "n.json");
  EXPECT_FALSE(p.usable);
  ASSERT_FALSE(p.errors.empty());
  EXPECT_THAT(p.errors[0].reason, HasSubstr("not JSON"));
  EXPECT_THAT(p.errors[0].reason, HasSubstr("531e309"));
}

// Semantic errors of one section no longer hide the compile errors of the others, nor the
// compile errors of the same section (a bad ttl hid the bad entries of the list).
TEST(ConfigLoaderAllErrors, EverySectionIsCompiledAndRefusedFieldsLeftOut) {
  auto c = parseConfig(R"({
    "firewall": {"rules": [{"id": "x", "action": "DENY", "dstPorts": ["99999"]}]},
    "dns": {"lists": [{"name": "ads", "format": "DNS_FORMAT_ADBLOCK", "ttl": 9999999,
                       "names": ["plain.example", "||ok.example^"]}]},
    "dpi": {"ruleSets": [{"name": "s", "text": "rule r { condition: $nope }"}]}})",
                       ConfigFormat::kJson, "t.json");
  ASSERT_TRUE(c.ok()) << c.status();
  rules::ConfigErrorList errors = validateConfig(*c);
  std::string text = allText(errors);
  EXPECT_THAT(text, HasSubstr("firewall.rules[0].dst_ports"));
  EXPECT_THAT(text, HasSubstr("dns.lists[0].ttl"));
  EXPECT_THAT(text, HasSubstr("Adblock rule expected"));
  EXPECT_THAT(text, HasSubstr("$nope"));
  EXPECT_EQ(errors.size(), 4u) << text;
  // A valid document still validates clean.
  auto good = parseConfig(R"({"dns": {"lists": [{"name": "ads", "names": ["a.example"]}]}})",
                          ConfigFormat::kJson, "g.json");
  ASSERT_TRUE(good.ok());
  EXPECT_TRUE(validateConfig(*good).empty());
}

TEST(ConfigLoaderAllErrors, DeepNestingIsOneErrorNotACrash) {
  const std::string deep = std::string(300000, '[') + std::string(300000, ']');
  ParsedConfig p = parseConfigAll("{\"x\": " + deep + ", \"dataplane\": {\"nonIp\": " + deep + "}}",
                                  ConfigFormat::kJson, "d.json");
  EXPECT_FALSE(p.usable);
  ASSERT_EQ(p.errors.size(), 1u);
  EXPECT_THAT(p.errors[0].reason, HasSubstr("nested deeper than 100"));
  // 100 levels of junk inside a known field are still judged (as one type error).
  const std::string ok_deep = std::string(90, '[') + std::string(90, ']');
  ParsedConfig q = parseConfigAll("{\"dataplane\": {\"nonIp\": " + ok_deep + "}}",
                                  ConfigFormat::kJson, "e.json");
  ASSERT_EQ(q.errors.size(), 1u) << allText(q.errors);
  EXPECT_THAT(q.errors[0].reason, HasSubstr("is not one of"));
}

TEST(ConfigLoaderAllErrors, ClearFieldPath) {
  v1::ApplianceConfig c;
  c.mutable_dns()->add_lists()->set_ttl(5);
  c.mutable_dns()->mutable_lists(0)->add_names("a");
  c.mutable_dns()->mutable_lists(0)->add_names("b");
  EXPECT_TRUE(clearFieldPath(&c, "dns.lists[0].ttl"));
  EXPECT_EQ(c.dns().lists(0).ttl(), 0u);
  EXPECT_TRUE(clearFieldPath(&c, "dns.lists[0].names[0]"));
  ASSERT_EQ(c.dns().lists(0).names_size(), 2);  // indices kept
  EXPECT_EQ(c.dns().lists(0).names(0), "");
  EXPECT_FALSE(clearFieldPath(&c, "dns.lists[3].ttl"));
  EXPECT_FALSE(clearFieldPath(&c, "dns.nope"));
  EXPECT_FALSE(clearFieldPath(&c, "dns.lists.ttl"));
}

}  // namespace
}  // namespace dpu::ctl

namespace dpu::ctl {
namespace {

// Issue 16: dataplane.tunnels, defaults and every validation error by field.
TEST(ConfigLoader, TunnelSettings) {
  auto d = parseConfig("{}", ConfigFormat::kJson, "t.json");
  ASSERT_TRUE(d.ok());
  auto dm = toModel(*d);
  ASSERT_TRUE(dm.ok()) << dm.status();
  EXPECT_TRUE(dm->dataplane.tunnels_inspect);
  EXPECT_EQ(dm->dataplane.vxlan_ports, std::vector<uint32_t>{4789});
  EXPECT_EQ(dm->dataplane.geneve_ports, std::vector<uint32_t>{6081});
  EXPECT_EQ(dm->dataplane.tunnel_max_depth, 3u);
  // Issue 30: a datagram on a tunnel port that is not the tunnel is plain UDP by default.
  EXPECT_FALSE(dm->dataplane.tunnels_strict);

  auto ok = parseConfig(R"({"dataplane": {"tunnels": {"mode": "OUTER_ONLY", "vxlanPorts": [4789, 8472],
                           "genevePorts": [6081], "maxDepth": 4, "strict": true}}})", ConfigFormat::kJson, "t.json");
  ASSERT_TRUE(ok.ok()) << ok.status();
  auto om = toModel(*ok);
  ASSERT_TRUE(om.ok()) << om.status();
  EXPECT_TRUE(om->dataplane.tunnels_strict);
  EXPECT_FALSE(om->dataplane.tunnels_inspect);
  EXPECT_EQ(om->dataplane.vxlan_ports, (std::vector<uint32_t>{4789, 8472}));
  EXPECT_EQ(om->dataplane.tunnel_max_depth, 4u);

  auto bad = parseConfig(R"({"dataplane": {"tunnels": {"vxlanPorts": [4789, 0, 4789, 70000],
                            "genevePorts": [8472, 4789], "maxDepth": 5}}})", ConfigFormat::kJson, "t.json");
  ASSERT_TRUE(bad.ok());
  rules::ConfigErrorList errors;
  auto bm = toModel(*bad, &errors);
  ASSERT_FALSE(bm.ok());
  ASSERT_EQ(errors.size(), 5u) << bm.status();
  EXPECT_EQ(errors[0].field, "dataplane.tunnels.max_depth");
  EXPECT_THAT(errors[0].reason, HasSubstr("5 is out of range [1, 4]"));
  EXPECT_EQ(errors[1].field, "dataplane.tunnels.vxlan_ports[1]");
  EXPECT_THAT(errors[1].reason, HasSubstr("0 is not a UDP port"));
  EXPECT_EQ(errors[2].field, "dataplane.tunnels.vxlan_ports[2]");
  EXPECT_THAT(errors[2].reason, HasSubstr("repeats dataplane.tunnels.vxlan_ports[0]"));
  EXPECT_EQ(errors[3].field, "dataplane.tunnels.vxlan_ports[3]");
  EXPECT_EQ(errors[4].field, "dataplane.tunnels.geneve_ports[1]");
  EXPECT_THAT(errors[4].reason, HasSubstr("also dataplane.tunnels.vxlan_ports[0]"));
  for (const auto& e : errors) EXPECT_EQ(e.section, "dataplane");

  auto many = parseConfig(R"({"dataplane": {"tunnels": {"genevePorts": [1,2,3,4,5,6,7,8,9]}}})",
                          ConfigFormat::kJson, "t.json");
  ASSERT_TRUE(many.ok());
  errors.clear();
  ASSERT_FALSE(toModel(*many, &errors).ok());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "dataplane.tunnels.geneve_ports");
  EXPECT_THAT(errors[0].reason, HasSubstr("9 ports: at most 8"));
}

}  // namespace
}  // namespace dpu::ctl
