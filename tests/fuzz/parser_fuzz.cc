// Fuzz target: dpu::dp::parsePacket on whole frames (Ethernet header first).
//
// The input is the frame. Beyond "no crash, no out-of-bounds read" (the input sits in a heap
// buffer of exactly its size, so ASan catches any over-read), every result is checked:
// - the status agrees with an independent re-derivation of the L2 / IPv4 / IPv6 header checks,
//   and a deeper malformation reason names the protocol the meta says it was parsing;
// - kOk: every offset and length lies inside the frame and the IP datagram, every field the
//   meta reports is the byte value at the offset it claims (addresses, ports, TCP fields, ICMP
//   type/code, fragment fields, the IPv6 extension header walk), and has_l4 is true exactly
//   when the transport header is present and parsed (not a later fragment, a known transport
//   of the right IP version, and the header fits; a first fragment too short is a tiny
//   fragment with has_l4 false);
// - metamorphic: the same bytes at an odd address give the same meta; a kOk / kNonIp result
//   does not change when Ethernet padding is appended, when the frame is cut to the end of the
//   IP datagram (of the PPPoE payload that holds it), or when the frame grows past 64 KiB
//   (only the first 65535 bytes count).
// - PPPoE sessions carrying IPv4 / IPv6 are re-derived like tags (other PPPoE frames: kNonIp).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "dataplane/packet/parser.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using dpu::dp::L3Type;
using dpu::dp::PacketMeta;
using dpu::dp::ParseStatus;
using dpu::dp::parsePacket;
using dpu::fuzz::be16;
using dpu::fuzz::be32;
using dpu::fuzz::sameMeta;

constexpr uint32_t kCap = 65535;

bool isTpid(uint16_t t) { return t == 0x8100 || t == 0x88A8 || t == 0x9100; }
bool isV6Ext(uint8_t nh) {
  return nh == 0 || nh == 43 || nh == 44 || nh == 51 || nh == 60 || nh == 135;
}

// Re-derives the Ethernet, VLAN and IP header checks. Returns kOk when they pass (the rest of
// the packet decides), else the status parsePacket must return.
struct Early {
  ParseStatus status;
  uint32_t l3_off = 0;
  uint16_t type = 0;     // ethertype after the tags (m.ether_type)
  uint32_t tags = 0;
  uint16_t ip_type = 0;  // 0x0800 / 0x86DD: the IP version found (inside PPPoE or not)
  uint32_t end = 0;      // where the IP packet must end by: the frame, or the PPPoE payload
  uint32_t pppoe_off = 0;
};

Early earlyChecks(const uint8_t* d, uint32_t n) {
  Early e{ParseStatus::kOk};
  if (n < 14) return {ParseStatus::kTruncatedL2};
  uint32_t off = 14;
  uint16_t type = be16(d + 12);
  while (isTpid(type)) {
    if (e.tags == 2) return {ParseStatus::kTooManyVlans};
    if (n - off < 4) return {ParseStatus::kTruncatedVlan};
    type = be16(d + off + 2);
    off += 4;
    ++e.tags;
  }
  e.l3_off = off;
  e.type = type;
  e.ip_type = type;
  e.end = n;
  if (type == 0x8864) {  // PPPoE session: IPv4 / IPv6 inside is parsed, the rest is non-IP
    const uint8_t* s = d + off;
    if (n - off < 7) return {ParseStatus::kTruncatedPppoe};
    if (s[0] != 0x11 || s[1] != 0) {
      e.status = ParseStatus::kNonIp;
      return e;
    }
    const uint32_t plen = (s[6] & 1) ? 1 : 2;
    if (n - off < 6 + plen) return {ParseStatus::kTruncatedPppoe};
    const uint16_t proto = plen == 1 ? s[6] : be16(s + 6);
    if (proto != 0x21 && proto != 0x57) {
      e.status = ParseStatus::kNonIp;
      return e;
    }
    const uint32_t len = be16(s + 4);
    if (len < plen || len > n - off - 6) return {ParseStatus::kBadPppoeLength};
    e.pppoe_off = off;
    e.end = off + 6 + len;
    e.ip_type = proto == 0x21 ? 0x0800 : 0x86DD;
    off += 6 + plen;
    e.l3_off = off;
  }
  const uint32_t avail = e.end - off;
  const uint8_t* p = d + off;
  if (e.ip_type == 0x0800) {
    if (avail < 20) e.status = ParseStatus::kTruncatedIpv4;
    else if ((p[0] >> 4) != 4) e.status = ParseStatus::kBadIpv4Version;
    else if ((p[0] & 15) * 4u < 20 || (p[0] & 15) * 4u > avail) e.status = ParseStatus::kBadIpv4Ihl;
    else if (be16(p + 2) < (p[0] & 15) * 4u || be16(p + 2) > avail)
      e.status = ParseStatus::kBadIpv4TotalLength;
  } else if (e.ip_type == 0x86DD) {
    if (avail < 40) e.status = ParseStatus::kTruncatedIpv6;
    else if ((p[0] >> 4) != 6) e.status = ParseStatus::kBadIpv6Version;
    else if (40u + be16(p + 4) > avail) e.status = ParseStatus::kBadIpv6PayloadLength;
  } else {
    e.status = ParseStatus::kNonIp;
  }
  return e;
}

