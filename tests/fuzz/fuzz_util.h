// Helpers shared by the fuzz targets in tests/fuzz/. A violated invariant prints what failed
// and where, then abort()s: libFuzzer saves the input as a crash, the replay driver
// (replay_main.cc) and ctest report a failure.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "dataplane/packet/packet_meta.h"

#define FUZZ_CHECK(cond)                                                                  \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "%s:%d: fuzz invariant violated: %s\n", __FILE__, __LINE__,    \
                   #cond);                                                                \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)

namespace dpu::fuzz {

// Rule-text targets (yara, sig_parse): the input is rule text, optionally followed by
// "\n\0\n" and bytes to scan.
inline void splitRulesAndBytes(const uint8_t* data, size_t size, std::string& text, std::string& bytes) {
  std::string in(reinterpret_cast<const char*>(data), size);
  const size_t sep = in.find(std::string("\n\0\n", 3));
  text = sep == std::string::npos ? in : in.substr(0, sep);
  bytes = sep == std::string::npos ? std::string() : in.substr(sep + 3);
}

inline uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
inline uint32_t be32(const uint8_t* p) {
  return (static_cast<uint32_t>(p[0]) << 24) | (static_cast<uint32_t>(p[1]) << 16) |
         (static_cast<uint32_t>(p[2]) << 8) | p[3];
}

// Field by field (PacketMeta has padding bytes, so no memcmp); frame_len only when asked.
inline bool sameMeta(const dp::PacketMeta& a, const dp::PacketMeta& b, bool with_frame_len) {
  return (!with_frame_len || a.frame_len == b.frame_len) && a.l3_offset == b.l3_offset &&
         a.l4_offset == b.l4_offset && a.payload_offset == b.payload_offset &&
         a.payload_len == b.payload_len && a.ether_type == b.ether_type &&
         a.vlan_outer == b.vlan_outer && a.vlan_inner == b.vlan_inner &&
         a.vlan_count == b.vlan_count && a.pppoe_offset == b.pppoe_offset &&
         a.pppoe_session == b.pppoe_session && a.l3 == b.l3 && a.l4_proto == b.l4_proto &&
         a.ttl == b.ttl && a.l3_len == b.l3_len && a.src == b.src && a.dst == b.dst &&
         a.sport == b.sport && a.dport == b.dport && a.tcp_flags == b.tcp_flags &&
         a.tcp_seq == b.tcp_seq && a.tcp_ack == b.tcp_ack && a.icmp_type == b.icmp_type &&
         a.icmp_code == b.icmp_code && a.has_l4 == b.has_l4 && a.is_fragment == b.is_fragment &&
         a.more_fragments == b.more_fragments && a.frag_offset == b.frag_offset &&
         a.frag_payload_len == b.frag_payload_len && a.frag_id == b.frag_id;
}

}  // namespace dpu::fuzz
