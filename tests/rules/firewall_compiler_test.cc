// rules::compileFirewall: validation (every bad field names the rule and the field), ranks,
// expansion counts, the IPv4 / IPv6 split, the country index, the entry cap, and the
// snapshot hook (compileSnapshot sets Snapshot.firewall, shares it when unchanged).
#include "rules/compile/firewall_compiler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "rules/compile/firewall_parsers.h"
#include "rules/compiled/snapshot.h"

namespace dpu::rules {
namespace {

using ::testing::HasSubstr;

IpPrefix P(const std::string& text) {
  // Builds prefixes without the parser's host-bit check (the compiler must catch them).
  size_t slash = text.find('/');
  auto a = parseAddress(text.substr(0, slash));
  EXPECT_TRUE(a.ok()) << text;
  IpPrefix p = *a;
  if (slash != std::string::npos) p.len = static_cast<uint8_t>(std::stoi(text.substr(slash + 1)));
  return p;
}

FirewallRule R(const std::string& id, int32_t prio = 0, FwAction a = FwAction::kDeny) {
  FirewallRule r;
  r.id = id;
  r.priority = prio;
  r.action = a;
  return r;
}

std::shared_ptr<const CompiledFirewall> compileOk(const FirewallModel& m) {
  ConfigErrorList errors;
  auto fw = compileFirewall(m, &errors);
  EXPECT_TRUE(fw.ok()) << fw.status();
  EXPECT_TRUE(errors.empty());
  return fw.ok() ? *fw : nullptr;
}

ConfigErrorList compileErrors(const FirewallModel& m, FirewallCompileOptions opts = {}) {
  ConfigErrorList errors;
  auto fw = compileFirewall(m, opts, &errors);
  EXPECT_FALSE(fw.ok());
  EXPECT_EQ(fw.status().code(), absl::StatusCode::kInvalidArgument);
  // validateFirewall finds exactly the same errors.
  ConfigErrorList again;
  validateFirewall(m, again, opts);
  EXPECT_EQ(again.size(), errors.size());
  for (const ConfigError& e : errors) {
    EXPECT_EQ(e.section, "firewall");
    EXPECT_FALSE(e.field.empty());
    EXPECT_FALSE(e.reason.empty());
  }
  return errors;
}

TEST(FirewallCompiler, NoRulesCompilesToDefaults) {
  FirewallModel m;
  m.default_a_to_b = FwAction::kDeny;
  m.default_b_to_a = FwAction::kReject;
  m.reevaluate_on_change = false;
  auto fw = compileOk(m);
  ASSERT_TRUE(fw);
  EXPECT_TRUE(fw->rules.empty());
  EXPECT_TRUE(fw->v4.empty());
  EXPECT_TRUE(fw->v6.empty());
  EXPECT_EQ(fw->default_action[0], FwAction::kDeny);
  EXPECT_EQ(fw->default_action[1], FwAction::kReject);
  EXPECT_FALSE(fw->reevaluate_on_change);
  EXPECT_FALSE(fw->uses_countries);
  FwQuery q;
  EXPECT_EQ(referenceMatch(*fw, q), -1);
}

TEST(FirewallCompiler, RanksFollowPriorityThenOrder) {
  FirewallModel m;
  m.rules = {R("a", 10), R("b", 5), R("c", 10), R("d", 5), R("e", -3)};
  auto fw = compileOk(m);
  ASSERT_TRUE(fw);
  std::vector<std::string> ids;
  for (const auto& r : fw->rules) ids.push_back(r.id);
  EXPECT_THAT(ids, ::testing::ElementsAre("e", "b", "d", "a", "c"));
  EXPECT_EQ(fw->rules[1].priority, 5);
  // One "any" entry per rule and family; entry.rule == entry.rank == rank.
  ASSERT_EQ(fw->v4.size(), 5u);
  ASSERT_EQ(fw->v6.size(), 5u);
  for (uint32_t r = 0; r < 5; ++r) {
    EXPECT_EQ(fw->v4[r].rank, r);
    EXPECT_EQ(fw->v4[r].rule, r);
    EXPECT_EQ(fw->v4[r].proto_mask, 0);
    EXPECT_EQ(fw->v6[r].rule, r);
  }
  // The lowest rank wins among matching entries.
  FwQuery q;
  EXPECT_EQ(referenceMatch(*fw, q), 0);
}

TEST(FirewallCompiler, ExpansionCountIsTheProductOfTheLists) {
  FirewallModel m;
  FirewallRule r = R("web");
  r.protocols = {6, 17};
  r.src = {P("10.0.0.0/8"), P("192.168.0.0/16"), P("172.16.0.0/12")};
  r.dst_ports = {{80, 80}, {443, 443}, {8000, 8080}};
  r.src_ports = {{1024, 65535}};
  m.rules = {r};
  auto fw = compileOk(m);
  ASSERT_TRUE(fw);
  EXPECT_EQ(fw->v4.size(), 2u * 3u * 1u * 1u * 3u);
  EXPECT_TRUE(fw->v6.empty());  // the source is IPv4 only
  std::set<std::pair<uint16_t, uint16_t>> dports;
  for (const AclEntry& e : fw->v4) {
    EXPECT_EQ(e.proto_mask, 0xff);
    EXPECT_TRUE(e.proto == 6 || e.proto == 17);
    EXPECT_EQ(e.dst_len, 0);
    EXPECT_EQ(e.sport_lo, 1024);
    EXPECT_EQ(e.sport_hi, 65535);
    dports.insert({e.dport_lo, e.dport_hi});
  }
  EXPECT_EQ(dports, (std::set<std::pair<uint16_t, uint16_t>>{{80, 80}, {443, 443}, {8000, 8080}}));
}

TEST(FirewallCompiler, CoveredPrefixesAndOverlappingPortsAreMerged) {
  FirewallModel m;
  FirewallRule r = R("m");
  r.protocols = {6};
  r.src = {P("10.0.0.0/8"), P("10.1.0.0/16"), P("10.0.0.0/8"), P("11.0.0.0/8")};
  r.dst_ports = {{80, 90}, {85, 100}, {101, 101}, {200, 200}};
  m.rules = {r};
  auto fw = compileOk(m);
  ASSERT_TRUE(fw);
  ASSERT_EQ(fw->v4.size(), 2u * 2u);  // {10/8, 11/8} x {80-101, 200}
  std::set<std::pair<uint16_t, uint16_t>> dports;
  for (const AclEntry& e : fw->v4) dports.insert({e.dport_lo, e.dport_hi});
  EXPECT_EQ(dports, (std::set<std::pair<uint16_t, uint16_t>>{{80, 101}, {200, 200}}));
}

TEST(FirewallCompiler, PortsWithoutProtocolMeanTcpAndUdp) {
  FirewallModel m;
  FirewallRule r = R("dns");
  r.dst_ports = {{53, 53}};
  m.rules = {r};
  auto fw = compileOk(m);
  ASSERT_TRUE(fw);
  ASSERT_EQ(fw->v4.size(), 2u);
  ASSERT_EQ(fw->v6.size(), 2u);
  std::set<uint8_t> protos;
  for (const AclEntry& e : fw->v4) {
    EXPECT_EQ(e.proto_mask, 0xff);
    protos.insert(e.proto);
  }
  EXPECT_EQ(protos, (std::set<uint8_t>{6, 17}));
}

TEST(FirewallCompiler, MixedFamiliesOnlyPairConsistently) {
  FirewallModel m;
  FirewallRule r = R("mix");
  r.src = {P("10.0.0.0/8"), P("2001:db8::/32")};
  r.dst = {P("192.0.2.0/24"), P("198.51.100.0/24"), P("2001:db8:1::/48")};
  m.rules = {r};
  auto fw = compileOk(m);
  ASSERT_TRUE(fw);
  ASSERT_EQ(fw->v4.size(), 2u);  // 1 v4 source x 2 v4 destinations
  ASSERT_EQ(fw->v6.size(), 1u);  // 1 v6 source x 1 v6 destination
  for (const AclEntry& e : fw->v4) {
    EXPECT_EQ(e.src_len, 8);
    EXPECT_EQ(e.dst_len, 24);
    EXPECT_EQ(e.src[4], 0);
  }
  EXPECT_EQ(fw->v6[0].src_len, 32);
  EXPECT_EQ(fw->v6[0].dst_len, 48);
  EXPECT_EQ(fw->v6[0].dst[0], 0x20);

  // "any" on one side pairs with each family of the other.
  FirewallRule any = R("any-dst");
  any.src = {P("10.0.0.0/8"), P("2001:db8::/32")};
  m.rules = {any};
  fw = compileOk(m);
  ASSERT_TRUE(fw);
  ASSERT_EQ(fw->v4.size(), 1u);
  ASSERT_EQ(fw->v6.size(), 1u);
  EXPECT_EQ(fw->v4[0].dst_len, 0);
  EXPECT_EQ(fw->v6[0].dst_len, 0);
}

TEST(FirewallCompiler, IcmpGoesToItsFamilyOnly) {
  FirewallModel m;
  FirewallRule r = R("ping");
  r.protocols = {1, 58};
  m.rules = {r};
  auto fw = compileOk(m);
  ASSERT_TRUE(fw);
  ASSERT_EQ(fw->v4.size(), 1u);
  ASSERT_EQ(fw->v6.size(), 1u);
  EXPECT_EQ(fw->v4[0].proto, 1);
  EXPECT_EQ(fw->v6[0].proto, 58);

  r.dst = {P("2001:db8::/32")};
  r.protocols = {1};
  m.rules = {r};
  auto errs = compileErrors(m);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].field, "firewall.rules[0].protocols");
  EXPECT_THAT(errs[0].reason, HasSubstr("can never match"));
}