// Where the transport header starts, per an independent walk of the IP header(s).
struct L3Expect {
  uint32_t l4_off = 0;
  uint8_t proto = 0;
  bool frag = false;
  bool more = false;
  uint32_t frag_off = 0;
  uint32_t frag_id = 0;
  uint32_t frag_payload = 0;
  bool chain_cut = false;  // IPv6: the extension header chain continues in a later fragment
};

L3Expect expectIpv4(const uint8_t* p, uint32_t off) {
  L3Expect x;
  const uint32_t ihl = (p[0] & 15) * 4u;
  x.l4_off = off + ihl;
  x.proto = p[9];
  const uint16_t fo = be16(p + 6);
  x.more = (fo & 0x2000) != 0;
  x.frag_off = (fo & 0x1FFFu) * 8;
  x.frag = x.more || x.frag_off != 0;
  if (x.frag) {
    x.frag_id = be16(p + 4);
    x.frag_payload = be16(p + 2) - ihl;
  }
  return x;
}

L3Expect expectIpv6(const uint8_t* d, uint32_t off) {
  L3Expect x;
  const uint32_t end = off + 40 + be16(d + off + 4);
  uint32_t cur = off + 40;
  uint8_t nh = d[off + 6];
  uint32_t count = 0;
  while (isV6Ext(nh)) {
    ++count;
    FUZZ_CHECK(count <= 8);                // more is kBadIpv6ExtHeader
    FUZZ_CHECK(nh != 0 || count == 1);     // hop-by-hop only first
    if (nh == 44) {
      FUZZ_CHECK(!x.frag);                 // a second fragment header is malformed
      FUZZ_CHECK(end - cur >= 8);
      const uint16_t fo = be16(d + cur + 2);
      x.frag = true;
      x.frag_id = be32(d + cur + 4);
      x.frag_off = fo & 0xFFF8u;
      x.more = (fo & 1) != 0;
      nh = d[cur];
      cur += 8;
      x.frag_payload = end - cur;
      if (x.frag_off != 0) break;          // a later fragment: nothing after is parsed
      continue;
    }
    const uint32_t left = end - cur;
    const uint32_t len = left < 2 ? 0 : (nh == 51 ? (d[cur + 1] + 2u) * 4 : (d[cur + 1] + 1u) * 8);
    if (left < 2 || len > left) {
      FUZZ_CHECK(x.frag && x.more);        // otherwise kBadIpv6ExtHeader
      x.chain_cut = true;
      break;
    }
    nh = d[cur];
    cur += len;
  }
  x.l4_off = cur;
  x.proto = nh;
  return x;
}

