// Frame parser: Ethernet, 802.1Q / 802.1ad (up to two tags), PPPoE sessions, IPv4 (with
// options), IPv6 (with extension headers), IPv4/IPv6 fragments, TCP, UDP, ICMP, ICMPv6.
// Pure function over bytes: never reads outside [data, data+len), never allocates.
//
// Inline: it runs once per packet on every worker. Header fields are read with memcpy and a
// byte swap, so `data` needs no particular alignment.
//
// Semantics beyond packet_meta.h:
// - Tag TPIDs 0x8100, 0x88a8 and 0x9100 are accepted in any order; a third tag is kTooManyVlans.
// - Only the first 65535 bytes of a frame are looked at (a DPDK segment never holds more), so
//   every offset fits in 16 bits; frame_len still reports `len`.
// - When has_l4 is false (later fragments, tiny first fragments, protocols without a parsed L4
//   header) payload_offset == l4_offset and payload_len counts the bytes after l4_offset.
// - UDP payload_len follows the UDP length field (which may be smaller than the IP datagram).
// - ICMP/ICMPv6 headers are 8 bytes; a non-echo message with 4..7 bytes has an empty payload.
// - First fragment (offset 0, MF set) too short for its L4 header (or, IPv6, for an extension
//   header that follows the fragment header): kOk with has_l4 false ("tiny fragment", decided by
//   fragment policy). A data offset < 5 or a UDP length < 8 stays malformed.
// - IPv6: l4_proto of a later fragment is the fragment header's next header; of a first
//   fragment it is the protocol found after walking the remaining extension headers. An IPv6
//   fragment header with offset 0 and M clear (atomic fragment) still marks a fragment.
// - IPv6 payload length 0 is taken literally (jumbograms are not supported).
// - PPPoE session frames (ethertype 0x8864 after the tags, version/type 0x11, code 0) whose PPP
//   protocol is IPv4 (0x0021) or IPv6 (0x0057), 2 bytes or compressed to 1 (RFC 1661 PFC), are
//   parsed like a tag: l3_offset points past the PPP protocol field and the IP packet must fit
//   in the PPPoE payload (the PPPoE length bounds it like the frame does; bytes after it are
//   padding). Every other PPPoE frame (discovery 0x8863, PPP control protocols such as LCP,
//   IPCP, PAP, another version/type or code) is kNonIp. A PPPoE session header cut short
//   is kTruncatedPppoe, a PPPoE length past the frame or shorter than the protocol field
//   kBadPppoeLength. No VLAN tag is looked for inside PPPoE.
#pragma once

#include <cstdint>
#include <cstring>

#include "dataplane/packet/packet_meta.h"

namespace dpu::dp {

namespace parser_detail {

constexpr uint32_t kEthHeaderLen = 14;
constexpr uint32_t kVlanTagLen = 4;
constexpr uint32_t kMaxVlanTags = 2;
constexpr uint32_t kMaxParsedLen = 0xFFFF;
constexpr uint16_t kEtherTypeIpv4 = 0x0800;
constexpr uint16_t kEtherTypeIpv6 = 0x86DD;
constexpr uint16_t kTpid8021Q = 0x8100;
constexpr uint16_t kTpid8021Ad = 0x88A8;
constexpr uint16_t kTpidQinQLegacy = 0x9100;
constexpr uint16_t kVlanVidMask = 0x0FFF;
constexpr uint16_t kEtherTypePppoeSession = 0x8864;
constexpr uint32_t kPppoeHeaderLen = 6;
constexpr uint8_t kPppoeVerType = 0x11;
constexpr uint8_t kPppoeCodeSession = 0x00;
constexpr uint16_t kPppIpv4 = 0x0021;
constexpr uint16_t kPppIpv6 = 0x0057;

constexpr uint32_t kIpv4MinHeaderLen = 20;
constexpr uint16_t kIpv4FlagMf = 0x2000;
constexpr uint16_t kIpv4OffsetMask = 0x1FFF;
constexpr uint32_t kIpv6HeaderLen = 40;
constexpr uint32_t kIpv6FragHeaderLen = 8;
constexpr uint16_t kIpv6FragOffsetMask = 0xFFF8;
constexpr uint16_t kIpv6FragMore = 0x0001;
constexpr uint32_t kIpv6MaxExtHeaders = 8;
constexpr uint32_t kMaxIpDatagram = 65535;

constexpr uint8_t kProtoHopByHop = 0;
constexpr uint8_t kProtoIcmp = 1;
constexpr uint8_t kProtoTcp = 6;
constexpr uint8_t kProtoUdp = 17;
constexpr uint8_t kProtoRouting = 43;
constexpr uint8_t kProtoFragment = 44;
constexpr uint8_t kProtoAh = 51;
constexpr uint8_t kProtoIcmpv6 = 58;
constexpr uint8_t kProtoDestOpts = 60;
constexpr uint8_t kProtoMobility = 135;

constexpr uint32_t kTcpMinHeaderLen = 20;
constexpr uint32_t kUdpHeaderLen = 8;
constexpr uint32_t kIcmpMinLen = 4;
constexpr uint32_t kIcmpEchoLen = 8;
constexpr uint8_t kIcmpEchoReply = 0;
constexpr uint8_t kIcmpEchoRequest = 8;
constexpr uint8_t kIcmpv6EchoRequest = 128;
constexpr uint8_t kIcmpv6EchoReply = 129;

inline uint16_t loadBe16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  v = __builtin_bswap16(v);
#endif
  return v;
}

inline uint32_t loadBe32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  v = __builtin_bswap32(v);
#endif
  return v;
}

