// Firewall rules as people write them, and the parsers that turn them into the model
// (rules/model/firewall.h). Pure C++: no DPDK, no gRPC, no proto; the control side maps
// ApplianceConfig.firewall onto FirewallRuleSpec and reads the files named in the config.
//
// Three sources, one spec:
//   - the config document (firewall.rules[i], proto field names),
//   - text rule files, one rule per line,
//   - JSON rule files (a DOCA-firewall-like list).
// Parsing checks the syntax of a source; convertRuleSpec() checks the values (protocols,
// prefixes, named sets, ports, countries, VLAN) and the rule's consistency. Every error is a
// ConfigError with section "firewall", the rule id, its index, file:line for files, the
// field as that source names it, and the reason.
//
// ---- Text format ------------------------------------------------------------------------
//   ACTION PROTO SRC SPORT -> DST DPORT [prio N] [id ID] [dir a->b|b->a|both] [vlan N]
//       [tunnel N] [src-country CC,CC] [dst-country CC,CC] [desc "text"]
//   ACTION  allow | deny | reject
//   PROTO   tcp,udp,icmp,icmpv6,sctp,gre or numbers 0..255, comma-separated, or any
//   SRC/DST prefixes ("10.0.0.0/8", "2001:db8::/32"), bare addresses, "@set", comma-
//           separated, or any
//   SPORT/DPORT  ports and ranges ("80", "1024-65535"), comma-separated, or any
//   Options come after DPORT in any order, each at most once ("priority" and "direction"
//   are accepted for "prio" and "dir"). desc takes one "quoted string" (\" and \\ escape) or
//   one word. '#' at the start of a word starts a comment; blank lines are ignored.
//   Example: deny tcp 10.0.0.0/8 any -> 192.0.2.0/24 22 prio 10 id ssh-block
//   A rule without an id gets "<file name>:<line>". Field names in errors: action, protocol,
//   src, src_port, dst, dst_port, prio, id, dir, vlan, tunnel, src-country, dst-country, desc.
//
// ---- JSON format ------------------------------------------------------------------------
//   {"rules": [ RULE, ... ]}   or a bare [ RULE, ... ]
//   RULE is an object with these keys (all optional; unknown keys are an error):
//     "id"          string or integer           default "<file name>#<n>" (n = 1, 2, ...)
//     "action"      "allow" | "deny" | "reject" default "deny" (DOCA firewall rules drop)
//     "priority"    integer (int32)             default 0
//     "direction"   "both" | "a->b" | "b->a"    default "both" ("a_to_b"/"b_to_a" too)
//     "protocol"    "tcp", 6, "tcp,udp" or an array of names/numbers; default any
//     "src_ip", "dst_ip"      "10.0.0.0/8", "2001:db8::1", "@set", "any", comma-separated
//                             strings or an array of strings; default any
//     "src_port", "dst_port"  80, "1-1024", "80,443" or an array of numbers/strings;
//                             default any
//     "vlan"        integer 0..4095             default any
//     "tunnel_id"   integer 0..4294967295 (VNI / GRE key, 0 = none)  default any
//     "src_country", "dst_country"  "US", "US,DE" or an array; default any
//     "description" string
//   Example: {"rules": [{"id": "ssh", "src_ip": "10.0.0.0/8", "dst_ip": "192.0.2.0/24",
//             "dst_port": 22, "protocol": "tcp", "action": "deny", "priority": 10}]}
//   Values are case-insensitive except ids, set names and country codes. Field names in
//   errors: "rules[3].dst_port"; the line is where the key (or the rule) starts.
//
// ---- CIDR list files (IP sets) ----------------------------------------------------------
//   One prefix or bare address per line; '#' starts a comment; blank lines are ignored.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "rules/compile/config_errors.h"
#include "rules/model/firewall.h"

namespace dpu::rules {

// How a rule was written: decides how errors name its fields.
enum class RuleSyntax : uint8_t { kConfig = 0, kText = 1, kJson = 2 };

// The fields of a rule, for error messages.
enum class RuleField : uint8_t {
  kId, kPriority, kAction, kDirection, kProtocols, kSrc, kDst, kSrcPorts, kDstPorts, kVlan,
  kSrcCountries, kDstCountries, kDescription, kRule /* the rule as a whole */, kTunnelId
};

// "firewall.rules[3].dst_ports" (config), "dst_port" (text), "rules[3].dst_port" (JSON).
std::string ruleFieldName(RuleSyntax syntax, int index, RuleField field);

// A rule as written: lists of strings exactly as in the source (no "any"; an empty list
// means any). action is unset only when the source did not give one.
struct FirewallRuleSpec {
  std::string id;
  int32_t priority = 0;
  std::optional<FwAction> action;
  FwDirection direction = FwDirection::kBoth;
  std::vector<std::string> protocols;
  std::vector<std::string> src;
  std::vector<std::string> dst;
  std::vector<std::string> src_ports;
  std::vector<std::string> dst_ports;
  std::optional<uint32_t> vlan;
  std::optional<uint64_t> tunnel_id;  // as written (checked against 32 bits by convertRuleSpec)
  std::vector<std::string> src_countries;
  std::vector<std::string> dst_countries;
  std::string description;
  // Where it came from.
  RuleSyntax syntax = RuleSyntax::kConfig;
  std::string file;
  int line = 0;          // 1-based line in `file`; 0 when not from a file
  int index = -1;        // position in its list (firewall.rules, or the file's rules)
  // Line of each field in a JSON file (0 = the rule's line).
  std::map<RuleField, int> field_lines;