void checkOk(const uint8_t* d, uint32_t len, const Early& e, const PacketMeta& m) {
  const uint32_t n = len < kCap ? len : kCap;
  // L2.
  FUZZ_CHECK(m.vlan_count == e.tags);
  FUZZ_CHECK(m.l3_offset == e.l3_off);
  FUZZ_CHECK(m.ether_type == e.type);
  FUZZ_CHECK(m.vlan_outer == (e.tags >= 1 ? (be16(d + 14) & 0x0FFF) : 0));
  FUZZ_CHECK(m.vlan_inner == (e.tags == 2 ? (be16(d + 18) & 0x0FFF) : 0));
  FUZZ_CHECK(m.pppoe_offset == e.pppoe_off);
  FUZZ_CHECK(m.pppoe_session == (e.pppoe_off ? be16(d + e.pppoe_off + 2) : 0));
  // L3.
  const uint32_t off = m.l3_offset;
  const uint8_t* p = d + off;
  L3Expect x;
  if (e.ip_type == 0x0800) {
    FUZZ_CHECK(m.l3 == L3Type::kIpv4);
    FUZZ_CHECK(m.l3_len == be16(p + 2));
    FUZZ_CHECK(m.ttl == p[8]);
    FUZZ_CHECK(std::memcmp(m.src.b, p + 12, 4) == 0);
    FUZZ_CHECK(std::memcmp(m.dst.b, p + 16, 4) == 0);
    static const uint8_t kZero[12] = {};
    FUZZ_CHECK(std::memcmp(m.src.b + 4, kZero, 12) == 0);
    FUZZ_CHECK(std::memcmp(m.dst.b + 4, kZero, 12) == 0);
    x = expectIpv4(p, off);
  } else {
    FUZZ_CHECK(e.ip_type == 0x86DD);
    FUZZ_CHECK(m.l3 == L3Type::kIpv6);
    FUZZ_CHECK(m.l3_len == 40u + be16(p + 4));
    FUZZ_CHECK(m.ttl == p[7]);
    FUZZ_CHECK(std::memcmp(m.src.b, p + 8, 16) == 0);
    FUZZ_CHECK(std::memcmp(m.dst.b, p + 24, 16) == 0);
    x = expectIpv6(d, off);
  }
  const uint32_t l3_end = off + m.l3_len;
  FUZZ_CHECK(l3_end <= n && l3_end <= e.end);
  FUZZ_CHECK(m.l4_offset == x.l4_off);
  FUZZ_CHECK(m.l4_proto == x.proto);
  FUZZ_CHECK(off < m.l4_offset && m.l4_offset <= l3_end);
  FUZZ_CHECK(m.l4_offset <= m.payload_offset);
  FUZZ_CHECK(static_cast<uint32_t>(m.payload_offset) + m.payload_len <= l3_end);
  // Fragments.
  FUZZ_CHECK(m.is_fragment == x.frag);
  if (x.frag) {
    FUZZ_CHECK(m.more_fragments == x.more);
    FUZZ_CHECK(m.frag_offset == x.frag_off);
    FUZZ_CHECK(m.frag_id == x.frag_id);
    FUZZ_CHECK(m.frag_payload_len == x.frag_payload);
    FUZZ_CHECK(m.frag_payload_len > 0);
    FUZZ_CHECK(static_cast<uint32_t>(m.frag_offset) + m.frag_payload_len <= 65535u);
  } else {
    FUZZ_CHECK(!m.more_fragments && m.frag_offset == 0 && m.frag_id == 0 &&
               m.frag_payload_len == 0);
  }
  // L4: is the transport header present, and does it fit?
  const uint32_t l4 = m.l4_offset;
  const uint32_t avail = l3_end - l4;
  const uint8_t* t = d + l4;
  const bool v6 = m.l3 == L3Type::kIpv6;
  const bool tiny_ok = m.is_fragment && m.more_fragments;
  bool want_l4 = false;
  if (!m.isLaterFragment() && !x.chain_cut) {
    switch (m.l4_proto) {
      case 6:
        want_l4 = avail >= 20 && (t[12] >> 4) * 4u <= avail;
        if (avail >= 20) FUZZ_CHECK((t[12] >> 4) >= 5);  // data offset < 5 is malformed
        break;
      case 17:
        want_l4 = avail >= 8;
        if (want_l4) {
          FUZZ_CHECK(be16(t + 4) >= 8);
          if (!m.is_fragment) FUZZ_CHECK(be16(t + 4) <= avail);
        }
        break;
      case 1:
      case 58:
        if ((m.l4_proto == 58) != v6) break;  // ICMP over the wrong IP version: no L4
        want_l4 = avail >= 4;
        if (want_l4) {
          const bool echo = v6 ? (t[0] == 128 || t[0] == 129) : (t[0] == 0 || t[0] == 8);
          if (echo && avail < 8) want_l4 = false;
        }
        break;
      default:
        break;
    }
    const bool known = m.l4_proto == 6 || m.l4_proto == 17 ||
                       (m.l4_proto == 1 && !v6) || (m.l4_proto == 58 && v6);
    // A known transport whose header does not fit is only kOk as a tiny first fragment.
    if (known && !want_l4) FUZZ_CHECK(tiny_ok);
  }
  if (x.chain_cut) FUZZ_CHECK(tiny_ok);
  FUZZ_CHECK(m.has_l4 == want_l4);
  if (!m.has_l4) {
    FUZZ_CHECK(m.sport == 0 && m.dport == 0 && m.tcp_flags == 0 && m.tcp_seq == 0 &&
               m.tcp_ack == 0 && m.icmp_type == 0 && m.icmp_code == 0);
    FUZZ_CHECK(m.payload_offset == l4);
    FUZZ_CHECK(m.payload_len == avail);
    return;
  }
  FUZZ_CHECK(!m.isLaterFragment());
  switch (m.l4_proto) {
    case 6: {
      const uint32_t hl = (t[12] >> 4) * 4u;
      FUZZ_CHECK(m.sport == be16(t) && m.dport == be16(t + 2));
      FUZZ_CHECK(m.tcp_seq == be32(t + 4) && m.tcp_ack == be32(t + 8));
      FUZZ_CHECK(m.tcp_flags == t[13]);
      FUZZ_CHECK(m.payload_offset == l4 + hl);
      FUZZ_CHECK(m.payload_len == avail - hl);
      FUZZ_CHECK(m.icmp_type == 0 && m.icmp_code == 0);
      break;
    }
    case 17: {
      const uint32_t ulen = be16(t + 4);
      FUZZ_CHECK(m.sport == be16(t) && m.dport == be16(t + 2));
      FUZZ_CHECK(m.payload_offset == l4 + 8);
      FUZZ_CHECK(m.payload_len == (ulen < avail ? ulen : avail) - 8);
      FUZZ_CHECK(m.tcp_flags == 0 && m.tcp_seq == 0 && m.tcp_ack == 0);
      FUZZ_CHECK(m.icmp_type == 0 && m.icmp_code == 0);
      break;
    }
    case 1:
    case 58: {
      const bool echo = v6 ? (t[0] == 128 || t[0] == 129) : (t[0] == 0 || t[0] == 8);
      FUZZ_CHECK(m.icmp_type == t[0] && m.icmp_code == t[1]);
      if (echo) {
        FUZZ_CHECK(m.sport == be16(t + 4) && m.dport == m.sport);
      } else {
        FUZZ_CHECK(m.sport == 0 && m.dport == 0);
      }
      const uint32_t hl = avail < 8 ? avail : 8;
      FUZZ_CHECK(m.payload_offset == l4 + hl);
      FUZZ_CHECK(m.payload_len == avail - hl);
      FUZZ_CHECK(m.tcp_flags == 0 && m.tcp_seq == 0 && m.tcp_ack == 0);
      break;
    }
    default:
      FUZZ_CHECK(!"has_l4 for a transport the parser does not decode");
  }
}

