// dpuctl's firewall pieces that do not talk to the network: `fw add` text -> API rule (and
// back), `fw load` files, the `fw list` table and `geo lookup` output.
#include "control/cli/fw_format.h"

#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace dpu::cli {
namespace {

using ::testing::HasSubstr;

TEST(FwText, TheIssueExampleBecomesAnApiRule) {
  auto r = firewallRuleFromText("deny tcp any any -> 192.0.2.0/24 22 prio 10 id ssh-block");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->id(), "ssh-block");
  EXPECT_EQ(r->priority(), 10);
  EXPECT_EQ(r->action(), v1::DENY);
  EXPECT_EQ(r->direction(), v1::BOTH);
  ASSERT_EQ(r->protocols_size(), 1);
  EXPECT_EQ(r->protocols(0), "tcp");
  EXPECT_EQ(r->src_size(), 0);
  ASSERT_EQ(r->dst_size(), 1);
  EXPECT_EQ(r->dst(0), "192.0.2.0/24");
  EXPECT_EQ(r->dst_ports(0), "22");
  EXPECT_FALSE(r->has_vlan());
  EXPECT_EQ(firewallRuleText(*r), "deny tcp any any -> 192.0.2.0/24 22 prio 10 id ssh-block");
}

TEST(FwText, EveryOptionRoundTrips) {
  const std::string text =
      "reject udp,icmp @corp,10.0.0.0/8 any -> 2001:db8::/32 any prio -3 id x dir b->a vlan 0 "
      "src-country US,DE dst-country FR desc \"say \\\"no\\\"\"";
  auto r = firewallRuleFromText(text);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->src(0), "@corp");  // the server resolves sets
  EXPECT_EQ(r->direction(), v1::B_TO_A);
  EXPECT_TRUE(r->has_vlan());
  EXPECT_EQ(r->vlan(), 0u);
  EXPECT_EQ(r->description(), "say \"no\"");
  EXPECT_EQ(firewallRuleText(*r), text);
  EXPECT_EQ(firewallMatchText(*r),
            "udp,icmp @corp,10.0.0.0/8 any -> 2001:db8::/32 any dir b->a vlan 0 src-country "
            "US,DE dst-country FR");
}

TEST(FwText, ErrorsNameTheField) {
  auto r = firewallRuleFromText("deny tcp any any -> any 22");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("id: required"));
  r = firewallRuleFromText("deny tcp any any -> 10.0.0.1/8 22 id a");
  EXPECT_EQ(r.status().message(),
            "rule 'a': dst: 10.0.0.1/8 has host bits set (did you mean 10.0.0.0/8?)");
  r = firewallRuleFromText("deny icmp any any -> any 22 id a");
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("dst_port: ports only apply"));
  r = firewallRuleFromText("deny tcp any any > any 22 id a");
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("expected 'ACTION PROTO SRC SPORT"));
  // Countries are the server's to check against its database.
  EXPECT_TRUE(firewallRuleFromText("deny any any any -> any any src-country US id g").ok());
}

TEST(FwFile, LoadsRulesWithTheirLines) {
  char tmpl[] = "/tmp/dpu_fw_cli.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  std::string p = dir + "/site.rules";
  std::ofstream(p) << "# header\n\ndeny tcp any any -> any 23 id telnet\nallow udp any any -> any 53\n";
  std::vector<std::string> errors;
  std::vector<int> lines;
  auto rules = firewallRulesFromFile(p, &errors, &lines);
  ASSERT_TRUE(rules.ok()) << rules.status();
  ASSERT_EQ(rules->size(), 2u);
  EXPECT_EQ((*rules)[0].id(), "telnet");
  EXPECT_EQ((*rules)[1].id(), "site.rules:4");
  EXPECT_THAT(lines, ::testing::ElementsAre(3, 4));
  std::string bad = dir + "/bad.json";
  std::ofstream(bad) << "{\"rules\": [{\"id\": \"x\",\n \"dport\": 22}]}";
  rules = firewallRulesFromFile(bad, &errors, nullptr);
  ASSERT_FALSE(rules.ok());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0], HasSubstr(bad + ":2: rule 'x': rules[0].dport: unknown key"));
  errors.clear();
  rules = firewallRulesFromFile(dir + "/none.rules", &errors, nullptr);
  EXPECT_EQ(rules.status().code(), absl::StatusCode::kNotFound);
  std::filesystem::remove_all(dir);
}

