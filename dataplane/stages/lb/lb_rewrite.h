// Load balancer packet rewrites (pure byte work, no DPDK; inline: they run per packet):
//   L2    destination MAC := backend MAC (direct server return: the backend owns the VIP)
//   NAT   destination address/port := backend's (forward), source := VIP's (return traffic),
//         IPv4 header and TCP/UDP checksums fixed incrementally (RFC 1624)
//   IPIP  the IP packet wrapped in an outer IPv4 (proto 4) / IPv6 (next header 41) header to
//         the backend, the L2 header (VLAN tags, a PPPoE session header) kept in front
// Every function reads and writes only inside the frame it is given (plus, for IPIP, the
// headroom the caller prepended and said so).
#pragma once

#include <cstdint>
#include <cstring>

#include "dataplane/packet/packet_meta.h"

namespace dpu::dp {

namespace lb_rw {

inline uint16_t ld16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }
inline void st16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v >> 8);
  p[1] = uint8_t(v);
}

// RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m') over the 16-bit words that change (n even).
inline void csumReplace(uint8_t* csum, const uint8_t* old_bytes, const uint8_t* new_bytes,
                        uint32_t n) {
  uint32_t s = uint16_t(~ld16(csum));
  for (uint32_t i = 0; i < n; i += 2) {
    s += uint16_t(~ld16(old_bytes + i));
    s += ld16(new_bytes + i);
  }
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  st16(csum, uint16_t(~s));
}

}  // namespace lb_rw

inline void lbRewriteDstMac(uint8_t* frame, const uint8_t mac[6]) { std::memcpy(frame, mac, 6); }

// Where the L4 checksum of a packet is (nullptr: none to fix — not TCP/UDP, a later
// fragment, or UDP over IPv4 without a checksum).
inline uint8_t* lbL4Csum(uint8_t* frame, uint32_t len, const PacketMeta& m) {
  if (!m.has_l4) return nullptr;
  uint32_t at;
  if (m.l4_proto == 6) {
    at = m.l4_offset + 16u;
  } else if (m.l4_proto == 17) {
    at = m.l4_offset + 6u;
  } else {
    return nullptr;
  }
  if (at + 2 > len) return nullptr;
  uint8_t* c = frame + at;
  if (m.l4_proto == 17 && m.l3 == L3Type::kIpv4 && c[0] == 0 && c[1] == 0) return nullptr;
  return c;
}

// Replaces the source (src = true) or destination address and port of an IPv4/IPv6 packet,
// fixing the IPv4 header checksum and the TCP/UDP checksum. `addr` is 4 or 16 bytes by the
// packet's family; port 0 = keep. A UDP checksum that becomes 0 is sent as 0xffff.
inline void lbNatRewrite(uint8_t* frame, uint32_t len, const PacketMeta& m, bool src,
                         const uint8_t* addr, uint16_t port) {
  using namespace lb_rw;
  const bool v4 = m.l3 == L3Type::kIpv4;
  const uint32_t alen = v4 ? 4 : 16;
  uint8_t* ip = frame + m.l3_offset;
  uint8_t* a = ip + (v4 ? (src ? 12 : 16) : (src ? 8 : 24));
  uint8_t* l4c = lbL4Csum(frame, len, m);
  if (v4) csumReplace(ip + 10, a, addr, 4);
  if (l4c) csumReplace(l4c, a, addr, alen);
  std::memcpy(a, addr, alen);
  if (port != 0 && m.has_l4 && (m.l4_proto == 6 || m.l4_proto == 17)) {
    uint8_t* pp = frame + m.l4_offset + (src ? 0 : 2);
    uint8_t np[2];
    st16(np, port);
    if (l4c) csumReplace(l4c, pp, np, 2);
    std::memcpy(pp, np, 2);
  }
  if (l4c && m.l4_proto == 17 && l4c[0] == 0 && l4c[1] == 0) l4c[0] = l4c[1] = 0xff;
}

constexpr uint32_t kLbIpip4Overhead = 20;
constexpr uint32_t kLbIpip6Overhead = 40;

// IP-in-IP: `newf` = the frame's start moved `overhead` bytes earlier (the caller prepended
// that much headroom); the L2 header (l3_offset bytes) moves to the front and the outer
// header goes between it and the original IP packet. The outer header carries the inner
// packet's IP length (Ethernet padding after it stays behind it). Returns the outer frame's
// length.
inline uint32_t lbIpipEncap(uint8_t* newf, uint32_t old_len, const PacketMeta& m,
                            const uint8_t* outer_src, const uint8_t* outer_dst) {
  using namespace lb_rw;
  const bool v4 = m.l3 == L3Type::kIpv4;
  const uint32_t ov = v4 ? kLbIpip4Overhead : kLbIpip6Overhead;
  std::memmove(newf, newf + ov, m.l3_offset);
  uint8_t* o = newf + m.l3_offset;
  const uint8_t* inner = o + ov;
  if (v4) {
    std::memset(o, 0, 20);
    o[0] = 0x45;
    o[1] = inner[1];                      // DSCP/ECN of the inner packet
    st16(o + 2, uint16_t(m.l3_len + 20));
    o[6] = inner[6] & 0x40;               // DF as the inner packet says
    o[8] = 64;
    o[9] = 4;                             // IPPROTO_IPIP
    std::memcpy(o + 12, outer_src, 4);
    std::memcpy(o + 16, outer_dst, 4);
    uint32_t s = 0;
    for (int i = 0; i < 20; i += 2) s += ld16(o + i);
    while (s >> 16) s = (s & 0xffff) + (s >> 16);
    st16(o + 10, uint16_t(~s));
  } else {
    std::memcpy(o, inner, 4);             // version, traffic class, flow label of the inner
    st16(o + 4, m.l3_len);
    o[6] = 41;                            // IPPROTO_IPV6
    o[7] = 64;
    std::memcpy(o + 8, outer_src, 16);
    std::memcpy(o + 24, outer_dst, 16);
  }
  // The (innermost) ethertype, or PPP protocol, stays: IPv4 in IPv4, IPv6 in IPv6. Inside
  // PPPoE the session's length grows by the outer header.
  if (m.pppoe_offset != 0) {
    uint8_t* len_field = newf + m.pppoe_offset + 4;
    st16(len_field, uint16_t(ld16(len_field) + ov));
  }
  return old_len + ov;
}

}  // namespace dpu::dp