inline bool isVlanTpid(uint16_t t) {
  return t == kTpid8021Q || t == kTpid8021Ad || t == kTpidQinQLegacy;
}

// No L4 header parsed: the payload is everything from l4_off to the end of the datagram.
inline void setOpaquePayload(uint32_t l4_off, uint32_t l3_end, PacketMeta& m) {
  m.payload_offset = static_cast<uint16_t>(l4_off);
  m.payload_len = static_cast<uint16_t>(l3_end - l4_off);
}

// Parses the L4 header of proto `proto` at [l4_off, l3_end). Caller guarantees that this is a
// non-fragment or a first fragment, and that l4_off <= l3_end <= parsed length.
inline ParseStatus parseL4(const uint8_t* data, uint32_t l4_off, uint32_t l3_end, bool v6,
                           PacketMeta& m) {
  const uint32_t avail = l3_end - l4_off;
  const uint8_t* p = data + l4_off;
  // A first fragment that cannot hold its L4 header is a tiny fragment, not a malformed packet.
  const bool tiny_ok = m.is_fragment && m.more_fragments;
  setOpaquePayload(l4_off, l3_end, m);
  switch (m.l4_proto) {
    case kProtoTcp: {
      if (avail < kTcpMinHeaderLen) return tiny_ok ? ParseStatus::kOk : ParseStatus::kTruncatedTcp;
      const uint32_t hlen = static_cast<uint32_t>(p[12] >> 4) * 4;
      if (hlen < kTcpMinHeaderLen) return ParseStatus::kBadTcpDataOffset;
      if (hlen > avail) return tiny_ok ? ParseStatus::kOk : ParseStatus::kBadTcpDataOffset;
      m.sport = loadBe16(p);
      m.dport = loadBe16(p + 2);
      m.tcp_seq = loadBe32(p + 4);
      m.tcp_ack = loadBe32(p + 8);
      m.tcp_flags = p[13];
      m.payload_offset = static_cast<uint16_t>(l4_off + hlen);
      m.payload_len = static_cast<uint16_t>(avail - hlen);
      m.has_l4 = true;
      return ParseStatus::kOk;
    }
    case kProtoUdp: {
      if (avail < kUdpHeaderLen) return tiny_ok ? ParseStatus::kOk : ParseStatus::kTruncatedUdp;
      const uint32_t ulen = loadBe16(p + 4);
      if (ulen < kUdpHeaderLen) return ParseStatus::kBadUdpLength;
      // A first fragment holds only part of the datagram the UDP length describes.
      if (!m.is_fragment && ulen > avail) return ParseStatus::kBadUdpLength;
      m.sport = loadBe16(p);
      m.dport = loadBe16(p + 2);
      m.payload_offset = static_cast<uint16_t>(l4_off + kUdpHeaderLen);
      m.payload_len = static_cast<uint16_t>((ulen < avail ? ulen : avail) - kUdpHeaderLen);
      m.has_l4 = true;
      return ParseStatus::kOk;
    }
    case kProtoIcmp:
    case kProtoIcmpv6: {
      if ((m.l4_proto == kProtoIcmpv6) != v6) return ParseStatus::kOk;  // ICMP over the wrong IP
      if (avail < kIcmpMinLen) return tiny_ok ? ParseStatus::kOk : ParseStatus::kTruncatedIcmp;
      const uint8_t type = p[0];
      const bool echo = v6 ? (type == kIcmpv6EchoRequest || type == kIcmpv6EchoReply)
                           : (type == kIcmpEchoRequest || type == kIcmpEchoReply);
      if (echo) {
        if (avail < kIcmpEchoLen) return tiny_ok ? ParseStatus::kOk : ParseStatus::kTruncatedIcmp;
        // Both directions of a ping share one flow: key on the identifier.
        m.sport = m.dport = loadBe16(p + 4);
      }
      m.icmp_type = type;
      m.icmp_code = p[1];
      const uint32_t hlen = avail < kIcmpEchoLen ? avail : kIcmpEchoLen;
      m.payload_offset = static_cast<uint16_t>(l4_off + hlen);
      m.payload_len = static_cast<uint16_t>(avail - hlen);
      m.has_l4 = true;
      return ParseStatus::kOk;
    }
    default:
      return ParseStatus::kOk;  // GRE, SCTP, ESP, ...: forwarded without L4 fields
  }
}

