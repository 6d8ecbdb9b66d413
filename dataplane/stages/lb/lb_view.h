// The load balancer's view of a parsed frame (rules::LbPacket) from the parser's PacketMeta.
// Pure and inline: no DPDK, usable from tests, benchmarks and the fuzz target.
#pragma once

#include <cstring>

#include "dataplane/packet/packet_meta.h"
#include "rules/compiled/lb.h"

namespace dpu::dp {

inline void lbView(const PacketMeta& m, const uint8_t* data, uint32_t len, rules::LbPacket& p) {
  p.data = data;
  p.len = len < 0xFFFF ? len : 0xFFFF;
  p.l3 = static_cast<uint8_t>(m.l3);
  p.has_l4 = m.has_l4;
  p.proto = m.l4_proto;
  p.vlan_count = m.vlan_count;
  p.vlan = m.vlan_outer;
  p.tunnel_depth = m.tunnel_depth;
  p.tunnel_id = m.tunnel_id;
  p.l3_off = m.l3_offset;
  p.l3_len = m.l3_len;
  p.l4_off = m.l4_offset;
  p.payload_off = m.payload_offset;
  p.payload_len = m.payload_len;
  std::memcpy(p.src, m.src.b, 16);
  std::memcpy(p.dst, m.dst.b, 16);
  p.sport = m.sport;
  p.dport = m.dport;
}

}  // namespace dpu::dp
