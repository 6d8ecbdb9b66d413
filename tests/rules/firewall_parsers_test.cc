// Rule files and values: the text format, the JSON format, CIDR lists, and the conversion
// into the model. Every bad field gives an error naming the file, the line, the rule and
// the field as that source names it.
#include "rules/compile/firewall_parsers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "rules/compile/firewall_compiler.h"

namespace dpu::rules {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The one error a bad text rule gives.
ConfigError textError(const std::string& line, const IpSetTable& sets = {}, bool geoip = false) {
  ConfigErrorList errors;
  auto specs = parseTextRules(line, "/etc/dpu/rules.txt", &errors);
  if (specs.ok()) {
    EXPECT_EQ(specs->size(), 1u) << line;
    auto rules = rulesFromSpecs(*specs, sets, geoip, &errors);
    EXPECT_FALSE(rules.ok()) << line;
  }
  EXPECT_EQ(errors.size(), 1u) << line;
  if (errors.empty()) return {};
  for (const auto& e : errors) {
    EXPECT_EQ(e.section, "firewall");
    EXPECT_EQ(e.file, "/etc/dpu/rules.txt");
    EXPECT_EQ(e.line, 1) << line;
    EXPECT_FALSE(e.field.empty());
  }
  return errors[0];
}

std::vector<FirewallRule> textRules(const std::string& text, const IpSetTable& sets = {},
                                    bool geoip = false) {
  ConfigErrorList errors;
  auto specs = parseTextRules(text, "rules.txt", &errors);
  EXPECT_TRUE(specs.ok()) << specs.status();
  if (!specs.ok()) return {};
  auto rules = rulesFromSpecs(*specs, sets, geoip, &errors);
  EXPECT_TRUE(rules.ok()) << rules.status();
  return rules.ok() ? *rules : std::vector<FirewallRule>{};
}

IpPrefix pfx(const std::string& s) {
  auto p = parsePrefix(s);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : IpPrefix{};
}

// --- values ----------------------------------------------------------------------------------

TEST(Values, Prefixes) {
  IpPrefix p = pfx("10.0.0.0/8");
  EXPECT_FALSE(p.v6);
  EXPECT_EQ(p.len, 8);
  EXPECT_EQ(p.addr[0], 10);
  EXPECT_EQ(pfx("192.0.2.7").len, 32);
  EXPECT_EQ(pfx("2001:db8::/32").len, 32);
  EXPECT_TRUE(pfx("2001:db8::/32").v6);
  EXPECT_EQ(pfx("::1").len, 128);
  EXPECT_EQ(pfx("0.0.0.0/0").len, 0);
  EXPECT_EQ(formatPrefix(pfx("2001:db8::/32")), "2001:db8::/32");
  EXPECT_EQ(formatPrefix(pfx("192.0.2.7"), true), "192.0.2.7");
  EXPECT_EQ(formatPrefix(pfx("192.0.2.7")), "192.0.2.7/32");

  EXPECT_EQ(parsePrefix("10.0.0.1/8").status().message(),
            "10.0.0.1/8 has host bits set (did you mean 10.0.0.0/8?)");
  EXPECT_EQ(parsePrefix("2001:db8::1/64").status().message(),
            "2001:db8::1/64 has host bits set (did you mean 2001:db8::/64?)");
  EXPECT_THAT(parsePrefix("10.0.0.0/33").status().message(), HasSubstr("not in 0..32"));
  EXPECT_THAT(parsePrefix("::/129").status().message(), HasSubstr("not in 0..128"));
  EXPECT_THAT(parsePrefix("10.0.0.256").status().message(), HasSubstr("not an IPv4 or IPv6"));
  EXPECT_FALSE(parsePrefix("10.0.0/8").ok());
  EXPECT_FALSE(parsePrefix("10.0.0.0/").ok());
  EXPECT_FALSE(parsePrefix("10.0.0.0/+8").ok());
  EXPECT_FALSE(parsePrefix("fe80::1%eth0").ok());
  EXPECT_FALSE(parsePrefix("").ok());
}

TEST(Values, ProtocolsPortsCountriesActions) {
  EXPECT_EQ(*parseProtocol("TCP"), 6);
  EXPECT_EQ(*parseProtocol("icmpv6"), 58);
  EXPECT_EQ(*parseProtocol("ipv6-icmp"), 58);
  EXPECT_EQ(*parseProtocol("sctp"), 132);
  EXPECT_EQ(*parseProtocol("gre"), 47);
  EXPECT_EQ(*parseProtocol("255"), 255);
  EXPECT_FALSE(parseProtocol("256").ok());
  EXPECT_FALSE(parseProtocol("-1").ok());
  EXPECT_FALSE(parseProtocol("tcpp").ok());
  EXPECT_EQ(protocolName(17), "udp");
  EXPECT_EQ(protocolName(89), "89");

  EXPECT_EQ(parsePortRange("80")->lo, 80);
  EXPECT_EQ(parsePortRange("1024-65535")->hi, 65535);
  EXPECT_EQ(parsePortRange("100-50").status().message(),
            "port range 100-50: low end 100 is above high end 50");
  EXPECT_FALSE(parsePortRange("65536").ok());
  EXPECT_FALSE(parsePortRange("1-").ok());
  EXPECT_FALSE(parsePortRange("http").ok());
  EXPECT_EQ(formatPortRange({5, 5}), "5");
  EXPECT_EQ(formatPortRange({5, 9}), "5-9");

  EXPECT_EQ(countryString(*parseCountry("US")), "US");
  EXPECT_FALSE(parseCountry("us").ok());
  EXPECT_FALSE(parseCountry("USA").ok());
  EXPECT_FALSE(parseCountry("U1").ok());

  EXPECT_EQ(*parseAction("REJECT"), FwAction::kReject);
  EXPECT_FALSE(parseAction("drop").ok());
  EXPECT_EQ(*parseDirection("a->b"), FwDirection::kAtoB);
  EXPECT_EQ(*parseDirection("B_TO_A"), FwDirection::kBtoA);
  EXPECT_FALSE(parseDirection("in").ok());

  EXPECT_TRUE(checkRuleId("ssh-block").ok());
  EXPECT_FALSE(checkRuleId("a b").ok());
  EXPECT_FALSE(checkRuleId("a,b").ok());
  EXPECT_FALSE(checkRuleId(std::string(129, 'x')).ok());
  EXPECT_FALSE(checkRuleId("#x").ok());
  EXPECT_TRUE(checkSetName("corp-nets_v4.1").ok());
  EXPECT_FALSE(checkSetName("corp nets").ok());
}

// --- text format -----------------------------------------------------------------------------

TEST(TextRules, TheIssueExample) {
  auto rules = textRules("deny tcp 10.0.0.0/8 any -> 192.0.2.0/24 22 prio 10 id ssh-block\n");
  ASSERT_EQ(rules.size(), 1u);
  const FirewallRule& r = rules[0];
  EXPECT_EQ(r.id, "ssh-block");
  EXPECT_EQ(r.priority, 10);
  EXPECT_EQ(r.action, FwAction::kDeny);
  EXPECT_EQ(r.direction, FwDirection::kBoth);
  EXPECT_THAT(r.protocols, ElementsAre(6));
  ASSERT_EQ(r.src.size(), 1u);
  EXPECT_EQ(formatPrefix(r.src[0]), "10.0.0.0/8");
  EXPECT_TRUE(r.src_ports.empty());
  EXPECT_EQ(formatPrefix(r.dst[0]), "192.0.2.0/24");
  ASSERT_EQ(r.dst_ports.size(), 1u);
  EXPECT_EQ(r.dst_ports[0].lo, 22);
  EXPECT_EQ(r.file, "rules.txt");
  EXPECT_EQ(r.line, 1);
}

TEST(ByteOrderMark, AtTheStartOfARuleOrCidrFileIsSkipped) {
  const std::string bom = "\xEF\xBB\xBF";
  auto text = parseTextRules(bom + "deny tcp any any -> any 22 id ssh\n", "bom.rules");
  ASSERT_TRUE(text.ok()) << text.status();
  ASSERT_EQ(text->size(), 1u);
  EXPECT_EQ((*text)[0].id, "ssh");
  EXPECT_EQ((*text)[0].line, 1);
  auto json = parseJsonRules(bom + R"({"rules": [{"id": "j", "dst_port": 22, "protocol": "tcp"}]})",
                             "bom.json");
  ASSERT_TRUE(json.ok()) << json.status();
  ASSERT_EQ(json->size(), 1u);
  EXPECT_EQ((*json)[0].id, "j");
  auto cidr = parseCidrList(bom + "10.0.0.0/8\n", "bom.txt");
  ASSERT_TRUE(cidr.ok()) << cidr.status();
  EXPECT_EQ(cidr->size(), 1u);
  // Only at the start: a BOM inside the text is still an error.
  EXPECT_FALSE(parseTextRules("deny tcp any any -> any 22 id a\n" + bom + "deny tcp any any -> any 23 id b\n",
                              "bom.rules").ok());
}

TEST(TextRules, FullGrammarCommentsAndDefaultIds) {
  const std::string text =
      "# corporate policy\n"
      "\n"
      "allow tcp,udp @corp,2001:db8::/32 1024-65535 -> any 53,80,443 dir a->b vlan 100 "
      "src-country US,DE dst-country FR desc \"DNS and \\\"web\\\"\" priority -5\n"
      "   reject icmp any any -> 192.0.2.1 any   # trailing comment\n"
      "deny 47 any any -> any any id gre#1 direction b->a description tunnels\n";
  IpSetTable sets{{"corp", {pfx("10.0.0.0/8"), pfx("172.16.0.0/12")}}};
  auto rules = textRules(text, sets, /*geoip=*/true);
  ASSERT_EQ(rules.size(), 3u);
  const FirewallRule& a = rules[0];
  EXPECT_EQ(a.id, "rules.txt:3");
  EXPECT_EQ(a.line, 3);
  EXPECT_EQ(a.priority, -5);
  EXPECT_EQ(a.action, FwAction::kAllow);
  EXPECT_EQ(a.direction, FwDirection::kAtoB);
  EXPECT_THAT(a.protocols, ElementsAre(6, 17));
  ASSERT_EQ(a.src.size(), 3u);  // the set's two prefixes, then the IPv6 one
  EXPECT_EQ(formatPrefix(a.src[1]), "172.16.0.0/12");
  EXPECT_TRUE(a.src[2].v6);
  EXPECT_TRUE(a.dst.empty());
  EXPECT_EQ(a.src_ports[0].lo, 1024);
  EXPECT_EQ(a.dst_ports.size(), 3u);
  EXPECT_EQ(*a.vlan, 100);
  EXPECT_EQ(a.src_countries.size(), 2u);
  EXPECT_EQ(countryString(a.dst_countries[0]), "FR");
  EXPECT_EQ(a.description, "DNS and \"web\"");
  EXPECT_EQ(rules[1].id, "rules.txt:4");
  EXPECT_EQ(rules[1].action, FwAction::kReject);
  EXPECT_EQ(formatPrefix(rules[1].dst[0]), "192.0.2.1/32");
  EXPECT_EQ(rules[2].id, "gre#1");
  EXPECT_EQ(rules[2].direction, FwDirection::kBtoA);
  EXPECT_EQ(rules[2].description, "tunnels");
  EXPECT_THAT(rules[2].protocols, ElementsAre(47));
}

TEST(TextRules, FormatRoundTrips) {
  const std::string line =
      "allow tcp,udp 10.0.0.0/8,@corp 1024-65535 -> 2001:db8::/32 80,443 prio 7 id web dir b->a "
      "vlan 0 src-country US dst-country DE,FR desc \"a \\\"quoted\\\" \\\\ text\"";
  auto spec = parseTextRule(line, "", 0);
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::string again = formatTextRule(*spec);
  EXPECT_EQ(again, line);
  auto back = parseTextRule(again, "", 0);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, *spec);
  // Defaults are left out.
  auto minimal = parseTextRule("deny any any any -> any any id x", "", 0);
  ASSERT_TRUE(minimal.ok());
  EXPECT_EQ(formatTextRule(*minimal), "deny any any any -> any any id x");
}