// Records fragment fields shared by IPv4 and IPv6 and checks the fragment's extent.
inline ParseStatus setFragment(uint32_t id, uint32_t offset, bool more, uint32_t frag_payload,
                               PacketMeta& m) {
  m.is_fragment = true;
  m.more_fragments = more;
  m.frag_offset = static_cast<uint16_t>(offset);
  m.frag_id = id;
  m.frag_payload_len = static_cast<uint16_t>(frag_payload);
  if (frag_payload == 0 || offset + frag_payload > kMaxIpDatagram) return ParseStatus::kBadFragment;
  return ParseStatus::kOk;
}

inline ParseStatus parseIpv4(const uint8_t* data, uint32_t off, uint32_t n, PacketMeta& m) {
  const uint32_t avail = n - off;
  if (avail < kIpv4MinHeaderLen) return ParseStatus::kTruncatedIpv4;
  const uint8_t* p = data + off;
  if ((p[0] >> 4) != 4) return ParseStatus::kBadIpv4Version;
  const uint32_t ihl = static_cast<uint32_t>(p[0] & 0x0F) * 4;
  if (ihl < kIpv4MinHeaderLen || ihl > avail) return ParseStatus::kBadIpv4Ihl;
  const uint32_t total = loadBe16(p + 2);
  if (total < ihl || total > avail) return ParseStatus::kBadIpv4TotalLength;

  m.l3 = L3Type::kIpv4;
  m.l3_len = static_cast<uint16_t>(total);
  m.ttl = p[8];
  m.l4_proto = p[9];
  // Each address as one 16-byte store (the 4 address bytes, then zeros): the flow key reads
  // the addresses right after (8 or 16 bytes at a time), and a load spanning two stores (an
  // address store and clearPacketMeta's) cannot be forwarded from the store buffer: a stall
  // of ~15 cycles per address.
  uint32_t s4, d4;
  std::memcpy(&s4, p + 12, 4);
  std::memcpy(&d4, p + 16, 4);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(m.src.b), _mm_cvtsi32_si128(static_cast<int>(s4)));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(m.dst.b), _mm_cvtsi32_si128(static_cast<int>(d4)));
  const uint32_t l4_off = off + ihl;
  const uint32_t l3_end = off + total;
  m.l4_offset = static_cast<uint16_t>(l4_off);

  const uint16_t frag = loadBe16(p + 6);
  const uint32_t frag_off = static_cast<uint32_t>(frag & kIpv4OffsetMask) * 8;
  const bool more = (frag & kIpv4FlagMf) != 0;
  if (more || frag_off != 0) {
    ParseStatus s = setFragment(loadBe16(p + 4), frag_off, more, total - ihl, m);
    if (s != ParseStatus::kOk) return s;
    if (frag_off != 0) {
      setOpaquePayload(l4_off, l3_end, m);
      return ParseStatus::kOk;
    }
  }
  return parseL4(data, l4_off, l3_end, false, m);
}