TEST(FwList, TableHasCountersAndMatches) {
  v1::ListFirewallRulesResponse r;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(R"({
    "config_version": 7, "default_b_to_a": "DENY", "acl_entries_v4": 3, "acl_entries_v6": 1,
    "geoip_database": "/db/c.mmdb", "countries": ["US"],
    "rules": [
      {"rule": {"id": "ssh-block", "action": "DENY", "priority": 10, "protocols": ["tcp"],
                "dst": ["192.0.2.0/24"], "dst_ports": ["22"], "description": "no ssh"},
       "rank": 0, "source": "config", "acl_entries": 1, "packets": 1234567, "bytes": 99,
       "flows": 3, "last_hit_unix_ns": 1700000000123000000},
      {"rule": {"id": "web", "action": "ALLOW", "src_countries": ["US"]},
       "rank": 1, "source": "/etc/r.rules:4", "acl_entries": 2}
    ]})",
                                                          &r)
                  .ok());
  std::string t = formatFirewallRules(r);
  EXPECT_THAT(t, HasSubstr("firewall (config version 7): 2 rule(s), defaults a->b allow, "
                           "b->a deny; existing flows are judged again on rule changes"));
  EXPECT_THAT(t, HasSubstr("ACL entries: 3 IPv4, 1 IPv6; GeoIP database: /db/c.mmdb (countries US)"));
  std::vector<std::string> lines;
  std::stringstream ss(t);
  for (std::string l; std::getline(ss, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[2].rfind("RANK  ID", 0), 0u) << lines[2];
  EXPECT_THAT(lines[3], HasSubstr("ssh-block"));
  EXPECT_THAT(lines[3], HasSubstr(" 1.2M "));
  EXPECT_THAT(lines[3], HasSubstr("2023-11-14T22:13:20.123Z"));
  EXPECT_THAT(lines[3], HasSubstr("tcp any any -> 192.0.2.0/24 22  # no ssh"));
  EXPECT_THAT(lines[4], HasSubstr("/etc/r.rules:4"));
  EXPECT_THAT(lines[4], HasSubstr(" - "));  // never hit
  EXPECT_THAT(lines[4], HasSubstr("any any any -> any any src-country US"));
  // Columns line up: the ID column starts at the same offset on every row.
  EXPECT_EQ(lines[3].find("ssh-block"), lines[2].find("ID"));
  EXPECT_EQ(lines[4].find("web"), lines[2].find("ID"));
}

TEST(GeoLookup, Output) {
  v1::LookupCountryResponse r;
  r.set_ip("81.2.69.142");
  r.set_found(true);
  r.set_country("GB");
  r.set_registered_country("GB");
  r.set_network("81.2.69.142/31");
  r.set_database("/db/c.mmdb");
  r.set_database_type("GeoLite2-Country");
  r.set_country_index(2);
  std::string t = formatLookupCountry(r);
  EXPECT_THAT(t, HasSubstr("81.2.69.142: country GB, network 81.2.69.142/31\n"));
  EXPECT_THAT(t, HasSubstr("firewall country index 2 (named by the rules)"));
  EXPECT_THAT(t, HasSubstr("database /db/c.mmdb (GeoLite2-Country"));
  r.set_found(false);
  r.set_country_index(0);
  EXPECT_THAT(formatLookupCountry(r), HasSubstr("81.2.69.142: not in the database"));
}

}  // namespace
}  // namespace dpu::cli