TEST(FirewallCompiler, FamiliesThatNeverMeetAreAnError) {
  FirewallModel m;
  FirewallRule r = R("never");
  r.src = {P("10.0.0.0/8")};
  r.dst = {P("2001:db8::/32")};
  m.rules = {R("ok"), r};
  auto errs = compileErrors(m);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].rule, "never");
  EXPECT_EQ(errs[0].index, 1);
  EXPECT_EQ(errs[0].field, "firewall.rules[1].dst");
  EXPECT_EQ(errs[0].reason,
            "the source is IPv4 only and the destination IPv6 only: the rule can never match");
}

TEST(FirewallCompiler, HostBitsNameThePrefix) {
  FirewallModel m;
  FirewallRule r = R("hb");
  r.src = {P("10.0.0.1/8")};
  r.dst = {P("2001:db8::1/32")};
  m.rules = {r};
  auto errs = compileErrors(m);
  ASSERT_EQ(errs.size(), 2u);
  EXPECT_EQ(errs[0].field, "firewall.rules[0].src");
  EXPECT_EQ(errs[0].reason, "10.0.0.1/8 has host bits set (did you mean 10.0.0.0/8?)");
  EXPECT_EQ(errs[1].field, "firewall.rules[0].dst");
  EXPECT_EQ(errs[1].reason, "2001:db8::1/32 has host bits set (did you mean 2001:db8::/32?)");
  EXPECT_EQ(formatError(errs[0]),
            "rule 'hb': firewall.rules[0].src: 10.0.0.1/8 has host bits set (did you mean "
            "10.0.0.0/8?)");
}