// Statuses past the IP header name what the meta says was being parsed.
void checkDeepStatus(ParseStatus s, const PacketMeta& m) {
  const bool v6 = m.l3 == L3Type::kIpv6;
  FUZZ_CHECK(m.l3 != L3Type::kNone);
  FUZZ_CHECK(!m.has_l4);
  switch (s) {
    case ParseStatus::kBadIpv6ExtHeader:
      FUZZ_CHECK(v6);
      break;
    case ParseStatus::kBadFragment:
      FUZZ_CHECK(m.is_fragment);
      FUZZ_CHECK(m.frag_payload_len == 0 ||
                 static_cast<uint32_t>(m.frag_offset) + m.frag_payload_len > 65535u);
      break;
    case ParseStatus::kTruncatedTcp:
    case ParseStatus::kBadTcpDataOffset:
      FUZZ_CHECK(m.l4_proto == 6 && !m.isLaterFragment());
      break;
    case ParseStatus::kTruncatedUdp:
    case ParseStatus::kBadUdpLength:
      FUZZ_CHECK(m.l4_proto == 17 && !m.isLaterFragment());
      break;
    case ParseStatus::kTruncatedIcmp:
      FUZZ_CHECK((m.l4_proto == 1 && !v6) || (m.l4_proto == 58 && v6));
      FUZZ_CHECK(!m.isLaterFragment());
      break;
    default:
      FUZZ_CHECK(!"status not reachable after the IP header checks");
  }
  if (s != ParseStatus::kBadIpv6ExtHeader && s != ParseStatus::kBadFragment) {
    FUZZ_CHECK(m.l3_offset < m.l4_offset);
    FUZZ_CHECK(static_cast<uint32_t>(m.l4_offset) <= static_cast<uint32_t>(m.l3_offset) + m.l3_len);
  }
}

