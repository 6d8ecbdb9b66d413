// Bidirectional flow key: both directions of a connection map to the same key.
#pragma once

#include <cstdint>
#include <cstring>

#include "dataplane/packet/packet_meta.h"

namespace dpu::dp {

// 44 bytes, no implicit padding: hashed and compared as raw bytes by rte_hash.
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
  uint16_t pad = 0;
};
static_assert(sizeof(FlowKey) == 44, "FlowKey must be packed without holes");

// Builds the canonical key for `m`. Returns true when the packet travels hi -> lo
// (i.e. its source is the `hi` endpoint). Requires m.l3 != kNone.
inline bool makeFlowKey(const PacketMeta& m, FlowKey& k) {
  int c = std::memcmp(m.src.b, m.dst.b, 16);
  bool src_is_hi = c > 0 || (c == 0 && m.sport > m.dport);
  const IpAddr& lo = src_is_hi ? m.dst : m.src;
  const IpAddr& hi = src_is_hi ? m.src : m.dst;
  std::memcpy(k.lo_addr.b, lo.b, 16);
  std::memcpy(k.hi_addr.b, hi.b, 16);
  k.lo_port = src_is_hi ? m.dport : m.sport;
  k.hi_port = src_is_hi ? m.sport : m.dport;
  k.vlan = m.vlan_outer;
  k.vlan_inner = m.vlan_inner;
  k.proto = m.l4_proto;
  k.ip_ver = static_cast<uint8_t>(m.l3);
  k.pad = 0;
  return src_is_hi;
}

}  // namespace dpu::dp