TEST(FirewallCompiler, PortsNeedPortProtocols) {
  FirewallModel m;
  FirewallRule r = R("icmp-ports");
  r.protocols = {6, 1};
  r.dst_ports = {{22, 22}};
  m.rules = {r};
  auto errs = compileErrors(m);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].field, "firewall.rules[0].dst_ports");
  EXPECT_THAT(errs[0].reason, HasSubstr("include icmp"));

  // sctp has ports.
  r.protocols = {132};
  m.rules = {r};
  auto fw = compileOk(m);
  ASSERT_TRUE(fw);
  EXPECT_EQ(fw->v4[0].proto, 132);
}

TEST(FirewallCompiler, BadRangesVlanAndIdAreErrors) {
  FirewallModel m;
  FirewallRule r = R("bad id");
  r.protocols = {17};
  r.src_ports = {{100, 50}};
  r.vlan = 5000;
  FirewallRule noid = R("");
  FirewallRule noaction = R("x");
  noaction.action = static_cast<FwAction>(0);
  m.rules = {r, noid, noaction};
  auto errs = compileErrors(m);
  std::vector<std::string> fields;
  for (const auto& e : errs) fields.push_back(e.field);
  EXPECT_THAT(fields, ::testing::ElementsAre("firewall.rules[0].id", "firewall.rules[0].src_ports",
                                             "firewall.rules[0].vlan", "firewall.rules[1].id",
                                             "firewall.rules[2].action"));
  EXPECT_THAT(errs[1].reason, HasSubstr("100-50"));
  EXPECT_EQ(errs[2].reason, "5000 is out of range [0, 4095]");
  EXPECT_THAT(errs[3].reason, HasSubstr("required"));
}