// Quotes are for desc; elsewhere a quoted value must be one a bare word can hold, or the
// formatted rule would not parse back (found by tests/fuzz fwrules; regression input in
// tests/fuzz/regressions/fwrules/quoted-dst-ports-with-space).
TEST(TextRules, QuotedValuesOnlyWhereTheyFormatBack) {
  auto plain = parseTextRule("deny tcp \"10.0.0.0/8\" any -> any \"22\" id \"ssh\"", "", 0);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(formatTextRule(*plain), "deny tcp 10.0.0.0/8 any -> any 22 id ssh");
  for (const char* bad : {"deny tcp any any -> any \"quoted \\\"x\\\"\"",
                          "deny tcp \"10.0.0.0/8 10.1.0.0/16\" any -> any 22",
                          "deny tcp any any -> any 22 id \"a b\"",
                          "deny tcp any \"#1\" -> any 22",
                          "deny tcp any any -> any 22 src-country \"US, DE\""}) {
    ConfigErrorList errors;
    auto r = parseTextRule(bad, "", 0, &errors);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("only desc takes a quoted text")) << bad;
  }
}

// Every ASCII space character separates words, as trim() strips them from list items: a form
// feed before a quoted word made it a bare word holding quotes, and its formatted line did not
// parse (tests/fuzz fwrules; tests/fuzz/regressions/fwrules/formfeed-before-quoted-dst-ports).
TEST(TextRules, EveryAsciiSpaceSeparatesWords) {
  auto spaced = parseTextRule("deny\ftcp\vany any\r->\tany 22 id\f\"x\"", "", 0);
  ASSERT_TRUE(spaced.ok()) << spaced.status();
  EXPECT_EQ(formatTextRule(*spaced), "deny tcp any any -> any 22 id x");
  ConfigErrorList errors;
  auto r = parseTextRule("deny tcp any -42725 -> 3ted \f\"-\\\"\"", "", 0, &errors);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("only desc takes a quoted text"));
  // Nor may a quoted value hold one (its bare form would split there).
  auto split = parseTextRule("deny tcp an -42725 -> 2ted \"\\\f-\"", "", 0);
  ASSERT_FALSE(split.ok());
  EXPECT_THAT(std::string(split.status().message()), HasSubstr("only desc takes a quoted text"));
  auto q = parseTextRule("deny tcp any any -> any \"22\"\f id x", "", 0);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(formatTextRule(*q), "deny tcp any any -> any 22 id x");
}

