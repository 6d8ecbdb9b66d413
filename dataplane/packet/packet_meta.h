// Parsed view of one frame. Filled by parsePacket(); no DPDK dependency so the
// parser is testable and fuzzable without EAL.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include <emmintrin.h>

namespace dpu::dp {

// Result of parsing a frame. kOk and kNonIp are not errors; every other value
// is a malformed-packet reason with its own drop counter.
enum class ParseStatus : uint8_t {
  kOk = 0,
  kNonIp,                 // valid L2 frame carrying no IPv4/IPv6 (ARP, LLDP, PPPoE discovery,
                          // PPP control protocols in a PPPoE session, ...)
  kTruncatedL2,           // shorter than an Ethernet header
  kTruncatedVlan,         // a VLAN tag cut short
  kTooManyVlans,          // more than two stacked tags
  kTruncatedIpv4,         // fewer than 20 bytes of IPv4 header
  kBadIpv4Version,        // ethertype says IPv4, version nibble disagrees
  kBadIpv4Ihl,            // IHL < 5, or options run past the frame
  kBadIpv4TotalLength,    // total length < header length or > bytes present
  kTruncatedIpv6,         // fewer than 40 bytes of IPv6 header
  kBadIpv6Version,
  kBadIpv6PayloadLength,  // payload length > bytes present
  kBadIpv6ExtHeader,      // extension header truncated, too many, or misplaced
  kTruncatedTcp,          // first fragment / packet too short for the TCP header
  kBadTcpDataOffset,      // data offset < 5 or past the datagram
  kTruncatedUdp,
  kBadUdpLength,          // UDP length < 8 or > datagram
  kTruncatedIcmp,
  kBadFragment,           // fragment offset+length beyond 65535, or a zero-length fragment
  kTruncatedPppoe,        // PPPoE session header + PPP protocol cut short
  kBadPppoeLength,        // PPPoE length shorter than the PPP protocol field or past the frame
  // Tunnels (dataplane.tunnels mode INSPECT, parser.h): the encapsulation header itself is
  // broken. Errors in the headers inside a tunnel use the reasons above (truncated_ipv4, ...).
  kTruncatedVxlan,        // UDP payload on a VXLAN port shorter than the 8-byte VXLAN header
  kBadVxlan,              // VXLAN header without the I (valid VNI) flag
  kTruncatedGeneve,       // Geneve header (8 bytes + options) past the UDP payload
  kBadGeneve,             // Geneve version other than 0
  kTruncatedGre,          // GRE header (4 bytes + checksum/key/sequence fields) past the datagram
  kBadGre,                // GRE version 0 with routing / strict-route / recursion / reserved bits set, or a version other than 0 and 1
  kTruncatedMpls,         // MPLS label stack without a bottom-of-stack label before the end
  kBadMpls,               // more than kMaxMplsLabels labels
  kTunnelTooDeep,         // more nested encapsulations than dataplane.tunnels.max_depth
  kCount
};

const char* parseStatusName(ParseStatus s);

enum class L3Type : uint8_t { kNone = 0, kIpv4 = 4, kIpv6 = 6 };

// Encapsulations the parser opens (docs/tunnels.md).
enum class TunnelType : uint8_t { kNone = 0, kVxlan, kGeneve, kGre, kIpip, kMpls };
const char* tunnelTypeName(TunnelType t);

// Nesting depth the parser can record (dataplane.tunnels.max_depth is at most this).
constexpr uint32_t kMaxTunnelDepth = 4;

// One encapsulation layer of a packet, outermost first. Offsets into the frame.
struct TunnelLayer {
  uint16_t ip_off = 0;   // the IP header carrying the encapsulation (0 for MPLS over Ethernet)
  uint16_t hdr_off = 0;  // UDP header (VXLAN, Geneve), GRE header, first MPLS label; IP-in-IP:
                         // the inner IP header
  uint16_t eth_off = 0;  // inner Ethernet header (0: the inner packet starts with IP or MPLS)
  TunnelType type = TunnelType::kNone;
  uint8_t outer_v6 = 0;  // the carrying IP header is IPv6
};
static_assert(sizeof(TunnelLayer) == 8, "TunnelLayer: 8 bytes");

// IPv4 addresses occupy b[0..3] (network order) with b[4..15] zero.
struct IpAddr {
  uint8_t b[16];
  bool operator==(const IpAddr& o) const { return std::memcmp(b, o.b, 16) == 0; }
};

struct PacketMeta {
  uint32_t frame_len = 0;        // bytes in the frame as received
  uint16_t l3_offset = 0;        // start of the IP header (after L2, tags and a PPPoE header)
  uint16_t l4_offset = 0;        // start of the L4 header (after IPv4 options / IPv6 ext headers)
  uint16_t payload_offset = 0;   // start of L4 payload (valid when has_l4)
  uint16_t payload_len = 0;      // L4 payload bytes (by IP lengths, not frame padding)
  uint16_t ether_type = 0;       // ethertype after the tags (host order; 0x8864 for PPPoE)
  uint16_t vlan_outer = 0;       // VID of the outer tag (0 when untagged)
  uint16_t vlan_inner = 0;       // VID of the inner tag (QinQ), else 0
  uint8_t vlan_count = 0;        // 0, 1 or 2
  // PPPoE session (RFC 2516) carrying the IP packet: offset of the 6-byte PPPoE header (0 when
  // the IP packet is not inside PPPoE; it is always >= 14 otherwise) and its session id.
  // The PPP protocol field (2 bytes, or 1 when compressed) lies between it and l3_offset.
  uint16_t pppoe_offset = 0;
  uint16_t pppoe_session = 0;
  L3Type l3 = L3Type::kNone;
  uint8_t l4_proto = 0;          // IPPROTO_* of the transport (after IPv6 extension headers)
  uint8_t ttl = 0;               // IPv4 TTL / IPv6 hop limit
  uint16_t l3_len = 0;           // IP total length (IPv4) / 40 + payload length (IPv6)
  IpAddr src{};
  IpAddr dst{};
  // L4. Host byte order. For ICMP echo request/reply (v4 and v6) sport == dport == identifier,
  // so both directions of a ping share one flow; for other ICMP types both are 0.
  uint16_t sport = 0;
  uint16_t dport = 0;
  uint8_t tcp_flags = 0;         // FIN=0x01 SYN=0x02 RST=0x04 PSH=0x08 ACK=0x10 URG=0x20 ...
  uint32_t tcp_seq = 0;
  uint32_t tcp_ack = 0;
  uint8_t icmp_type = 0;
  uint8_t icmp_code = 0;
  bool has_l4 = false;           // L4 header parsed (false for non-first fragments, unknown protos)
  // Fragments (IPv4 MF/offset, IPv6 fragment extension header).
  bool is_fragment = false;      // any fragment, including the first
  bool more_fragments = false;
  uint16_t frag_offset = 0;      // in bytes
  uint16_t frag_payload_len = 0; // bytes of fragmentable payload carried by this fragment
  uint32_t frag_id = 0;          // IPv4 id (16 bits) or IPv6 identification (32 bits)
  // Tunnels (parsePacket with a TunnelParseConfig in inspect mode): every field above from
  // l3_offset on describes the innermost packet (the one judged); the VLAN / PPPoE fields
  // stay those of the outer frame. tunnel_id is the id of the innermost layer that carries
  // one (VXLAN / Geneve VNI, GRE key; 0 when none does: IP-in-IP, MPLS, unkeyed GRE).
  uint8_t tunnel_depth = 0;      // layers opened (0: not in a tunnel)
  // A UDP datagram to a VXLAN / Geneve port whose payload is not that tunnel's header (too
  // short, VXLAN without the I flag, Geneve version other than 0), a GRE packet whose header
  // does not parse (routing bit, version other than 0 and 1, cut short): judged as the plain
  // packet it is, with this set to the encapsulation its port or protocol names (counted
  // vxlan_not_parsed / geneve_not_parsed / gre_not_parsed); with dataplane.tunnels.strict the
  // parser returns the malformation instead. kNone otherwise.
  TunnelType tunnel_not_parsed = TunnelType::kNone;
  uint32_t tunnel_id = 0;
  TunnelLayer tunnel[kMaxTunnelDepth];