inline ParseStatus parseIpv6(const uint8_t* data, uint32_t off, uint32_t n, PacketMeta& m) {
  const uint32_t avail = n - off;
  if (avail < kIpv6HeaderLen) return ParseStatus::kTruncatedIpv6;
  const uint8_t* p = data + off;
  if ((p[0] >> 4) != 6) return ParseStatus::kBadIpv6Version;
  const uint32_t plen = loadBe16(p + 4);
  if (kIpv6HeaderLen + plen > avail) return ParseStatus::kBadIpv6PayloadLength;

  m.l3 = L3Type::kIpv6;
  m.l3_len = static_cast<uint16_t>(kIpv6HeaderLen + plen);
  m.ttl = p[7];
  std::memcpy(m.src.b, p + 8, 16);
  std::memcpy(m.dst.b, p + 24, 16);
  const uint32_t l3_end = off + kIpv6HeaderLen + plen;

  uint8_t nh = p[6];
  uint32_t cur = off + kIpv6HeaderLen;
  uint32_t count = 0;
  bool frag_seen = false;
  for (;;) {
    const bool ext = nh == kProtoHopByHop || nh == kProtoRouting || nh == kProtoFragment ||
                     nh == kProtoDestOpts || nh == kProtoAh || nh == kProtoMobility;
    if (!ext) break;
    if (++count > kIpv6MaxExtHeaders) return ParseStatus::kBadIpv6ExtHeader;
    if (nh == kProtoHopByHop && count != 1) return ParseStatus::kBadIpv6ExtHeader;
    const uint32_t left = l3_end - cur;
    if (nh == kProtoFragment) {
      if (frag_seen || left < kIpv6FragHeaderLen) return ParseStatus::kBadIpv6ExtHeader;
      frag_seen = true;
      const uint8_t* f = data + cur;
      const uint16_t fo = loadBe16(f + 2);
      nh = f[0];
      cur += kIpv6FragHeaderLen;
      m.l4_proto = nh;
      m.l4_offset = static_cast<uint16_t>(cur);
      const uint32_t frag_off = fo & kIpv6FragOffsetMask;
      ParseStatus s = setFragment(loadBe32(f + 4), frag_off, (fo & kIpv6FragMore) != 0,
                                  l3_end - cur, m);
      if (s != ParseStatus::kOk) return s;
      if (frag_off != 0) {
        setOpaquePayload(cur, l3_end, m);
        return ParseStatus::kOk;
      }
      continue;
    }
    // Hop-by-hop, routing, destination options, mobility: 8-byte units not counting the first
    // 8; AH: 4-byte units not counting the first 8.
    uint32_t hlen = 0;
    if (left >= 2) {
      const uint32_t units = data[cur + 1];
      hlen = nh == kProtoAh ? (units + 2) * 4 : (units + 1) * 8;
    }
    if (left < 2 || hlen > left) {
      if (frag_seen && m.more_fragments) {
        // The header chain continues in a later fragment: a tiny first fragment.
        m.l4_proto = nh;
        m.l4_offset = static_cast<uint16_t>(cur);
        setOpaquePayload(cur, l3_end, m);
        return ParseStatus::kOk;
      }
      return ParseStatus::kBadIpv6ExtHeader;
    }
    nh = data[cur];
    cur += hlen;
  }
  m.l4_proto = nh;
  m.l4_offset = static_cast<uint16_t>(cur);
  return parseL4(data, cur, l3_end, true, m);
}

}  // namespace parser_detail

// The dataplane.tunnels settings the parser needs, in a plain form (the worker fills it from
// the snapshot). A null config, or inspect false, is the outer-only parser.
constexpr uint32_t kMaxTunnelPorts = 8;
struct TunnelParseConfig {
  bool inspect = false;
  // A UDP datagram to a VXLAN / Geneve port that does not carry that tunnel's header, a GRE
  // packet whose header does not parse: false (default) judges it as the plain packet
  // (PacketMeta::tunnel_not_parsed), true returns the malformation (truncated_vxlan,
  // bad_vxlan, truncated_geneve, bad_geneve, truncated_gre, bad_gre).
  bool strict = false;
  uint8_t max_depth = 0;  // 1 .. kMaxTunnelDepth
  uint8_t n_vxlan = 0;
  uint8_t n_geneve = 0;
  uint16_t vxlan_ports[kMaxTunnelPorts] = {};
  uint16_t geneve_ports[kMaxTunnelPorts] = {};
};

