// Validates a FirewallModel and expands it into the compiled form (rules/compiled/firewall.h):
// one AclEntry per combination of a rule's protocols, source and destination prefixes
// (same family only), source and destination port ranges and country ranges, with the
// rule's direction and VLAN, in separate IPv4 and IPv6 lists.
//
// Ranks: the rules are stably sorted by priority (lower first; ties keep model order:
// inline config rules, then rule files in order); rank r = position in that order, and
// CompiledFirewall::rules[r] describes the rule of rank r (AclEntry::rule == rank).
//
// Expansion details:
//   - ports without protocols mean tcp + udp; ports with a protocol other than tcp, udp or
//     sctp are an error;
//   - "icmp" (1) only goes into IPv4 entries and "icmpv6" (58) only into IPv6 entries;
//   - a family is present in a rule when its source, its destination (an empty list means
//     any address of both families) and its protocols allow it; a rule left with no family
//     can never match and is an error;
//   - prefixes covered by another prefix of the same list, and overlapping or adjacent port
//     ranges, are merged first (same matches, fewer entries);
//   - countries get indices 1..n in order of first use (rank order); a rule's country set
//     becomes as few index ranges as possible.
// The total number of entries is capped (the model's max_acl_entries, else
// kMaxFirewallEntries), counted before any entry is built; the rule that crosses the cap is
// named with its own expansion.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "rules/compile/config_errors.h"
#include "rules/compile/firewall_parsers.h"
#include "rules/compiled/firewall.h"
#include "rules/model/firewall.h"

namespace dpu::rules {

// Default and upper end of the ACL entry budget (firewall.max_acl_entries).
inline constexpr size_t kMaxFirewallEntries = 500'000;
inline constexpr size_t kMaxFirewallEntriesLimit = 4'000'000;

struct FirewallCompileOptions {
  // v4 + v6 entries in total; a model's max_acl_entries, when set, takes precedence.
  size_t max_entries = kMaxFirewallEntries;
};

// Every error has section "firewall", the rule id, its index in model.rules, file:line for
// rules from files, the field ("firewall.rules[3].dst_ports" for inline rules, the proto
// field name for rules from files) and the reason. A model with no rules compiles to an
// empty CompiledFirewall carrying the defaults.
absl::StatusOr<std::shared_ptr<const CompiledFirewall>> compileFirewall(
    const FirewallModel& model, ConfigErrorList* errors = nullptr);
absl::StatusOr<std::shared_ptr<const CompiledFirewall>> compileFirewall(
    const FirewallModel& model, const FirewallCompileOptions& opts, ConfigErrorList* errors);

// Everything compileFirewall checks (including the entry cap), without building entries.
// Appends to `errors`.
void validateFirewall(const FirewallModel& model, ConfigErrorList& errors,
                      const FirewallCompileOptions& opts = {});

// The checks that concern all rules together: unique ids, the entry cap. (Used by the
// control side after converting rules one by one with convertRuleSpec, which already ran
// checkFirewallRule on each with the source's field names.)
void validateFirewallSet(const FirewallModel& model, ConfigErrorList& errors,
                         const FirewallCompileOptions& opts = {});

// Where a rule is, for its errors: a ConfigError with section, rule, index, file, line set;
// `field` names a field.
struct RuleErrorContext {
  ConfigError base;  // section "firewall", rule id, index, file, line
  std::function<std::string(RuleField)> field;
  std::function<int(RuleField)> line;  // optional: line of a field (JSON); 0 = base.line
};

// The checks of one rule on its own: id, action, direction, prefixes (length, host bits,
// IPv4 bytes), families (a rule that can never match), ports (ranges, protocols that have
// ports), VLAN range, country codes, countries without a GeoIP database.
void checkFirewallRule(const FirewallRule& rule, bool geoip_configured,
                       const RuleErrorContext& ctx, ConfigErrorList& errors);

// The context compileFirewall uses for model.rules[index].
RuleErrorContext modelRuleContext(const FirewallRule& rule, int index);

}  // namespace dpu::rules
