// Writing the frames the dataplane sends itself (reject answers, DNS answers): Internet
// checksums (RFC 1071), big-endian stores, the L2 header of an answer and plain IPv4 / IPv6
// headers. No DPDK dependency.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "dataplane/packet/packet_meta.h"

namespace dpu::dp {

// Internet checksum helpers (RFC 1071): partial sums of big-endian 16-bit words.
inline uint32_t sum16(const uint8_t* p, size_t n, uint32_t s = 0) {
  uint64_t acc = s;
  for (size_t i = 0; i + 1 < n; i += 2) acc += static_cast<uint32_t>((p[i] << 8) | p[i + 1]);
  if (n & 1) acc += static_cast<uint32_t>(p[n - 1] << 8);
  while (acc >> 32) acc = (acc & 0xffffffffu) + (acc >> 32);
  return static_cast<uint32_t>(acc);
}

inline uint16_t finish(uint32_t s) {
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  return static_cast<uint16_t>(~s & 0xffff);
}

inline uint32_t pseudoSum(bool v6, const IpAddr& src, const IpAddr& dst, uint8_t proto, uint32_t len) {
  size_t alen = v6 ? 16 : 4;
  uint32_t s = sum16(src.b, alen);
  s = sum16(dst.b, alen, s);
  uint64_t acc = static_cast<uint64_t>(s) + proto + (len >> 16) + (len & 0xffff);
  while (acc >> 32) acc = (acc & 0xffffffffu) + (acc >> 32);
  return static_cast<uint32_t>(acc);
}

inline void put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}

inline void put32(uint8_t* p, uint32_t v) {
  put16(p, static_cast<uint16_t>(v >> 16));
  put16(p + 2, static_cast<uint16_t>(v));
}

// L2 header of an answer that carries `l3_len` bytes of IP: the packet's own (m.l3_offset
// bytes: tags, and a PPPoE session header with its PPP protocol field), MACs swapped when it
// goes back to the sender. Inside PPPoE the PPPoE length is set for the answer (the session id
// stays: one session serves both directions). Returns the L2 length.
inline uint16_t copyL2(const uint8_t* frame, const PacketMeta& m, bool swap, uint32_t l3_len,
                       uint8_t* out) {
  const uint16_t l2_len = m.l3_offset;
  std::memcpy(out, frame, l2_len);
  if (swap) {
    std::memcpy(out, frame + 6, 6);
    std::memcpy(out + 6, frame, 6);
  }
  if (m.pppoe_offset != 0) {
    // PPPoE length = PPP protocol field (between the 6-byte PPPoE header and l3) + IP.
    put16(out + m.pppoe_offset + 4,
          static_cast<uint16_t>(l2_len - m.pppoe_offset - 6 + l3_len));
  }
  if (swap) {
    // Inside tunnels the answer goes back through every layer: each carrying IP header's
    // addresses and each inner Ethernet header's MACs swapped. UDP ports stay (the VXLAN /
    // Geneve port is the destination both ways; the source port is the sender's entropy),
    // GRE keys and sequence numbers stay. Lengths and checksums: sealTunnel().
    uint8_t tmp[16];
    for (uint32_t i = 0; i < m.tunnel_depth; ++i) {
      const TunnelLayer& t = m.tunnel[i];
      if (t.ip_off != 0) {
        const uint32_t a = t.outer_v6 ? 8 : 12, n = t.outer_v6 ? 16 : 4;
        std::memcpy(tmp, out + t.ip_off + a, n);
        std::memcpy(out + t.ip_off + a, out + t.ip_off + a + n, n);
        std::memcpy(out + t.ip_off + a + n, tmp, n);
      }
      if (t.eth_off != 0) {
        std::memcpy(tmp, out + t.eth_off, 6);
        std::memcpy(out + t.eth_off, out + t.eth_off + 6, 6);
        std::memcpy(out + t.eth_off + 6, tmp, 6);
      }
    }
  }
  return l2_len;
}

