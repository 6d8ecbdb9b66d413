// The compiled firewall: rules expanded into ACL entries (one per combination of the
// rule's protocols, prefixes, port ranges, VLAN and countries), each with the rank of its
// rule. Pure data, built by rules/compile/firewall_compiler; the dataplane builds its
// rte_acl contexts from v4 / v6 (dataplane/stages/firewall/firewall_tables), and tests compare that
// engine with referenceMatch() below.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "rules/model/firewall.h"

namespace dpu::rules {

struct FwRuleInfo {
  std::string id;
  FwAction action = FwAction::kDeny;
  int32_t priority = 0;
  std::string description;
};

// One ACL entry. Ranges are inclusive.
struct AclEntry {
  uint8_t proto = 0;        // IPPROTO_*; with proto_mask 0 it matches any protocol
  uint8_t proto_mask = 0;   // 0xff = exact, 0 = any
  uint8_t dir_lo = 1;       // 1 = flow initiated on side A, 2 = on side B
  uint8_t dir_hi = 2;
  uint16_t vlan_lo = 0;     // outer VID, 0 = untagged
  uint16_t vlan_hi = 4095;
  uint16_t src_cc_lo = 0;   // country index (CompiledFirewall::countries), 0 = other/unknown
  uint16_t src_cc_hi = 0xffff;
  uint16_t dst_cc_lo = 0;
  uint16_t dst_cc_hi = 0xffff;
  std::array<uint8_t, 16> src{};  // prefix address (v4 in bytes 0..3)
  std::array<uint8_t, 16> dst{};
  uint8_t src_len = 0;
  uint8_t dst_len = 0;
  uint16_t sport_lo = 0;
  uint16_t sport_hi = 65535;
  uint16_t dport_lo = 0;
  uint16_t dport_hi = 65535;
  uint32_t tunnel_lo = 0;   // tunnel id (VNI / GRE key), 0 = none
  uint32_t tunnel_hi = 0xffffffffu;
  uint32_t rule = 0;        // index into CompiledFirewall::rules
  uint32_t rank = 0;        // 0 = matched first: (priority, config order) ascending
};

struct CompiledFirewall {
  std::vector<FwRuleInfo> rules;   // rank order: rules[r] has rank r
  std::vector<AclEntry> v4;
  std::vector<AclEntry> v6;
  FwAction default_action[2] = {FwAction::kAllow, FwAction::kAllow};  // by initiator side A/B
  bool reevaluate_on_change = true;
  // Countries the rules name: countries[i] has index i + 1; every other country (and an
  // address GeoIP does not know) has index 0.
  std::vector<CountryCode> countries;
  std::array<uint16_t, 26 * 26> country_index{};  // 'AA'..'ZZ' -> index
  std::string geoip_database;
  bool uses_countries = false;

  // Whether the firewall judges anything: a rule, or a default action that is not allow.
  bool judges() const {
    return !rules.empty() || default_action[0] != FwAction::kAllow ||
           default_action[1] != FwAction::kAllow;
  }

  uint16_t countryIndex(const char cc[2]) const {
    if (cc[0] < 'A' || cc[0] > 'Z' || cc[1] < 'A' || cc[1] > 'Z') return 0;
    return country_index[(cc[0] - 'A') * 26 + (cc[1] - 'A')];
  }
};

// What the firewall looks at for a flow (its first packet, in the initiator's direction).
struct FwQuery {
  bool v6 = false;
  uint8_t proto = 0;
  uint8_t dir = 1;          // 1 = initiated on side A, 2 = side B
  uint16_t vlan = 0;
  uint16_t src_cc = 0;
  uint16_t dst_cc = 0;
  std::array<uint8_t, 16> src{};
  std::array<uint8_t, 16> dst{};
  uint16_t sport = 0;
  uint16_t dport = 0;
  uint32_t tunnel_id = 0;
};

bool aclEntryMatches(const AclEntry& e, const FwQuery& q);

// Reference classifier: the matching entry of lowest rank over a plain scan. Returns the
// rule index, or -1 when no rule matches (the default action applies).
int64_t referenceMatch(const CompiledFirewall& fw, const FwQuery& q);

}  // namespace dpu::rules
