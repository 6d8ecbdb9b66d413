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
  return l2_len;
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