TEST(TextRules, WithoutAFileAnIdIsRequired) {
  auto spec = parseTextRule("deny tcp any any -> any 22", "", 0);
  ASSERT_TRUE(spec.ok());
  EXPECT_TRUE(spec->id.empty());
  ConfigErrorList errors;
  EXPECT_FALSE(convertRuleSpec(*spec, {}, false, errors));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "id");
  EXPECT_THAT(errors[0].reason, HasSubstr("required"));
}

TEST(TextRules, EveryBadFieldIsNamed) {
  struct Case {
    std::string line, field, reason;
  };
  const std::vector<Case> cases = {
      {"drop tcp any any -> any 22 id a", "action", "'drop' is not an action"},
      {"deny tcpp any any -> any 22 id a", "protocol", "'tcpp' is not a protocol"},
      {"deny tcp 10.0.0.1/8 any -> any 22 id a", "src",
       "10.0.0.1/8 has host bits set (did you mean 10.0.0.0/8?)"},
      {"deny tcp any 70000 -> any 22 id a", "src_port", "'70000' is not a port"},
      {"deny tcp any any -> 300.1.1.1 22 id a", "dst", "'300.1.1.1' is not an IPv4"},
      {"deny tcp any any -> any 22-20 id a", "dst_port", "low end 22 is above high end 20"},
      {"deny icmp any any -> any 22 id a", "dst_port", "ports only apply to tcp, udp and sctp"},
      {"deny tcp any any -> any 22 prio high id a", "prio", "'high' is not a priority"},
      {"deny tcp any any -> any 22 id a dir up", "dir", "'up' is not a direction"},
      {"deny tcp any any -> any 22 id a vlan x", "vlan", "'x' is not a VLAN id"},
      {"deny tcp any any -> any 22 id a vlan 4096", "vlan", "4096 is out of range [0, 4095]"},
      {"deny tcp any any -> any 22 id a tunnel x", "tunnel", "'x' is not a tunnel id"},
      {"deny tcp any any -> any 22 id a tunnel 4294967296", "tunnel",
       "4294967296 is out of range [0, 4294967295]"},
      {"deny tcp any any -> any 22 id a src-country us", "src-country",
       "'us' is not an ISO 3166-1 alpha-2"},
      {"deny tcp any any -> any 22 id a dst-country DE", "dst-country",
       "matches countries but no GeoIP database"},
      {"deny tcp any,10.0.0.0/8 any -> any 22 id a", "src", "'any' cannot be combined"},
      {"deny tcp 10.0.0.0/8,,10.1.0.0/16 any -> any 22 id a", "src", "empty item"},
      {"deny tcp any any -> any 22 id a colour red", "rule", "unknown option 'colour'"},
      {"deny tcp any any -> any 22 id a prio 1 prio 2", "prio", "given more than once"},
      {"deny tcp any any -> any 22 id a prio", "prio", "needs a value"},
      {"deny tcp any any any 22 id a", "rule", "expected 'ACTION PROTO SRC SPORT -> DST DPORT"},
      {"deny tcp any any -> any", "rule", "expected 'ACTION PROTO SRC SPORT -> DST DPORT"},
      {"deny tcp any any -> any 22 id a desc \"open", "rule", "unterminated quoted string"},
      {"deny tcp 10.0.0.0/8 any -> 2001:db8::/32 22 id a", "dst", "can never match"},
      {"deny tcp @nope any -> any 22 id a", "src", "unknown IP set '@nope' (defined: @corp)"},
      {"deny tcp any any -> any 22 id a,b", "id", "ids are printable characters"},
  };
  IpSetTable sets{{"corp", {pfx("10.0.0.0/8")}}};
  for (const Case& c : cases) {
    ConfigError e = textError(c.line, sets);
    EXPECT_EQ(e.field, c.field) << c.line;
    EXPECT_THAT(e.reason, HasSubstr(c.reason)) << c.line;
  }
  // The error names the rule, even when the id comes after the bad field.
  ConfigError e = textError("deny tcpp any any -> any 22 id late");
  EXPECT_EQ(e.rule, "late");
  EXPECT_EQ(formatError(e),
            "/etc/dpu/rules.txt:1: rule 'late': protocol: 'tcpp' is not a protocol (tcp, udp, "
            "icmp, icmpv6, sctp, gre or 0..255)");
}