  bool inTunnel() const { return tunnel_depth != 0; }

  bool isFirstFragment() const { return is_fragment && frag_offset == 0; }
  bool isLaterFragment() const { return is_fragment && frag_offset != 0; }
};

// Sets `m` to PacketMeta{} (every default member initialiser above is zero; parser_test checks
// it) with plain 16-byte stores. `m = PacketMeta{}` compiles to a `rep stos` under the
// -march=corei7 tuning of DPDK's pkg-config flags, whose start-up cost was two thirds of
// parsePacket's time per 64-byte packet. The stores are written out one by one (an index
// sequence, no loop): GCC turns a loop of zero stores back into a memset, i.e. the same
// `rep stos` (seen in the profile of 2026-11-26: 70% of parseOuter's samples).
namespace packet_meta_detail {
template <size_t... K>
inline void zeroVectors(unsigned char* p, std::index_sequence<K...>) {
  ((_mm_storeu_si128(reinterpret_cast<__m128i*>(p + 16 * K), _mm_setzero_si128())), ...);
}
}  // namespace packet_meta_detail

inline void clearPacketMeta(PacketMeta& m) {
  static_assert(std::is_trivially_copyable_v<PacketMeta>);
  auto* p = reinterpret_cast<unsigned char*>(&m);
  constexpr size_t kVec = sizeof(PacketMeta) / 16;
  packet_meta_detail::zeroVectors(p, std::make_index_sequence<kVec>{});
  constexpr size_t kTail = sizeof(PacketMeta) % 16;
  if constexpr (kTail >= 8) {
    const uint64_t z = 0;
    std::memcpy(p + 16 * kVec, &z, 8);
  }
  if constexpr (kTail % 8 >= 4) {
    const uint32_t z = 0;
    std::memcpy(p + 16 * kVec + (kTail >= 8 ? 8 : 0), &z, 4);
  }
  for (size_t k = 16 * kVec + (kTail >= 8 ? 8 : 0) + (kTail % 8 >= 4 ? 4 : 0); k < sizeof(PacketMeta); ++k) p[k] = 0;
}

constexpr uint8_t kTcpFin = 0x01;
constexpr uint8_t kTcpSyn = 0x02;
constexpr uint8_t kTcpRst = 0x04;
constexpr uint8_t kTcpPsh = 0x08;
constexpr uint8_t kTcpAck = 0x10;
constexpr uint8_t kTcpUrg = 0x20;

}  // namespace dpu::dp
