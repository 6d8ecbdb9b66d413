// Test helpers: a frame built with PacketBuilder wrapped in a tunnel (VXLAN, Geneve, GRE,
// IP-in-IP, MPLS). The outer headers have correct lengths and checksums (PacketBuilder's),
// so a test damages them explicitly when it wants a malformed tunnel.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tests/util/packet_builder.h"

namespace dpu::test {

struct Outer {
  std::string src = "192.0.2.1";
  std::string dst = "192.0.2.2";
  bool v6 = false;  // src/dst are IPv6 text then
  MacAddr src_mac = {0x02, 0, 0, 0, 0xaa, 0x01};
  MacAddr dst_mac = {0x02, 0, 0, 0, 0xaa, 0x02};
};

inline Outer outerV6() {
  Outer o;
  o.src = "2001:db8:ffff::1";
  o.dst = "2001:db8:ffff::2";
  o.v6 = true;
  return o;
}

// The IP packet of an Ethernet frame (no VLAN tags): bytes 14.. .
inline Frame ipOf(const Frame& f) { return Frame(f.begin() + 14, f.end()); }

inline PacketBuilder outerIp(const Outer& o) {
  PacketBuilder b;
  b.eth(o.src_mac, o.dst_mac);
  if (o.v6) {
    b.ipv6(o.src, o.dst);
  } else {
    b.ipv4(o.src, o.dst);
  }
  return b;
}

inline Frame cat(std::vector<uint8_t> a, const Frame& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// VXLAN (RFC 7348): flags 0x08 (I), VNI, the inner Ethernet frame.
inline Frame vxlanFrame(const Frame& inner, uint32_t vni, const Outer& o = Outer(),
                        uint16_t dport = 4789, uint16_t sport = 49152, uint8_t flags = 0x08) {
  std::vector<uint8_t> h = {flags, 0, 0, 0, uint8_t(vni >> 16), uint8_t(vni >> 8), uint8_t(vni), 0};
  return outerIp(o).udp(sport, dport).payload(cat(h, inner)).build();
}

// Geneve (RFC 8926): version 0, `opt_words` 4-byte option words (zeros), protocol, VNI.
// `inner` is an Ethernet frame for 0x6558, else the bytes carried (e.g. ipOf(frame)).
inline Frame geneveFrame(const Frame& inner, uint32_t vni, const Outer& o = Outer(),
                         uint16_t proto = 0x6558, uint8_t opt_words = 0, uint8_t version = 0,
                         uint16_t dport = 6081) {
  std::vector<uint8_t> h = {uint8_t((version << 6) | opt_words), 0, uint8_t(proto >> 8),
                            uint8_t(proto), uint8_t(vni >> 16), uint8_t(vni >> 8), uint8_t(vni), 0};
  h.resize(8 + 4u * opt_words, 0);
  return outerIp(o).udp(49153, dport).payload(cat(h, inner)).build();
}

struct GreOpts {
  bool checksum = false;
  bool key = false;
  uint32_t key_value = 0;
  bool seq = false;
  uint32_t seq_value = 0;
  uint16_t extra_flags = 0;  // OR'ed into the flags word (damage: routing bit, version ...)
};

// GRE (RFC 2784 / 2890): flags, protocol, optional checksum / key / sequence, `inner`
// (Ethernet frame for 0x6558, else the carried bytes).
inline Frame greFrame(const Frame& inner, uint16_t proto, const GreOpts& g = GreOpts(),
                      const Outer& o = Outer()) {
  uint16_t flags = static_cast<uint16_t>((g.checksum ? 0x8000 : 0) | (g.key ? 0x2000 : 0) |
                                         (g.seq ? 0x1000 : 0) | g.extra_flags);
  std::vector<uint8_t> h = {uint8_t(flags >> 8), uint8_t(flags), uint8_t(proto >> 8), uint8_t(proto)};
  auto put32 = [&](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) h.push_back(uint8_t(v >> s));
  };
  if (g.checksum) put32(0);
  if (g.key) put32(g.key_value);
  if (g.seq) put32(g.seq_value);
  Frame body = cat(h, inner);
  if (g.checksum) {
    const uint16_t c = inetChecksum(body.data(), body.size());
    body[4] = uint8_t(c >> 8);
    body[5] = uint8_t(c);
  }
  return outerIp(o).l4Raw(kIpProtoGre).payload(body).build();
}

// IPv4 / IPv6 in IPv4 / IPv6: the inner frame's IP packet after the outer IP header.
inline Frame ipipFrame(const Frame& inner_eth, const Outer& o = Outer()) {
  Frame ip = ipOf(inner_eth);
  const uint8_t proto = (ip[0] >> 4) == 6 ? 41 : 4;
  return outerIp(o).l4Raw(proto).payload(ip).build();
}

// MPLS over Ethernet (0x8847): `labels` outermost first (bottom of stack set on the last),
// then the inner frame's IP packet (or `raw` bytes when given).
inline Frame mplsFrame(const Frame& inner_eth, const std::vector<uint32_t>& labels,
                       const Outer& o = Outer(), bool set_bos = true) {
  std::vector<uint8_t> h;
  for (size_t i = 0; i < labels.size(); ++i) {
    const uint32_t l = labels[i];
    const bool bos = set_bos && i + 1 == labels.size();
    h.push_back(uint8_t(l >> 12));
    h.push_back(uint8_t(l >> 4));
    h.push_back(uint8_t(((l & 0xF) << 4) | (bos ? 1 : 0)));
    h.push_back(64);  // TTL
  }
  return PacketBuilder().eth(o.src_mac, o.dst_mac).etherType(0x8847).payload(cat(h, ipOf(inner_eth))).build();
}

}  // namespace dpu::test