ParseStatus parseCopy(const uint8_t* src, uint32_t len, uint32_t copy_len, size_t align,
                      PacketMeta& m) {
  // Exactly `len` bytes end the allocation, so an over-read trips ASan.
  // Bytes past copy_len repeat the source (zeros for an empty source).
  std::vector<uint8_t> buf(align + len);
  const uint32_t c = copy_len < len ? copy_len : len;
  if (c != 0) std::memcpy(buf.data() + align, src, c);
  for (uint32_t i = c; c != 0 && i < len; ++i) buf[align + i] = src[i % c];
  std::memset(static_cast<void*>(&m), 0xA5, sizeof(m));  // every field must be overwritten
  return parsePacket(buf.data() + align, len, m);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 2 * kCap) return 0;
  const uint32_t len = static_cast<uint32_t>(size);
  PacketMeta m;
  const ParseStatus s = parsePacket(data, len, m);
  FUZZ_CHECK(static_cast<int>(s) < static_cast<int>(ParseStatus::kCount));
  FUZZ_CHECK(m.frame_len == len);
  FUZZ_CHECK(m.vlan_count <= 2);

  const uint32_t n = len < kCap ? len : kCap;
  const Early e = earlyChecks(data, n);
  if (e.status != ParseStatus::kOk) {
    FUZZ_CHECK(s == e.status);
    if (s == ParseStatus::kNonIp) {
      FUZZ_CHECK(m.l3 == L3Type::kNone && !m.has_l4 && !m.is_fragment);
      FUZZ_CHECK(m.l3_offset == e.l3_off && m.ether_type == e.type && m.vlan_count == e.tags);
    } else {
      FUZZ_CHECK(m.l3 == L3Type::kNone && !m.has_l4);
    }
  } else if (s == ParseStatus::kOk) {
    checkOk(data, len, e, m);
  } else {
    FUZZ_CHECK(s != ParseStatus::kNonIp && s != ParseStatus::kTruncatedL2);
    checkDeepStatus(s, m);
  }

  // Same bytes at an odd address, with the meta pre-filled with garbage: same answer.
  PacketMeta m2;
  FUZZ_CHECK(parseCopy(data, len, len, 1, m2) == s);
  FUZZ_CHECK(sameMeta(m, m2, true));

  if (s == ParseStatus::kOk || s == ParseStatus::kNonIp) {
    // Ethernet padding / trailer bytes after the datagram change nothing.
    const uint32_t pad = 1 + (len % 61);
    FUZZ_CHECK(parseCopy(data, len + pad, len, 0, m2) == s);
    FUZZ_CHECK(sameMeta(m, m2, false) && m2.frame_len == len + pad);
    // Cut right after the IP datagram or the PPPoE payload that holds it (non-IP: after the
    // L2 header; a non-IP PPPoE frame is not cut, its header decides): same result.
    uint32_t cut = s == ParseStatus::kOk ? m.l3_offset + m.l3_len : m.l3_offset;
    if (m.pppoe_offset != 0) cut = m.pppoe_offset + 6u + be16(data + m.pppoe_offset + 4);
    if (s == ParseStatus::kNonIp && m.ether_type == 0x8864) cut = len;
    FUZZ_CHECK(parseCopy(data, cut, cut, 0, m2) == s);
    FUZZ_CHECK(sameMeta(m, m2, false) && m2.frame_len == cut);
  }
  // Past 64 KiB only the first 65535 bytes count (once in a while: it copies 64 KiB).
  if (size % 32 == 7 || size > kCap) {
    const uint32_t big = kCap + 1 + (len % 97);
    PacketMeta mb, mc;
    const ParseStatus sb = parseCopy(data, big, len, 0, mb);
    const ParseStatus sc = parseCopy(data, kCap, len, 0, mc);
    FUZZ_CHECK(sb == sc && sameMeta(mb, mc, false) && mb.frame_len == big);
    if (len <= kCap && (s == ParseStatus::kOk || s == ParseStatus::kNonIp)) {
      FUZZ_CHECK(sb == s && sameMeta(m, mb, false));
    }
  }
  return 0;
}