namespace parser_detail {

constexpr uint16_t kEtherTypeTeb = 0x6558;   // transparent Ethernet bridging (GRE, Geneve)
constexpr uint16_t kEtherTypeMpls = 0x8847;
constexpr uint16_t kEtherTypeMplsMc = 0x8848;
constexpr uint8_t kProtoIpip = 4;
constexpr uint8_t kProtoIpv6InIp = 41;
constexpr uint8_t kProtoGre = 47;
constexpr uint32_t kVxlanHeaderLen = 8;
constexpr uint8_t kVxlanFlagI = 0x08;
constexpr uint32_t kGeneveHeaderLen = 8;
constexpr uint32_t kGreHeaderLen = 4;
constexpr uint16_t kGreFlagC = 0x8000;
constexpr uint16_t kGreFlagK = 0x2000;
constexpr uint16_t kGreFlagS = 0x1000;
// Routing present, strict source route, recursion control, reserved flags (RFC 1701 / 2784).
constexpr uint16_t kGreBadBits = 0x4000 | 0x0800 | 0x0700 | 0x00F8;
constexpr uint16_t kGreVersionMask = 0x0007;
constexpr uint32_t kMplsLabelLen = 4;
constexpr uint32_t kMaxMplsLabels = 8;

inline bool portIn(uint16_t port, const uint16_t* ports, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    if (ports[i] == port) return true;
  }
  return false;
}

// Clears the fields that describe the (previous) innermost packet; keeps the outer frame's
// L2 fields and the tunnel layers. Field by field (not a PacketMeta copy): per packet.
inline void resetForInner(PacketMeta& m) {
  m.l3_offset = m.l4_offset = m.payload_offset = m.payload_len = 0;
  m.l3 = L3Type::kNone;
  m.l4_proto = 0;
  m.ttl = 0;
  m.l3_len = 0;
  std::memset(m.src.b, 0, sizeof(m.src.b));
  std::memset(m.dst.b, 0, sizeof(m.dst.b));
  m.sport = m.dport = 0;
  m.tcp_flags = 0;
  m.tcp_seq = m.tcp_ack = 0;
  m.icmp_type = m.icmp_code = 0;
  m.has_l4 = false;
  m.is_fragment = m.more_fragments = false;
  m.frag_offset = m.frag_payload_len = 0;
  m.frag_id = 0;
}

inline ParseStatus parseIp(const uint8_t* data, uint32_t off, uint32_t end, PacketMeta& m) {
  if (off >= end) return ParseStatus::kTruncatedIpv4;
  const uint8_t v = data[off] >> 4;
  m.l3_offset = static_cast<uint16_t>(off);
  if (v == 6) return parseIpv6(data, off, end, m);
  return parseIpv4(data, off, end, m);  // version 4, or kBadIpv4Version
}

// MPLS label stack at [off, end): labels up to the bottom of stack, then IPv4 / IPv6 by the
// first nibble (anything else, e.g. an Ethernet pseudowire, is kNonIp).
inline ParseStatus parseMpls(const uint8_t* data, uint32_t off, uint32_t end, PacketMeta& m) {
  for (uint32_t i = 0;; ++i) {
    if (i == kMaxMplsLabels) return ParseStatus::kBadMpls;
    if (end - off < kMplsLabelLen) return ParseStatus::kTruncatedMpls;
    const bool bos = (data[off + 2] & 0x01) != 0;
    off += kMplsLabelLen;
    if (bos) break;
  }
  if (off >= end) return ParseStatus::kTruncatedMpls;
  const uint8_t v = data[off] >> 4;
  if (v != 4 && v != 6) return ParseStatus::kNonIp;
  return parseIp(data, off, end, m);
}

// Inner Ethernet frame at [off, end) (VXLAN, Geneve, GRE 0x6558): up to two tags (not
// recorded: the flow key keeps the outer frame's VLANs), then IPv4 / IPv6 / MPLS.
inline ParseStatus parseInnerEthernet(const uint8_t* data, uint32_t off, uint32_t end,
                                      PacketMeta& m, bool* mpls) {
  if (end - off < kEthHeaderLen) return ParseStatus::kTruncatedL2;
  uint16_t type = loadBe16(data + off + 12);
  off += kEthHeaderLen;
  uint32_t tags = 0;
  while (isVlanTpid(type)) {
    if (tags == kMaxVlanTags) return ParseStatus::kTooManyVlans;
    if (end - off < kVlanTagLen) return ParseStatus::kTruncatedVlan;
    type = loadBe16(data + off + 2);
    off += kVlanTagLen;
    ++tags;
  }
  if (type == kEtherTypeIpv4) {
    m.l3_offset = static_cast<uint16_t>(off);
    return parseIpv4(data, off, end, m);
  }
  if (type == kEtherTypeIpv6) {
    m.l3_offset = static_cast<uint16_t>(off);
    return parseIpv6(data, off, end, m);
  }
  if (type == kEtherTypeMpls || type == kEtherTypeMplsMc) {
    *mpls = true;
    m.l3_offset = static_cast<uint16_t>(off);
    return ParseStatus::kOk;
  }
  return ParseStatus::kNonIp;
}

