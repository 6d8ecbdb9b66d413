#include "rules/compiled/firewall.h"

namespace dpu::rules {
namespace {

bool prefixMatches(const std::array<uint8_t, 16>& net, uint8_t len,
                   const std::array<uint8_t, 16>& a) {
  uint8_t full = len / 8;
  for (uint8_t i = 0; i < full; ++i) {
    if (net[i] != a[i]) return false;
  }
  uint8_t rest = len % 8;
  if (rest == 0) return true;
  uint8_t mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (net[full] & mask) == (a[full] & mask);
}

}  // namespace

bool aclEntryMatches(const AclEntry& e, const FwQuery& q) {
  return (q.proto & e.proto_mask) == (e.proto & e.proto_mask) && q.dir >= e.dir_lo &&
         q.dir <= e.dir_hi && q.vlan >= e.vlan_lo && q.vlan <= e.vlan_hi &&
         q.src_cc >= e.src_cc_lo && q.src_cc <= e.src_cc_hi && q.dst_cc >= e.dst_cc_lo &&
         q.dst_cc <= e.dst_cc_hi && prefixMatches(e.src, e.src_len, q.src) &&
         prefixMatches(e.dst, e.dst_len, q.dst) && q.sport >= e.sport_lo &&
         q.sport <= e.sport_hi && q.dport >= e.dport_lo && q.dport <= e.dport_hi &&
         q.tunnel_id >= e.tunnel_lo && q.tunnel_id <= e.tunnel_hi;
}

int64_t referenceMatch(const CompiledFirewall& fw, const FwQuery& q) {
  const std::vector<AclEntry>& entries = q.v6 ? fw.v6 : fw.v4;
  const AclEntry* best = nullptr;
  for (const AclEntry& e : entries) {
    if ((!best || e.rank < best->rank) && aclEntryMatches(e, q)) best = &e;
  }
  return best ? static_cast<int64_t>(best->rule) : -1;
}

}  // namespace dpu::rules
