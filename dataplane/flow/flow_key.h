// Bidirectional flow key: both directions of a connection map to the same key.
#pragma once

#include <cstdint>
#include <cstring>

#include "dataplane/packet/packet_meta.h"

namespace dpu::dp {

// 48 bytes, no implicit padding: hashed and compared as raw bytes by rte_hash (48 is one of
// the key sizes rte_hash compares with vector instructions instead of memcmp).
// The endpoint with the lower (address, port) is `lo`.
struct FlowKey {
  IpAddr lo_addr;
  IpAddr hi_addr;
  uint16_t lo_port;
  uint16_t hi_port;
  uint16_t vlan;      // outer VID (0 when untagged)
  uint8_t proto;      // IPPROTO_*
  uint8_t ip_ver;     // 4 or 6
  uint16_t vlan_inner;
  uint16_t pppoe_session;  // PPPoE session id (0 when not inside PPPoE)
  uint32_t tunnel_id;      // PacketMeta::tunnel_id: VNI / GRE key of the innermost layer with one
                           // (0 outside tunnels and for IP-in-IP / MPLS / unkeyed GRE)
};
static_assert(sizeof(FlowKey) == 48, "FlowKey must be packed without holes");

// Orders two 16-byte addresses like memcmp, without a libc call.
inline int compareAddr(const IpAddr& a, const IpAddr& b) {
  uint64_t a0, a1, b0, b1;
  std::memcpy(&a0, a.b, 8);
  std::memcpy(&b0, b.b, 8);
  if (a0 != b0) return __builtin_bswap64(a0) < __builtin_bswap64(b0) ? -1 : 1;
  std::memcpy(&a1, a.b + 8, 8);
  std::memcpy(&b1, b.b + 8, 8);
  if (a1 != b1) return __builtin_bswap64(a1) < __builtin_bswap64(b1) ? -1 : 1;
  return 0;
}

// Builds the canonical key for `m`. Returns true when the packet travels hi -> lo
// (i.e. its source is the `hi` endpoint). Requires m.l3 != kNone.
inline bool makeFlowKey(const PacketMeta& m, FlowKey& k) {
  int c = compareAddr(m.src, m.dst);
  bool src_is_hi = c > 0 || (c == 0 && m.sport > m.dport);
  const IpAddr& lo = src_is_hi ? m.dst : m.src;
  const IpAddr& hi = src_is_hi ? m.src : m.dst;
  std::memcpy(k.lo_addr.b, lo.b, 16);
  std::memcpy(k.hi_addr.b, hi.b, 16);
  k.lo_port = src_is_hi ? m.dport : m.sport;
  k.hi_port = src_is_hi ? m.sport : m.dport;
  k.vlan = m.vlan_outer;
  k.vlan_inner = m.vlan_inner;
  k.pppoe_session = m.pppoe_offset != 0 ? m.pppoe_session : 0;
  k.proto = m.l4_proto;
  k.ip_ver = static_cast<uint8_t>(m.l3);
  k.tunnel_id = m.tunnel_id;
  return src_is_hi;
}

}  // namespace dpu::dp