// Opens the encapsulation the parsed (outer) packet carries, if any, layer by layer. `m`
// describes a packet parsed kOk. Outer fragments are not opened (their inner packet is
// incomplete): they are judged as the outer packet, as in outer-only mode.
// `mpls_first`: the frame's own ethertype is MPLS, its label stack at m.l3_offset up to
// `mpls_end`.
// The IP packet `m` describes is an encapsulation the parser opens: UDP to a VXLAN or Geneve
// port, GRE, IPv4 / IPv6 in IP (not a fragment). Inline: most packets carry no tunnel.
inline bool carriesTunnel(const PacketMeta& m, const TunnelParseConfig& tc) {
  if (m.l3 == L3Type::kNone || m.is_fragment) return false;
  if (m.l4_proto == kProtoUdp) {
    return m.has_l4 && (portIn(m.dport, tc.vxlan_ports, tc.n_vxlan) ||
                        portIn(m.dport, tc.geneve_ports, tc.n_geneve));
  }
  return m.l4_proto == kProtoGre || m.l4_proto == kProtoIpip || m.l4_proto == kProtoIpv6InIp;
}

inline ParseStatus decapsulate(const uint8_t* data, PacketMeta& m, const TunnelParseConfig& tc,
                               bool mpls_first, uint32_t mpls_end) {
  bool mpls = mpls_first;
  for (;;) {
    TunnelLayer layer;
    uint32_t inner = 0, end = 0;
    uint16_t inner_type = 0;  // ethertype of what follows the encapsulation header
    bool has_id = false;
    uint32_t id = 0;
    if (mpls) {
      layer.type = TunnelType::kMpls;
      layer.hdr_off = m.l3_offset;  // parseInnerEthernet / the caller put the stack start there
      inner = m.l3_offset;
      end = mpls_end;
    } else {
      if (!carriesTunnel(m, tc)) return ParseStatus::kOk;
      const uint32_t l3_end = uint32_t(m.l3_offset) + m.l3_len;
      layer.ip_off = m.l3_offset;
      layer.outer_v6 = m.l3 == L3Type::kIpv6;
      // The port (VXLAN, Geneve) or the protocol (GRE) alone names the tunnel: a payload that
      // is not its header is the plain datagram it is (a client that picked port 6081, the
      // answers to it; a GRE packet no decapsulator accepts), judged as such and counted,
      // unless tunnels are strict. `m` still describes that packet here.
      auto notTunnel = [&](TunnelType t, ParseStatus bad) {
        if (tc.strict) return bad;
        m.tunnel_not_parsed = t;
        return ParseStatus::kOk;
      };
      if (m.l4_proto == kProtoUdp) {  // to a VXLAN or Geneve port (carriesTunnel)
        const uint8_t* u = data + m.payload_offset;
        end = uint32_t(m.payload_offset) + m.payload_len;
        layer.hdr_off = m.l4_offset;
        if (portIn(m.dport, tc.vxlan_ports, tc.n_vxlan)) {
          layer.type = TunnelType::kVxlan;
          if (m.payload_len < kVxlanHeaderLen) {
            return notTunnel(TunnelType::kVxlan, ParseStatus::kTruncatedVxlan);
          }
          if (!(u[0] & kVxlanFlagI)) return notTunnel(TunnelType::kVxlan, ParseStatus::kBadVxlan);
          inner = m.payload_offset + kVxlanHeaderLen;
          inner_type = kEtherTypeTeb;
          has_id = true;
          id = loadBe32(u + 4) >> 8;
        } else {
          layer.type = TunnelType::kGeneve;
          if (m.payload_len < kGeneveHeaderLen) {
            return notTunnel(TunnelType::kGeneve, ParseStatus::kTruncatedGeneve);
          }
          if ((u[0] >> 6) != 0) return notTunnel(TunnelType::kGeneve, ParseStatus::kBadGeneve);
          const uint32_t hlen = kGeneveHeaderLen + (u[0] & 0x3F) * 4u;
          if (hlen > m.payload_len) {
            return notTunnel(TunnelType::kGeneve, ParseStatus::kTruncatedGeneve);
          }
          inner = m.payload_offset + hlen;
          inner_type = loadBe16(u + 2);
          has_id = true;
          id = loadBe32(u + 4) >> 8;
        }
      } else if (m.l4_proto == kProtoGre) {
        layer.type = TunnelType::kGre;
        layer.hdr_off = m.l4_offset;
        end = l3_end;
        const uint8_t* g = data + m.l4_offset;
        const uint32_t avail = l3_end - m.l4_offset;
        if (avail < kGreHeaderLen) return notTunnel(TunnelType::kGre, ParseStatus::kTruncatedGre);
        const uint16_t flags = loadBe16(g);
        const uint16_t ver = flags & kGreVersionMask;
        if (ver == 1) return ParseStatus::kOk;  // enhanced GRE (PPTP): judged as it is
        if (ver != 0 || (flags & kGreBadBits)) return notTunnel(TunnelType::kGre, ParseStatus::kBadGre);
        uint32_t hlen = kGreHeaderLen;
        if (flags & kGreFlagC) hlen += 4;
        const uint32_t key_at = hlen;
        if (flags & kGreFlagK) hlen += 4;
        if (flags & kGreFlagS) hlen += 4;
        if (hlen > avail) return notTunnel(TunnelType::kGre, ParseStatus::kTruncatedGre);
        if (flags & kGreFlagK) {
          has_id = true;
          id = loadBe32(g + key_at);
        }
        inner = m.l4_offset + hlen;
        inner_type = loadBe16(g + 2);
      } else {  // IPv4 / IPv6 in IP (carriesTunnel)
        layer.type = TunnelType::kIpip;
        layer.hdr_off = m.l4_offset;
        end = l3_end;
        inner = m.l4_offset;
        inner_type = m.l4_proto == kProtoIpip ? kEtherTypeIpv4 : kEtherTypeIpv6;
      }
      // Payloads the parser does not open (Geneve / GRE carrying another protocol, e.g.
      // ERSPAN or a keepalive): judged as the outer packet.
      if (inner_type != kEtherTypeTeb && inner_type != kEtherTypeIpv4 &&
          inner_type != kEtherTypeIpv6 && inner_type != kEtherTypeMpls &&
          inner_type != kEtherTypeMplsMc) {
        return ParseStatus::kOk;
      }
    }
    if (m.tunnel_depth >= tc.max_depth) return ParseStatus::kTunnelTooDeep;
    const uint8_t depth = m.tunnel_depth;
    resetForInner(m);
    if (inner_type == kEtherTypeTeb) layer.eth_off = static_cast<uint16_t>(inner);
    m.tunnel[depth] = layer;
    m.tunnel_depth = depth + 1;
    if (has_id) m.tunnel_id = id;
    ParseStatus s;
    mpls = false;
    if (layer.type == TunnelType::kMpls) {
      s = parseMpls(data, inner, end, m);
    } else if (inner_type == kEtherTypeTeb) {
      s = parseInnerEthernet(data, inner, end, m, &mpls);
      mpls_end = end;
    } else if (inner_type == kEtherTypeMpls || inner_type == kEtherTypeMplsMc) {
      m.l3_offset = static_cast<uint16_t>(inner);
      mpls = true;
      mpls_end = end;
      s = ParseStatus::kOk;
    } else {
      m.l3_offset = static_cast<uint16_t>(inner);
      s = inner_type == kEtherTypeIpv4 ? parseIpv4(data, inner, end, m)
                                       : parseIpv6(data, inner, end, m);
    }
    if (s != ParseStatus::kOk) return s;
  }
}

}  // namespace parser_detail