TEST(TextRules, AllErrorsOfAFileWithTheirLines) {
  const std::string text =
      "deny tcp any any -> any 22 id ok\n"
      "# fine\n"
      "deny tcp any any -> any 99999 id bad1\n"
      "\n"
      "nonsense\n"
      "allow tcp any any -> any 1 id x prio\n";
  ConfigErrorList errors;
  auto specs = parseTextRules(text, "f.rules", &errors);
  ASSERT_FALSE(specs.ok());
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].line, 5);
  EXPECT_EQ(errors[0].rule, "f.rules:5");
  EXPECT_EQ(errors[0].field, "rule");
  EXPECT_EQ(errors[1].line, 6);
  EXPECT_EQ(errors[1].rule, "x");
  EXPECT_EQ(errors[1].field, "prio");
  EXPECT_THAT(std::string(specs.status().message()), HasSubstr("2 errors"));

  // The syntax of the first lines is fine; their values are checked on conversion.
  errors.clear();
  specs = parseTextRules(text.substr(0, text.find("nonsense")), "f.rules", &errors);
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 2u);
  EXPECT_EQ((*specs)[1].index, 1);
  EXPECT_FALSE(rulesFromSpecs(*specs, {}, false, &errors).ok());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].line, 3);
  EXPECT_EQ(errors[0].rule, "bad1");
  EXPECT_EQ(errors[0].index, 1);
  EXPECT_EQ(errors[0].field, "dst_port");
}