TEST(FirewallCompiler, VlanAndDirectionGoIntoEntries) {
  FirewallModel m;
  FirewallRule r = R("v");
  r.vlan = 100;
  r.direction = FwDirection::kBtoA;
  FirewallRule u = R("untagged");
  u.vlan = 0;
  u.direction = FwDirection::kAtoB;
  m.rules = {r, u};
  auto fw = compileOk(m);
  ASSERT_TRUE(fw);
  EXPECT_EQ(fw->v4[0].vlan_lo, 100);
  EXPECT_EQ(fw->v4[0].vlan_hi, 100);
  EXPECT_EQ(fw->v4[0].dir_lo, 2);
  EXPECT_EQ(fw->v4[0].dir_hi, 2);
  EXPECT_EQ(fw->v4[1].vlan_hi, 0);
  EXPECT_EQ(fw->v4[1].dir_lo, 1);
  EXPECT_EQ(fw->v4[1].dir_hi, 1);
  FwQuery q;
  q.dir = 2;
  q.vlan = 100;
  EXPECT_EQ(referenceMatch(*fw, q), 0);
  q.vlan = 0;
  EXPECT_EQ(referenceMatch(*fw, q), -1);  // untagged, but initiated on side B
  q.dir = 1;
  EXPECT_EQ(referenceMatch(*fw, q), 1);
}

TEST(FirewallCompiler, CountriesNeedADatabaseAndValidCodes) {
  FirewallModel m;
  FirewallRule r = R("geo");
  r.src_countries = {CountryCode{'U', 'S'}};
  m.rules = {r};
  auto errs = compileErrors(m);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].rule, "geo");
  EXPECT_EQ(errs[0].field, "firewall.rules[0].src_countries");
  EXPECT_THAT(errs[0].reason, HasSubstr("rule 'geo'"));
  EXPECT_THAT(errs[0].reason, HasSubstr("no GeoIP database"));

  m.geoip_database = "/some/db.mmdb";
  r.dst_countries = {CountryCode{'u', 's'}};
  m.rules = {r};
  errs = compileErrors(m);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].field, "firewall.rules[0].dst_countries");
  EXPECT_THAT(errs[0].reason, HasSubstr("'us' is not an ISO 3166-1 alpha-2"));
}

TEST(FirewallCompiler, UnassignedCountryCodesAreErrors) {
  FirewallModel m;
  m.geoip_database = "/some/db.mmdb";
  FirewallRule r = R("geo");
  r.src_countries = {CountryCode{'G', 'B'}, CountryCode{'U', 'K'}};
  r.dst_countries = {CountryCode{'X', 'X'}, CountryCode{'X', 'K'}, CountryCode{'Z', 'W'}};
  m.rules = {r};
  auto errs = compileErrors(m);
  ASSERT_EQ(errs.size(), 2u);
  EXPECT_EQ(errs[0].field, "firewall.rules[0].src_countries");
  EXPECT_THAT(errs[0].reason, HasSubstr("'UK' is not an assigned ISO 3166-1 alpha-2 country "
                                        "code (the United Kingdom is GB)"));
  EXPECT_EQ(errs[1].field, "firewall.rules[0].dst_countries");
  EXPECT_THAT(errs[1].reason, HasSubstr("'XX' is not an assigned"));
  // validate reports the same (what apply would refuse).
  ConfigErrorList v;
  validateFirewall(m, v);
  EXPECT_EQ(v.size(), 2u);
  // Every assigned code passes (GB, XK as MaxMind uses it, ZW).
  r.src_countries = {CountryCode{'G', 'B'}};
  r.dst_countries = {CountryCode{'X', 'K'}, CountryCode{'Z', 'W'}, CountryCode{'A', 'D'}};
  m.rules = {r};
  ConfigErrorList none;
  auto fw = compileFirewall(m, FirewallCompileOptions{}, &none);
  EXPECT_TRUE(fw.ok()) << fw.status();
  EXPECT_TRUE(none.empty());
}

