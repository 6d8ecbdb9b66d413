// Firewall rules as the control plane fills them (from ApplianceConfig.firewall and rule
// files). Plain data; validation and expansion happen in rules/compile/firewall_compiler.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dpu::rules {

enum class FwAction : uint8_t { kAllow = 1, kDeny = 2, kReject = 3 };
// Which side the flow's first packet (the initiator) came from.
enum class FwDirection : uint8_t { kBoth = 0, kAtoB = 1, kBtoA = 2 };

// An IPv4 address occupies addr[0..3] (network order), the rest zero, as in the dataplane.
struct IpPrefix {
  std::array<uint8_t, 16> addr{};
  uint8_t len = 0;   // prefix length (0..32 for v4, 0..128 for v6)
  bool v6 = false;
  bool operator==(const IpPrefix&) const = default;
};

struct PortRange {
  uint16_t lo = 0;
  uint16_t hi = 65535;
  bool operator==(const PortRange&) const = default;
};

using CountryCode = std::array<char, 2>;  // ISO 3166-1 alpha-2, upper case

struct FirewallRule {
  std::string id;                  // unique
  int32_t priority = 0;            // lower value = evaluated first; ties: config order
  FwAction action = FwAction::kDeny;
  FwDirection direction = FwDirection::kBoth;
  std::vector<uint8_t> protocols;  // IPPROTO_* values; empty = any
  std::vector<IpPrefix> src;       // empty = any (named sets already expanded)
  std::vector<IpPrefix> dst;
  std::vector<PortRange> src_ports;  // empty = any; only for TCP/UDP/SCTP
  std::vector<PortRange> dst_ports;
  std::optional<uint16_t> vlan;    // outer VID; unset = any (0 = untagged)
  std::optional<uint32_t> tunnel_id;  // VNI / GRE key (docs/tunnels.md); unset = any, 0 = none
  std::vector<CountryCode> src_countries;  // empty = any
  std::vector<CountryCode> dst_countries;
  std::string description;
  std::string file;                // where the rule came from (rule file), for errors
  int line = 0;
  bool operator==(const FirewallRule&) const = default;
};

struct FirewallModel {
  std::vector<FirewallRule> rules;
  FwAction default_a_to_b = FwAction::kAllow;  // flows no rule matches, by initiator side
  FwAction default_b_to_a = FwAction::kAllow;
  bool reevaluate_on_change = true;  // existing flows are judged again by a new rule set
  std::string geoip_database;        // path of a MaxMind mmdb with country data; "" = none
  // Identifies the database file's content (device, inode, size, mtime) when the control side
  // checked it; a replaced file changes the model, so the firewall is compiled (and
  // published) anew even when the path stays the same. 0 = not checked / no database.
  uint64_t geoip_database_stamp = 0;
  // The ACL entry budget (firewall.max_acl_entries); 0 = kMaxFirewallEntries.
  uint32_t max_acl_entries = 0;
  bool operator==(const FirewallModel&) const = default;
};

}  // namespace dpu::rules
