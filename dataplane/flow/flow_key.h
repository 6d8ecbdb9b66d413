// Bidirectional flow key: both directions of a connection map to the same key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <emmintrin.h>

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

// The canonical key of `m` as FlowKey's six 8-byte words (little-endian, in key order), built
// in registers. The endpoint with the lower (address, port) is `lo`.
struct FlowKeyWords {
  uint64_t w[6];
  bool src_is_hi;  // the packet's source is the key's `hi` endpoint
};
__attribute__((always_inline)) inline FlowKeyWords flowKeyWords(const PacketMeta& m) {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the words are FlowKey's bytes on x86");
  static_assert(offsetof(FlowKey, lo_port) == 32 && offsetof(FlowKey, hi_port) == 34 &&
                offsetof(FlowKey, vlan) == 36 && offsetof(FlowKey, proto) == 38 &&
                offsetof(FlowKey, ip_ver) == 39 && offsetof(FlowKey, vlan_inner) == 40 &&
                offsetof(FlowKey, pppoe_session) == 42 && offsetof(FlowKey, tunnel_id) == 44);
  uint64_t s0, s1, d0, d1;
  std::memcpy(&s0, m.src.b, 8);
  std::memcpy(&s1, m.src.b + 8, 8);
  std::memcpy(&d0, m.dst.b, 8);
  std::memcpy(&d1, m.dst.b + 8, 8);
  // compareAddr(src, dst) > 0, or equal addresses and sport > dport.
  FlowKeyWords k;
  k.src_is_hi = s0 != d0   ? __builtin_bswap64(s0) > __builtin_bswap64(d0)
                : s1 != d1 ? __builtin_bswap64(s1) > __builtin_bswap64(d1)
                           : m.sport > m.dport;
  const bool h = k.src_is_hi;
  k.w[0] = h ? d0 : s0;
  k.w[1] = h ? d1 : s1;
  k.w[2] = h ? s0 : d0;
  k.w[3] = h ? s1 : d1;
  const uint16_t lo_port = h ? m.dport : m.sport;
  const uint16_t hi_port = h ? m.sport : m.dport;
  const uint16_t pppoe = m.pppoe_offset != 0 ? m.pppoe_session : 0;
  // Bytes 32..47: lo_port, hi_port, vlan, proto, ip_ver | vlan_inner, pppoe_session, tunnel_id.
  k.w[4] = uint64_t(lo_port) | uint64_t(hi_port) << 16 | uint64_t(m.vlan_outer) << 32 |
           uint64_t(m.l4_proto) << 48 | uint64_t(static_cast<uint8_t>(m.l3)) << 56;
  k.w[5] = uint64_t(m.vlan_inner) | uint64_t(pppoe) << 16 | uint64_t(m.tunnel_id) << 32;
  return k;
}

// Writes the words into `k` with three 16-byte stores: a key written field by field and read
// back right after (rte_hash's hash and compare) would wait on loads that span several smaller
// stores, which the store buffer cannot forward (~15 cycles each).
inline void storeFlowKey(const FlowKeyWords& w, FlowKey& k) {
  auto* out = reinterpret_cast<__m128i*>(&k);
  _mm_storeu_si128(out, _mm_set_epi64x(int64_t(w.w[1]), int64_t(w.w[0])));
  _mm_storeu_si128(out + 1, _mm_set_epi64x(int64_t(w.w[3]), int64_t(w.w[2])));
  _mm_storeu_si128(out + 2, _mm_set_epi64x(int64_t(w.w[5]), int64_t(w.w[4])));
}

// Builds the canonical key for `m`. Returns true when the packet travels hi -> lo
// (i.e. its source is the `hi` endpoint). Requires m.l3 != kNone.
inline bool makeFlowKey(const PacketMeta& m, FlowKey& k) {
  const FlowKeyWords w = flowKeyWords(m);
  storeFlowKey(w, k);
  return w.src_is_hi;
}

}  // namespace dpu::dp