TEST(TextRules, AFileOfGarbageStopsAfterAHundredErrors) {
  std::string text;
  for (int i = 0; i < 500; ++i) text += "this is not a rule\n";
  ConfigErrorList errors;
  EXPECT_FALSE(parseTextRules(text, "garbage", &errors).ok());
  ASSERT_EQ(errors.size(), 101u);
  EXPECT_EQ(errors.back().line, 100);
  EXPECT_THAT(errors.back().reason, HasSubstr("more than 100 errors"));
}

// --- JSON format -----------------------------------------------------------------------------

TEST(JsonRules, DocaStyleAndExtensions) {
  const std::string text = R"({
  "rules": [
    {"src_ip": "1.1.1.1", "dst_ip": "2.2.2.2", "src_port": 1234, "dst_port": 80,
     "protocol": "tcp"},
    {
      "id": "ssh-block",
      "src_ip": "10.0.0.0/8",
      "dst_ip": ["192.0.2.0/24", "2001:db8::/32"],
      "src_port": "1-1024",
      "dst_port": [22, "2222-2223"],
      "protocol": ["tcp", 132],
      "action": "REJECT",
      "priority": 5,
      "direction": "a_to_b",
      "vlan": 12,
      "src_country": "US,DE",
      "dst_country": ["FR"],
      "description": "no ssh"
    },
    {"id": 7, "action": "allow", "protocol": "icmp,icmpv6"}
  ]
})";
  ConfigErrorList errors;
  auto specs = parseJsonRules(text, "/x/doca.json", &errors);
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 3u);
  EXPECT_EQ((*specs)[0].id, "doca.json#1");
  EXPECT_EQ((*specs)[0].line, 3);
  EXPECT_EQ((*specs)[1].line, 5);
  EXPECT_EQ((*specs)[1].field_lines.at(RuleField::kDstPorts), 10);
  EXPECT_EQ((*specs)[2].id, "7");
  auto rules = rulesFromSpecs(*specs, {}, /*geoip=*/true, &errors);
  ASSERT_TRUE(rules.ok()) << rules.status();
  const FirewallRule& d = (*rules)[0];
  EXPECT_EQ(d.action, FwAction::kDeny);  // DOCA rules drop
  EXPECT_THAT(d.protocols, ElementsAre(6));
  EXPECT_EQ(d.src_ports[0].lo, 1234);
  EXPECT_EQ(d.file, "/x/doca.json");
  const FirewallRule& s = (*rules)[1];
  EXPECT_EQ(s.id, "ssh-block");
  EXPECT_EQ(s.action, FwAction::kReject);
  EXPECT_EQ(s.priority, 5);
  EXPECT_EQ(s.direction, FwDirection::kAtoB);
  EXPECT_EQ(*s.vlan, 12);
  EXPECT_THAT(s.protocols, ElementsAre(6, 132));
  EXPECT_EQ(s.dst.size(), 2u);
  EXPECT_EQ(s.dst_ports[1].hi, 2223);
  EXPECT_EQ(s.src_countries.size(), 2u);
  EXPECT_EQ(s.description, "no ssh");
  EXPECT_THAT((*rules)[2].protocols, ElementsAre(1, 58));

  // A bare array works too.
  auto bare = parseJsonRules(R"([{"id": "a", "dst_port": 53}])", "b.json");
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ((*bare)[0].dst_ports, std::vector<std::string>{"53"});
}