TEST(FirewallCompiler, CountryIndexAndRanges) {
  FirewallModel m;
  m.geoip_database = "/db.mmdb";
  FirewallRule a = R("a", 1);
  a.src_countries = {CountryCode{'U', 'S'}, CountryCode{'D', 'E'}};
  FirewallRule b = R("b", 2);
  b.dst_countries = {CountryCode{'F', 'R'}, CountryCode{'D', 'E'}, CountryCode{'J', 'P'}};
  FirewallRule c = R("c", 0);  // rank 0, no countries
  m.rules = {b, a, c};         // b listed first, but a has the lower priority value
  auto fw = compileOk(m);
  ASSERT_TRUE(fw);
  EXPECT_TRUE(fw->uses_countries);
  // Indices in order of first use in rank order: a (US, DE), then b (FR, JP).
  ASSERT_EQ(fw->countries.size(), 4u);
  EXPECT_EQ(countryString(fw->countries[0]), "US");
  EXPECT_EQ(countryString(fw->countries[1]), "DE");
  EXPECT_EQ(countryString(fw->countries[2]), "FR");
  EXPECT_EQ(countryString(fw->countries[3]), "JP");
  EXPECT_EQ(fw->countryIndex("US"), 1);
  EXPECT_EQ(fw->countryIndex("DE"), 2);
  EXPECT_EQ(fw->countryIndex("JP"), 4);
  EXPECT_EQ(fw->countryIndex("ZZ"), 0);
  EXPECT_EQ(fw->countryIndex("us"), 0);
  EXPECT_EQ(fw->geoip_database, "/db.mmdb");
  // Ranks: c (0), a (1), b (2). a: {1, 2} is one range; b: {2, 3, 4} one range.
  ASSERT_EQ(fw->rules[1].id, "a");
  std::vector<const AclEntry*> ea, eb;
  for (const AclEntry& e : fw->v4) {
    if (e.rule == 1) ea.push_back(&e);
    if (e.rule == 2) eb.push_back(&e);
  }
  ASSERT_EQ(ea.size(), 1u);
  EXPECT_EQ(ea[0]->src_cc_lo, 1);
  EXPECT_EQ(ea[0]->src_cc_hi, 2);
  EXPECT_EQ(ea[0]->dst_cc_lo, 0);
  EXPECT_EQ(ea[0]->dst_cc_hi, 0xffff);
  ASSERT_EQ(eb.size(), 1u);
  EXPECT_EQ(eb[0]->dst_cc_lo, 2);
  EXPECT_EQ(eb[0]->dst_cc_hi, 4);
  // Matching by index.
  FirewallModel m2 = m;
  m2.rules = {a, b};
  fw = compileOk(m2);
  FwQuery q;
  q.src_cc = fw->countryIndex("DE");
  EXPECT_EQ(referenceMatch(*fw, q), 0);
  q.src_cc = 0;
  q.dst_cc = fw->countryIndex("JP");
  EXPECT_EQ(referenceMatch(*fw, q), 1);
  q.dst_cc = 0;
  EXPECT_EQ(referenceMatch(*fw, q), -1);
}

TEST(FirewallCompiler, NonContiguousCountriesSplitIntoRanges) {
  FirewallModel m;
  m.geoip_database = "/db.mmdb";
  FirewallRule a = R("a", 0);
  a.src_countries = {CountryCode{'U', 'S'}, CountryCode{'D', 'E'}, CountryCode{'F', 'R'}};
  FirewallRule b = R("b", 1);
  b.src_countries = {CountryCode{'U', 'S'}, CountryCode{'F', 'R'}};  // indices 1 and 3
  m.rules = {a, b};
  auto fw = compileOk(m);
  ASSERT_TRUE(fw);
  size_t b_entries = 0;
  for (const AclEntry& e : fw->v4) {
    if (e.rule == 1) {
      ++b_entries;
      EXPECT_EQ(e.src_cc_lo, e.src_cc_hi);
    }
  }
  EXPECT_EQ(b_entries, 2u);
}