// Can an answer to `m` be sent inside its tunnels? Not through MPLS: a label stack is
// per direction and per hop (the way back has other labels), so such answers are not made
// (the rejected packet is still dropped; counted as suppressed answers).
inline bool tunnelAnswerable(const PacketMeta& m) {
  for (uint32_t i = 0; i < m.tunnel_depth; ++i) {
    if (m.tunnel[i].type == TunnelType::kMpls) return false;
  }
  return true;
}

// After the inner packet of a tunneled frame changed (an answer written behind copyL2's
// headers, an LB rewrite), makes every layer consistent again, innermost first: the
// carrying IP header's length (and IPv4 header checksum), the UDP length and checksum of
// VXLAN / Geneve (0 over IPv4, as RFC 7348 / RFC 8926 allow; computed over IPv6), and a GRE
// checksum when the header has one. `end` is the end of the innermost IP packet (the frame
// may continue with Ethernet padding, which no length counts). No-op outside tunnels.
inline void sealTunnel(uint8_t* frame, uint32_t end, const PacketMeta& m) {
  for (uint32_t i = m.tunnel_depth; i-- > 0;) {
    const TunnelLayer& t = m.tunnel[i];
    if (t.ip_off == 0) continue;  // MPLS: no length of its own
    uint8_t* ip = frame + t.ip_off;
    const uint32_t ip_len = end - t.ip_off;
    // The carrying header's own header length: IPv4 IHL; IPv6: up to the encapsulation
    // header (extension headers included).
    const uint32_t hdr = t.outer_v6 ? t.hdr_off - t.ip_off : (ip[0] & 0x0F) * 4u;
    if (t.outer_v6) {
      put16(ip + 4, static_cast<uint16_t>(ip_len - 40));
    } else {
      put16(ip + 2, static_cast<uint16_t>(ip_len));
      put16(ip + 10, 0);
      put16(ip + 10, finish(sum16(ip, hdr)));
    }
    IpAddr src{}, dst{};
    const uint32_t alen = t.outer_v6 ? 16 : 4;
    std::memcpy(src.b, ip + (t.outer_v6 ? 8 : 12), alen);
    std::memcpy(dst.b, ip + (t.outer_v6 ? 24 : 16), alen);
    if (t.type == TunnelType::kVxlan || t.type == TunnelType::kGeneve) {
      uint8_t* u = frame + t.hdr_off;
      const uint32_t ulen = end - t.hdr_off;
      put16(u + 4, static_cast<uint16_t>(ulen));
      put16(u + 6, 0);
      if (t.outer_v6) {
        const uint16_t c = finish(sum16(u, ulen, pseudoSum(true, src, dst, 17, ulen)));
        put16(u + 6, c == 0 ? 0xffff : c);
      }
    } else if (t.type == TunnelType::kGre && (frame[t.hdr_off] & 0x80)) {
      uint8_t* g = frame + t.hdr_off;
      put16(g + 4, 0);
      put16(g + 4, finish(sum16(g, end - t.hdr_off)));
    }
  }
}

// IPv4 / IPv6 header without options / extension headers; returns its length.
inline uint16_t writeIpHeader(uint8_t* ip, bool v6, const IpAddr& src, const IpAddr& dst, uint8_t proto,
                       uint16_t l4_len, uint8_t tos) {
  if (!v6) {
    ip[0] = 0x45;
    ip[1] = tos;
    put16(ip + 2, static_cast<uint16_t>(20 + l4_len));
    put16(ip + 4, 0);
    put16(ip + 6, 0);
    ip[8] = 64;
    ip[9] = proto;
    put16(ip + 10, 0);
    std::memcpy(ip + 12, src.b, 4);
    std::memcpy(ip + 16, dst.b, 4);
    put16(ip + 10, finish(sum16(ip, 20)));
    return 20;
  }
  put32(ip, 0x60000000u | (static_cast<uint32_t>(tos) << 20));
  put16(ip + 4, l4_len);
  ip[6] = proto;
  ip[7] = 64;
  std::memcpy(ip + 8, src.b, 16);
  std::memcpy(ip + 24, dst.b, 16);
  return 40;
}

}  // namespace dpu::dp