TEST(JsonRules, ErrorsNameFileLineAndField) {
  const std::string text =
      "{\"rules\": [\n"                                   // 1
      "  {\"id\": \"a\",\n"                               // 2
      "   \"dst_port\": 70000,\n"                         // 3
      "   \"colour\": \"red\"},\n"                        // 4
      "  {\"id\": \"b\", \"priority\": \"high\"},\n"      // 5
      "  {\"id\": \"c\", \"vlan\": 4096,\n"               // 6
      "   \"protocol\": \"icmp\", \"dst_port\": 22},\n"   // 7
      "  {\"id\": \"d\", \"src_ip\": {\"x\": 1}},\n"      // 8
      "  {\"id\": \"e\", \"id\": \"f\"},\n"               // 9
      "  42\n"                                            // 10
      "]}\n";
  ConfigErrorList errors;
  auto specs = parseJsonRules(text, "r.json", &errors);
  ASSERT_FALSE(specs.ok());
  std::vector<std::string> got;
  for (const auto& e : errors) got.push_back(absl::StrCat(e.line, " ", e.field));
  EXPECT_THAT(got, ElementsAre("4 rules[0].colour", "5 rules[1].priority", "8 rules[3].src_ip",
                               "9 rules[4].id", "0 rules[5]"));
  EXPECT_THAT(errors[0].reason, HasSubstr("unknown key"));
  EXPECT_EQ(errors[0].rule, "a");
  EXPECT_THAT(errors[3].reason, HasSubstr("more than once"));

  // Values are checked on conversion, with the key's line.
  auto ok = parseJsonRules(
      "[{\"id\": \"a\",\n \"dst_port\": 70000},\n"
      " {\"id\": \"c\", \"vlan\": 4096,\n  \"protocol\": \"icmp\", \"dst_port\": 22}]",
      "r.json", &errors);
  ASSERT_TRUE(ok.ok()) << ok.status();
  errors.clear();
  EXPECT_FALSE(rulesFromSpecs(*ok, {}, false, &errors).ok());
  got.clear();
  for (const auto& e : errors) got.push_back(absl::StrCat(e.line, " ", e.field));
  EXPECT_THAT(got, ElementsAre("2 rules[0].dst_port", "3 rules[1].vlan"));
  // The vlan error stops the rule's conversion before the consistency checks; fixed, the
  // ports-with-icmp error shows with the dst_port line.
  auto ok2 = parseJsonRules("[{\"id\": \"c\",\n  \"protocol\": \"icmp\",\n \"dst_port\": 22}]",
                            "r.json");
  ASSERT_TRUE(ok2.ok());
  errors.clear();
  EXPECT_FALSE(rulesFromSpecs(*ok2, {}, false, &errors).ok());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].line, 3);
  EXPECT_EQ(errors[0].field, "rules[0].dst_port");
}