namespace parser_detail {

// The frame as the outer-only parser sees it.
inline ParseStatus parseOuter(const uint8_t* data, uint32_t len, PacketMeta& m) {
  clearPacketMeta(m);  // plain 16-byte stores (packet_meta.h)
  m.frame_len = len;
  const uint32_t n = len < kMaxParsedLen ? len : kMaxParsedLen;
  if (n < kEthHeaderLen) return ParseStatus::kTruncatedL2;

  uint32_t off = kEthHeaderLen;
  uint16_t type = loadBe16(data + 12);
  while (isVlanTpid(type)) {
    if (m.vlan_count == kMaxVlanTags) return ParseStatus::kTooManyVlans;
    if (n - off < kVlanTagLen) return ParseStatus::kTruncatedVlan;
    const uint16_t vid = loadBe16(data + off) & kVlanVidMask;
    if (m.vlan_count == 0) {
      m.vlan_outer = vid;
    } else {
      m.vlan_inner = vid;
    }
    ++m.vlan_count;
    type = loadBe16(data + off + 2);
    off += kVlanTagLen;
  }
  m.ether_type = type;
  m.l3_offset = static_cast<uint16_t>(off);

  if (type == kEtherTypeIpv4) return parseIpv4(data, off, n, m);
  if (type == kEtherTypeIpv6) return parseIpv6(data, off, n, m);
  if (type != kEtherTypePppoeSession) return ParseStatus::kNonIp;

  // PPPoE session header: ver/type, code, session id, length (of the PPP frame: protocol
  // field + information), then the PPP protocol field.
  if (n - off < kPppoeHeaderLen + 1) return ParseStatus::kTruncatedPppoe;
  const uint8_t* pp = data + off;
  if (pp[0] != kPppoeVerType || pp[1] != kPppoeCodeSession) return ParseStatus::kNonIp;
  // A protocol value's low byte is odd and its high byte even, so an odd first byte is a
  // compressed (1-byte) field.
  const uint32_t proto_len = (pp[6] & 1) ? 1 : 2;
  if (n - off < kPppoeHeaderLen + proto_len) return ParseStatus::kTruncatedPppoe;
  const uint16_t proto = proto_len == 1 ? pp[6] : loadBe16(pp + 6);
  if (proto != kPppIpv4 && proto != kPppIpv6) return ParseStatus::kNonIp;
  const uint32_t ppp_len = loadBe16(pp + 4);
  if (ppp_len < proto_len || ppp_len > n - off - kPppoeHeaderLen) {
    return ParseStatus::kBadPppoeLength;
  }
  m.pppoe_offset = static_cast<uint16_t>(off);
  m.pppoe_session = loadBe16(pp + 2);
  const uint32_t end = off + kPppoeHeaderLen + ppp_len;  // the IP packet ends by here
  off += kPppoeHeaderLen + proto_len;
  m.l3_offset = static_cast<uint16_t>(off);
  return proto == kPppIpv4 ? parseIpv4(data, off, end, m) : parseIpv6(data, off, end, m);
}

}  // namespace parser_detail