TEST(FirewallCompiler, DuplicateIdsNameTheFirstUse) {
  FirewallModel m;
  FirewallRule f = R("dup");
  f.file = "/etc/dpu/rules.txt";
  f.line = 7;
  m.rules = {R("dup"), R("other"), f};
  auto errs = compileErrors(m);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].index, 2);
  EXPECT_EQ(errs[0].file, "/etc/dpu/rules.txt");
  EXPECT_EQ(errs[0].line, 7);
  EXPECT_EQ(errs[0].field, "id");  // a rule from a file: the proto field name
  EXPECT_EQ(errs[0].reason, "duplicate id 'dup': also used by firewall.rules[0]");
  EXPECT_EQ(formatError(errs[0]),
            "/etc/dpu/rules.txt:7: rule 'dup': id: duplicate id 'dup': also used by "
            "firewall.rules[0]");
}

TEST(FirewallCompiler, EntryCapNamesTheRuleThatCrossesIt) {
  FirewallModel m;
  FirewallRule small = R("small");
  small.protocols = {6};
  FirewallRule big = R("big", 5);
  big.protocols = {6};
  for (int i = 0; i < 10; ++i) {
    big.src.push_back(P("10." + std::to_string(i) + ".0.0/16"));
    big.dst.push_back(P("192.168." + std::to_string(i) + ".0/24"));
  }
  big.dst_ports = {{1, 1}, {3, 3}, {5, 5}};
  m.rules = {small, big};
  FirewallCompileOptions opts;
  opts.max_entries = 250;
  auto errs = compileErrors(m, opts);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].rule, "big");
  EXPECT_EQ(errs[0].index, 1);
  EXPECT_EQ(errs[0].field, "firewall.rules[1]");
  EXPECT_THAT(errs[0].reason, HasSubstr("expands to 300 ACL entries"));
  EXPECT_THAT(errs[0].reason, HasSubstr("10 source(s) x 10 destination(s)"));
  EXPECT_THAT(errs[0].reason, HasSubstr("with the 2 entries of the rules before it"));
  EXPECT_THAT(errs[0].reason, HasSubstr("limit of 250"));
  opts.max_entries = 302;
  ConfigErrorList none;
  auto fw = compileFirewall(m, opts, &none);
  ASSERT_TRUE(fw.ok()) << fw.status();
  EXPECT_EQ((*fw)->v4.size() + (*fw)->v6.size(), 302u);
  EXPECT_EQ(kMaxFirewallEntries, 500'000u);
}

TEST(FirewallCompiler, TheConfiguredBudgetIsCountedBeforeBuildingAndValidateAgrees) {
  // The shape: an IPv6 set of 200 prefixes, a port range, countries; one rule has
  // the set as destination too (200 x 200 pairs).
  FirewallModel m;
  m.geoip_database = "/db.mmdb";
  std::vector<IpPrefix> set;
  for (int i = 0; i < 200; ++i) set.push_back(P("2001:db8:" + std::to_string(i) + "::/48"));
  FirewallRule a = R("a"), b = R("b"), c = R("c");
  for (FirewallRule* r : {&a, &b, &c}) {
    r->protocols = {6};
    r->src = set;
    r->dst_ports = {{1, 8029}};
    r->src_countries = {CountryCode{'C', 'N'}, CountryCode{'R', 'U'}};
  }
  c.dst = set;
  m.rules = {a, b, c};
  m.max_acl_entries = 40'000;
  ConfigErrorList errs;
  auto fw = compileFirewall(m, FirewallCompileOptions{}, &errs);
  ASSERT_FALSE(fw.ok());
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].rule, "c");
  EXPECT_THAT(errs[0].reason, HasSubstr("expands to 40000 ACL entries"));
  EXPECT_THAT(errs[0].reason, HasSubstr("with the 400 entries of the rules before it"));
  EXPECT_THAT(errs[0].reason,
              HasSubstr("exceeds the limit of 40000 entries (firewall.max_acl_entries)"));
  ConfigErrorList v;
  validateFirewall(m, v);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].reason, errs[0].reason);
  // The model's budget wins over the compile options' default either way.
  m.max_acl_entries = 40'400;
  errs.clear();
  fw = compileFirewall(m, FirewallCompileOptions{.max_entries = 10}, &errs);
  ASSERT_TRUE(fw.ok()) << fw.status();
  EXPECT_EQ((*fw)->v6.size(), 40'400u);
  EXPECT_TRUE((*fw)->v4.empty());
}

