// dpuctl's firewall and GeoIP pieces that do not talk to the network: rules in the one-line
// text syntax of rule files (rules/compile/firewall_parsers.h) to and from the API's
// FirewallRule, rule files read for `fw load`, and the human rendering of `fw list` and
// `geo lookup`.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/appliance_api.pb.h"

namespace dpu::cli {

// "deny tcp 10.0.0.0/8 any -> 192.0.2.0/24 22 prio 10 id ssh-block" -> the API's rule. The
// rule must have an id. Syntax and values are checked here (the server checks again, with
// the whole configuration); errors name the field ("dst_port: ...").
absl::StatusOr<v1::FirewallRule> firewallRuleFromText(const std::string& text);

// Every rule of a rule file (text, or JSON for *.json), as API rules in file order; named
// sets ("@corp") stay references for the server to resolve. On errors the status lists
// them, and `errors` (optional) gets one line each ("rules.txt:3: rule 'x': dst_port: ...").
// `lines` (optional) receives each rule's line in the file.
absl::StatusOr<std::vector<v1::FirewallRule>> firewallRulesFromFile(
    const std::string& path, std::vector<std::string>* errors, std::vector<int>* lines);

// The rule in the text syntax (round-trips through firewallRuleFromText).
std::string firewallRuleText(const v1::FirewallRule& rule);
// The match part only: "tcp 10.0.0.0/8 any -> 192.0.2.0/24 22 dir a->b" (no action, prio,
// id or description).
std::string firewallMatchText(const v1::FirewallRule& rule);

// `dpuctl fw list`: a summary line (version, defaults, GeoIP, ACL entries) and a table, one
// row per rule in evaluation order with its counters.
std::string formatFirewallRules(const v1::ListFirewallRulesResponse& r);
// `dpuctl geo lookup`.
std::string formatLookupCountry(const v1::LookupCountryResponse& r);

}  // namespace dpu::cli