  bool operator==(const FirewallRuleSpec&) const = default;
};

// Named IP sets (firewall.ip_sets), referenced as "@name".
using IpSetTable = std::map<std::string, std::vector<IpPrefix>, std::less<>>;

// ---- values ------------------------------------------------------------------------------

// "10.0.0.0/8", "10.1.2.3" (/32), "2001:db8::/32", "::1" (/128). Host bits set is an error:
// "10.0.0.1/8 has host bits set (did you mean 10.0.0.0/8?)".
absl::StatusOr<IpPrefix> parsePrefix(std::string_view text);
// Parses an address only (no length): v4 in bytes 0..3.
absl::StatusOr<IpPrefix> parseAddress(std::string_view text);
// "10.0.0.0/8"; "2001:db8::/32"; a host prefix without "/32" or "/128" when bare_hosts.
std::string formatPrefix(const IpPrefix& p, bool bare_hosts = false);
// Zeroes the host bits.
IpPrefix maskPrefix(IpPrefix p);
bool prefixHasHostBits(const IpPrefix& p);

// "tcp" (6), "udp" (17), "icmp" (1), "icmpv6" (58, "ipv6-icmp" too), "sctp" (132), "gre"
// (47), or a number 0..255; case-insensitive.
absl::StatusOr<uint8_t> parseProtocol(std::string_view text);
// "tcp", ..., or the number.
std::string protocolName(uint8_t proto);

// "80", "1024-65535" (inclusive; low <= high).
absl::StatusOr<PortRange> parsePortRange(std::string_view text);
std::string formatPortRange(const PortRange& r);

// Two upper-case letters A..Z.
absl::StatusOr<CountryCode> parseCountry(std::string_view text);
std::string countryString(const CountryCode& cc);

// "allow" | "deny" | "reject" (case-insensitive).
absl::StatusOr<FwAction> parseAction(std::string_view text);
const char* actionName(FwAction a);   // "allow", "deny", "reject"
// "both" | "a->b" | "b->a" (also "a_to_b", "b_to_a", "a2b", "b2a"; case-insensitive).
absl::StatusOr<FwDirection> parseDirection(std::string_view text);
const char* directionName(FwDirection d);  // "both", "a->b", "b->a"

// Ids: 1..128 printable ASCII characters without spaces, ',' or '"'.
absl::Status checkRuleId(std::string_view id);
// Set names: 1..64 of letters, digits, '_', '-', '.'.
absl::Status checkSetName(std::string_view name);

// ---- sources -----------------------------------------------------------------------------

// A text rule file. On any error returns InvalidArgument listing them; `errors` (optional)
// receives each. `file` names the source in errors and default ids ("<base name>:<line>");
// when empty, rules without an id keep an empty id.
absl::StatusOr<std::vector<FirewallRuleSpec>> parseTextRules(std::string_view text,
                                                             const std::string& file,
                                                             ConfigErrorList* errors = nullptr);
// One rule in the text format (e.g. `dpuctl fw add "..."`); `line` for errors (0 = none).
absl::StatusOr<FirewallRuleSpec> parseTextRule(std::string_view text, const std::string& file,
                                               int line, ConfigErrorList* errors = nullptr);
// A JSON rule file (schema above).
absl::StatusOr<std::vector<FirewallRuleSpec>> parseJsonRules(std::string_view text,
                                                             const std::string& file,
                                                             ConfigErrorList* errors = nullptr);
// Text for "*.txt"... any name not ending in ".json"; JSON for "*.json".
bool isJsonRuleFile(std::string_view path);
// Reads `path` and parses it by its name. A file that cannot be read is NotFound /
// InvalidArgument naming it (and one ConfigError with `field`, when given, e.g.
// "firewall.rule_files[0]").
absl::StatusOr<std::vector<FirewallRuleSpec>> loadRuleFile(const std::string& path,
                                                           ConfigErrorList* errors = nullptr,
                                                           const std::string& field = "");

// A CIDR list (IP set file). `set` names the set in errors (ConfigError.rule).
absl::StatusOr<std::vector<IpPrefix>> parseCidrList(std::string_view text,
                                                    const std::string& file,
                                                    const std::string& set = "",
                                                    ConfigErrorList* errors = nullptr);
absl::StatusOr<std::vector<IpPrefix>> loadCidrListFile(const std::string& path,
                                                       const std::string& set = "",
                                                       ConfigErrorList* errors = nullptr,
                                                       const std::string& field = "");

// The rule in the text format, one line (round-trips through parseTextRule).
std::string formatTextRule(const FirewallRuleSpec& spec);

// ---- to the model ------------------------------------------------------------------------

// Converts one rule: parses every value, resolves "@set" against `sets`, and checks the
// rule on its own (checkFirewallRule in firewall_compiler.h) with this source's field
// names. `geoip_configured` says whether a GeoIP database is set (countries need one).
// Returns nullopt when anything is wrong; every problem is appended to `errors`.
std::optional<FirewallRule> convertRuleSpec(const FirewallRuleSpec& spec, const IpSetTable& sets,
                                            bool geoip_configured, ConfigErrorList& errors);

// Converts a list (e.g. one file's rules); InvalidArgument listing every error when any rule
// is bad.
absl::StatusOr<std::vector<FirewallRule>> rulesFromSpecs(
    const std::vector<FirewallRuleSpec>& specs, const IpSetTable& sets, bool geoip_configured,
    ConfigErrorList* errors = nullptr);

}  // namespace dpu::rules