// Parses `len` bytes at `data` into `m` (fully overwritten). Returns kOk for an IP packet
// whose headers are consistent, kNonIp for a non-IP frame, or the malformation reason.
//
// With `tc` in inspect mode the parser also opens tunnels (docs/tunnels.md): VXLAN and Geneve
// (UDP to a configured destination port), GRE version 0 (checksum / key / sequence fields; Ethernet
// 0x6558, IPv4, IPv6 or MPLS inside), IPv4 / IPv6 in IPv4 / IPv6 (protocols 4 and 41), and MPLS
// (ethertype 0x8847 / 0x8848, and GRE carrying it: the label stack, then IPv4 / IPv6 by the
// first nibble). Nested up to tc->max_depth layers; the innermost packet is described in `m`.
// A VXLAN / Geneve / GRE header that does not parse leaves the packet as it is
// (m.tunnel_not_parsed), unless tc->strict returns the malformation.
inline ParseStatus parsePacket(const uint8_t* data, uint32_t len, PacketMeta& m,
                               const TunnelParseConfig* tc = nullptr) {
  using namespace parser_detail;
  const ParseStatus s = parseOuter(data, len, m);
  if (tc == nullptr || !tc->inspect) return s;
  // Most packets carry no tunnel: answered inline, before decapsulate's set-up.
  if (s == ParseStatus::kOk) return carriesTunnel(m, *tc) ? decapsulate(data, m, *tc, false, 0) : s;
  if (s == ParseStatus::kNonIp && m.l3 == L3Type::kNone &&
      (m.ether_type == kEtherTypeMpls || m.ether_type == kEtherTypeMplsMc) && m.pppoe_offset == 0) {
    return decapsulate(data, m, *tc, true, len < kMaxParsedLen ? len : kMaxParsedLen);
  }
  return s;
}

}  // namespace dpu::dp