TEST(JsonRules, SyntaxErrorsHaveLineAndColumn) {
  ConfigErrorList errors;
  auto r = parseJsonRules("{\"rules\": [\n  {\"id\": \"a\",}\n]}", "bad.json", &errors);
  ASSERT_FALSE(r.ok());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].file, "bad.json");
  EXPECT_EQ(errors[0].line, 2);
  EXPECT_EQ(errors[0].field, "json");
  EXPECT_THAT(errors[0].reason, HasSubstr("line 2"));
  errors.clear();
  EXPECT_FALSE(parseJsonRules("{\"rule\": []}", "x.json", &errors).ok());
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].field, "rule");
  EXPECT_EQ(errors[1].field, "rules");
  errors.clear();
  EXPECT_FALSE(parseJsonRules("\"rules\"", "x.json", &errors).ok());
  EXPECT_EQ(errors.size(), 1u);
  EXPECT_TRUE(parseJsonRules("{\"rules\": []}", "x.json")->empty());
}

// --- CIDR lists and files --------------------------------------------------------------------

TEST(CidrList, CommentsBlankLinesAndErrors) {
  auto l = parseCidrList("# corp\n10.0.0.0/8\n\n  192.0.2.1  # host\n2001:db8::/32\r\n", "s.txt");
  ASSERT_TRUE(l.ok()) << l.status();
  ASSERT_EQ(l->size(), 3u);
  EXPECT_EQ((*l)[1].len, 32);
  EXPECT_TRUE((*l)[2].v6);
  ConfigErrorList errors;
  auto bad = parseCidrList("10.0.0.0/8\n10.0.0.1/8\nfoo\n", "s.txt", "corp", &errors);
  ASSERT_FALSE(bad.ok());
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].line, 2);
  EXPECT_EQ(errors[0].rule, "corp");
  EXPECT_EQ(errors[0].reason, "10.0.0.1/8 has host bits set (did you mean 10.0.0.0/8?)");
  EXPECT_EQ(errors[1].line, 3);
  EXPECT_EQ(formatError(errors[1]),
            "s.txt:3: rule 'corp': prefix: 'foo' is not an IPv4 or IPv6 address");
}

class RuleFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dpu_fw_parsers.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::string p = dir_ + "/" + name;
    std::ofstream(p) << text;
    return p;
  }
  std::string dir_;
};

TEST_F(RuleFiles, FormatFollowsTheName) {
  std::string t = write("a.rules", "deny tcp any any -> any 22 id t\n");
  std::string j = write("b.JSON", R"({"rules": [{"id": "j", "dst_port": 22}]})");
  auto a = loadRuleFile(t);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)[0].syntax, RuleSyntax::kText);
  auto b = loadRuleFile(j);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)[0].syntax, RuleSyntax::kJson);
  EXPECT_EQ((*b)[0].id, "j");
}

TEST_F(RuleFiles, UnreadableFilesAreNamed) {
  ConfigErrorList errors;
  auto m = loadRuleFile(dir_ + "/missing.rules", &errors, "firewall.rule_files[2]");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "firewall.rule_files[2]");
  EXPECT_EQ(errors[0].file, dir_ + "/missing.rules");
  EXPECT_THAT(errors[0].reason, HasSubstr("cannot open"));
  errors.clear();
  auto d = loadCidrListFile(dir_, "corp", &errors, "firewall.ip_sets[0].file");
  ASSERT_FALSE(d.ok());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].reason, "not a regular file");
  EXPECT_EQ(errors[0].rule, "corp");
  // A device is not read (it could be endless).
  EXPECT_FALSE(loadRuleFile("/dev/zero").ok());
}

// Issue 16: the tunnel id in every syntax, printed back, and its errors by field.
TEST(FirewallRules, TunnelId) {
  auto text = parseTextRules("deny tcp any any -> any 80 id t tunnel 4294967295\n", "r.txt");
  ASSERT_TRUE(text.ok()) << text.status();
  ASSERT_EQ((*text)[0].tunnel_id, 4294967295ull);
  EXPECT_THAT(formatTextRule((*text)[0]), HasSubstr(" tunnel 4294967295"));
  ConfigErrorList errors;
  auto r = rulesFromSpecs(*text, {}, false, &errors);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].tunnel_id, 4294967295u);
  auto json = parseJsonRules(R"([{"id": "j", "dst_port": 80, "tunnel_id": 100}, {"id": "k"}])", "r.json");
  ASSERT_TRUE(json.ok()) << json.status();
  r = rulesFromSpecs(*json, {}, false, &errors);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].tunnel_id, 100u);
  EXPECT_FALSE((*r)[1].tunnel_id.has_value());
  errors.clear();
  auto bad = parseJsonRules(R"([{"id": "j", "tunnel_id": -1}])", "r.json", &errors);
  EXPECT_FALSE(bad.ok());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "rules[0].tunnel_id");
  EXPECT_THAT(errors[0].reason, HasSubstr("expected an integer 0..4294967295"));
  errors.clear();
  auto big = parseJsonRules(R"([{"id": "j", "tunnel_id": 4294967296}])", "r.json", &errors);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_FALSE(rulesFromSpecs(*big, {}, false, &errors).ok());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field, "rules[0].tunnel_id");
  EXPECT_EQ(ruleFieldName(RuleSyntax::kConfig, 3, RuleField::kTunnelId), "firewall.rules[3].tunnel_id");
}

}  // namespace
}  // namespace dpu::rules