TEST(FirewallCompiler, BadDefaultsAreErrors) {
  FirewallModel m;
  m.default_b_to_a = static_cast<FwAction>(9);
  auto errs = compileErrors(m);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].field, "firewall.default_b_to_a");
}

TEST(FirewallCompiler, ReferenceMatchAgreesWithRuleSemantics) {
  // deny ssh from 10/8 to 192.0.2.0/24 (prio 10), allow everything from 10.1/16 (prio 20).
  FirewallModel m;
  FirewallRule ssh = R("ssh-block", 10, FwAction::kDeny);
  ssh.protocols = {6};
  ssh.src = {P("10.0.0.0/8")};
  ssh.dst = {P("192.0.2.0/24")};
  ssh.dst_ports = {{22, 22}};
  FirewallRule allow = R("allow-lab", 20, FwAction::kAllow);
  allow.src = {P("10.1.0.0/16")};
  m.rules = {allow, ssh};
  auto fw = compileOk(m);
  ASSERT_TRUE(fw);
  FwQuery q;
  q.proto = 6;
  q.src = P("10.1.2.3").addr;
  q.dst = P("192.0.2.9").addr;
  q.sport = 40000;
  q.dport = 22;
  int64_t r = referenceMatch(*fw, q);
  ASSERT_GE(r, 0);
  EXPECT_EQ(fw->rules[r].id, "ssh-block");
  q.dport = 80;
  r = referenceMatch(*fw, q);
  ASSERT_GE(r, 0);
  EXPECT_EQ(fw->rules[r].id, "allow-lab");
  EXPECT_EQ(fw->rules[r].action, FwAction::kAllow);
  q.src = P("10.2.0.1").addr;
  EXPECT_EQ(referenceMatch(*fw, q), -1);
}

TEST(CompileSnapshot, SetsTheFirewallAndSharesItWhenUnchanged) {
  ConfigModel model;
  model.version = 3;
  model.firewall.rules = {R("a")};
  ConfigErrorList errors;
  auto s1 = compileSnapshot(model, 1, &errors);
  ASSERT_TRUE(s1.ok()) << s1.status();
  ASSERT_TRUE((*s1)->firewall);
  EXPECT_EQ((*s1)->firewall->rules.size(), 1u);

  // No firewall section: an empty compiled firewall with the defaults.
  auto s0 = compileSnapshot(ConfigModel{}, 1);
  ASSERT_TRUE(s0.ok());
  ASSERT_TRUE((*s0)->firewall);
  EXPECT_TRUE((*s0)->firewall->rules.empty());
  EXPECT_EQ((*s0)->firewall->default_action[0], FwAction::kAllow);

  FirewallReuse reuse{model.firewall, (*s1)->firewall};
  ConfigModel next = model;
  next.dataplane.udp_s = 33;
  auto s2 = compileSnapshot(next, 2, &errors, &reuse);
  ASSERT_TRUE(s2.ok());
  EXPECT_EQ((*s2)->firewall.get(), (*s1)->firewall.get());
  next.firewall.rules.push_back(R("b"));
  auto s3 = compileSnapshot(next, 3, &errors, &reuse);
  ASSERT_TRUE(s3.ok());
  EXPECT_NE((*s3)->firewall.get(), (*s1)->firewall.get());
  EXPECT_EQ((*s3)->firewall->rules.size(), 2u);

  // A firewall error fails the snapshot, with dataplane errors alongside.
  ConfigModel bad;
  bad.dataplane.udp_s = 0;
  bad.firewall.rules = {R("x"), R("x")};
  ConfigErrorList errs;
  auto sb = compileSnapshot(bad, 1, &errs);
  ASSERT_FALSE(sb.ok());
  ASSERT_EQ(errs.size(), 2u);
  EXPECT_EQ(errs[0].section, "dataplane");
  EXPECT_EQ(errs[1].section, "firewall");
}

}  // namespace
}  // namespace dpu::rules
