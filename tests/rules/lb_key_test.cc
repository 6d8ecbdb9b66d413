// Key field extraction (rules/compiled/lb.h) over frames built in code and parsed by the real
// parser: every named field, every raw anchor, offsets at the edges of what the anchor allows,
// masks, and missing fields (wrong protocol, too short) with the 5-tuple fallback.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dataplane/packet/parser.h"
#include "dataplane/stages/lb/lb_view.h"
#include "rules/compile/lb_compiler.h"
#include "rules/compiled/lb.h"
#include "tests/util/packet_builder.h"
#include "tests/util/tunnel_frames.h"

namespace dpu::rules {
namespace {

using test::Frame;
using test::PacketBuilder;

struct Parsed {
  Frame f;
  dp::PacketMeta m;
  LbPacket p;
};

Parsed parse(Frame f) {
  Parsed r;
  r.f = std::move(f);
  auto st = dp::parsePacket(r.f.data(), uint32_t(r.f.size()), r.m);
  EXPECT_TRUE(st == dp::ParseStatus::kOk || st == dp::ParseStatus::kNonIp);
  dp::lbView(r.m, r.f.data(), uint32_t(r.f.size()), r.p);
  return r;
}

CompiledLbField named(LbFieldKind k) {
  CompiledLbField f;
  f.kind = k;
  f.length = uint8_t(lbFieldWidth(k));
  return f;
}

CompiledLbField raw(LbAnchor a, uint16_t off, uint8_t len) {
  CompiledLbField f;
  f.kind = LbFieldKind::kRaw;
  f.anchor = a;
  f.offset = off;
  f.length = len;
  return f;
}

// The bytes field f yields for p, or nullopt when missing.
std::optional<std::vector<uint8_t>> get(const CompiledLbField& f, const LbPacket& p) {
  uint8_t buf[256];
  int n = lbExtractField(f, p, buf);
  if (n < 0) return std::nullopt;
  return std::vector<uint8_t>(buf, buf + n);
}

std::vector<uint8_t> bytes(std::initializer_list<int> v) {
  std::vector<uint8_t> out;
  for (int b : v) out.push_back(uint8_t(b));
  return out;
}

std::vector<uint8_t> slice(const Frame& f, size_t off, size_t n) {
  return std::vector<uint8_t>(f.begin() + off, f.begin() + off + n);
}

TEST(LbKey, NamedFieldsIpv4Tcp) {
  auto r = parse(PacketBuilder().vlan(42).ipv4("10.1.2.3", "192.0.2.10").tcp(40000, 443).build());
  auto src = get(named(LbFieldKind::kIpSrc), r.p);
  ASSERT_TRUE(src);
  EXPECT_EQ(*src, bytes({10, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(*get(named(LbFieldKind::kIpDst), r.p),
            bytes({192, 0, 2, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(*get(named(LbFieldKind::kL4Sport), r.p), bytes({40000 >> 8, 40000 & 0xff}));
  EXPECT_EQ(*get(named(LbFieldKind::kL4Dport), r.p), bytes({1, 187}));
  EXPECT_EQ(*get(named(LbFieldKind::kIpProto), r.p), bytes({6}));
  EXPECT_EQ(*get(named(LbFieldKind::kVlan), r.p), bytes({0, 42}));
  EXPECT_FALSE(get(named(LbFieldKind::kIpv6FlowLabel), r.p)) << "IPv4 has no flow label";
  EXPECT_FALSE(get(named(LbFieldKind::kDnsQname), r.p)) << "no DNS message";
}

TEST(LbKey, MissingNamedFields) {
  auto icmp = parse(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").icmp(8, 0, 7, 1).build());
  EXPECT_FALSE(get(named(LbFieldKind::kL4Sport), icmp.p)) << "ICMP has no ports";
  EXPECT_FALSE(get(named(LbFieldKind::kL4Dport), icmp.p));
  EXPECT_FALSE(get(named(LbFieldKind::kVlan), icmp.p)) << "untagged";
  EXPECT_TRUE(get(named(LbFieldKind::kIpProto), icmp.p));
  // A later fragment: addresses yes, ports no.
  auto frags = test::fragmentIpv4(
      PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).payload(std::string(64, 'x')).build(),
      32);
  ASSERT_GE(frags.size(), 2u);
  auto later = parse(frags[1]);
  EXPECT_TRUE(get(named(LbFieldKind::kIpSrc), later.p));
  EXPECT_FALSE(get(named(LbFieldKind::kL4Sport), later.p));
  EXPECT_FALSE(get(raw(LbAnchor::kL4, 0, 2), later.p));
  EXPECT_FALSE(get(raw(LbAnchor::kPayload, 0, 1), later.p));
  // Non-IP: nothing but l2.
  auto arp = parse(PacketBuilder().arp(1, "10.0.0.1", "10.0.0.2").build());
  EXPECT_FALSE(get(named(LbFieldKind::kIpSrc), arp.p));
  EXPECT_FALSE(get(named(LbFieldKind::kIpProto), arp.p));
  EXPECT_FALSE(get(raw(LbAnchor::kL3, 0, 1), arp.p));
  EXPECT_TRUE(get(raw(LbAnchor::kL2, 12, 2), arp.p));
}

// Issue 16: tunnel_id, and the named fields of a tunneled packet are its inner packet's.
TEST(LbKey, TunnelIdAndInnerFields) {
  dp::TunnelParseConfig tc;
  tc.inspect = true;
  tc.max_depth = 3;
  tc.n_vxlan = 1;
  tc.vxlan_ports[0] = 4789;
  auto parseT = [&](Frame f) {
    Parsed r;
    r.f = std::move(f);
    EXPECT_EQ(dp::parsePacket(r.f.data(), uint32_t(r.f.size()), r.m, &tc), dp::ParseStatus::kOk);
    dp::lbView(r.m, r.f.data(), uint32_t(r.f.size()), r.p);
    return r;
  };
  const Frame inner = PacketBuilder().ipv4("10.1.2.3", "192.0.2.10").tcp(40000, 443).build();
  auto vx = parseT(test::vxlanFrame(inner, 0x0a0b0c));
  EXPECT_EQ(*get(named(LbFieldKind::kTunnelId), vx.p), bytes({0, 0x0a, 0x0b, 0x0c}));
  EXPECT_EQ(*get(named(LbFieldKind::kIpSrc), vx.p),
            bytes({10, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(*get(named(LbFieldKind::kL4Dport), vx.p), bytes({1, 187}));
  test::GreOpts k;
  k.key = true;
  k.key_value = 0xfedcba98;
  auto gre = parseT(test::greFrame(test::ipOf(inner), 0x0800, k));
  EXPECT_EQ(*get(named(LbFieldKind::kTunnelId), gre.p), bytes({0xfe, 0xdc, 0xba, 0x98}));
  auto ipip = parseT(test::ipipFrame(inner));
  EXPECT_EQ(*get(named(LbFieldKind::kTunnelId), ipip.p), bytes({0, 0, 0, 0})) << "no id: 0";
  auto plain = parseT(inner);
  EXPECT_FALSE(get(named(LbFieldKind::kTunnelId), plain.p)) << "outside tunnels: missing";
  EXPECT_STREQ(lbFieldName(LbFieldKind::kTunnelId), "tunnel_id");
  EXPECT_EQ(lbFieldWidth(LbFieldKind::kTunnelId), 4u);
}

TEST(LbKey, Ipv6FlowLabelAndAddresses) {
  Frame f = PacketBuilder().ipv6("2001:db8::1", "2001:db8::2").udp(5000, 53).build();
  // Flow label 0xABCDE: low nibble of byte 1, bytes 2 and 3 of the IPv6 header.
  f[14 + 1] = uint8_t((f[14 + 1] & 0xf0) | 0x0A);
  f[14 + 2] = 0xBC;
  f[14 + 3] = 0xDE;
  auto r = parse(f);
  EXPECT_EQ(*get(named(LbFieldKind::kIpv6FlowLabel), r.p), bytes({0, 0x0A, 0xBC, 0xDE}));
  auto src = *get(named(LbFieldKind::kIpSrc), r.p);
  EXPECT_EQ(src[0], 0x20);
  EXPECT_EQ(src[15], 1);
}

Frame dnsQuery(bool tcp, const std::string& name, uint16_t qdcount = 1) {
  std::vector<uint8_t> msg = {0x12, 0x34, 0x01, 0x00, uint8_t(qdcount >> 8), uint8_t(qdcount),
                              0, 0, 0, 0, 0, 0};
  size_t start = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string::npos) dot = name.size();
    msg.push_back(uint8_t(dot - start));
    for (size_t i = start; i < dot; ++i) msg.push_back(uint8_t(name[i]));
    start = dot + 1;
  }
  msg.push_back(0);
  msg.insert(msg.end(), {0, 1, 0, 1});
  PacketBuilder b;
  b.ipv4("10.0.0.1", "10.0.0.53");
  if (tcp) {
    std::vector<uint8_t> framed = {uint8_t(msg.size() >> 8), uint8_t(msg.size())};
    framed.insert(framed.end(), msg.begin(), msg.end());
    b.tcp(3333, 53, dp::kTcpAck | dp::kTcpPsh).payload(framed);
  } else {
    b.udp(3333, 53).payload(msg);
  }
  return b.build();
}

TEST(LbKey, DnsQname) {
  auto f = named(LbFieldKind::kDnsQname);
  auto udp = get(f, parse(dnsQuery(false, "WWW.Example.com")).p);
  ASSERT_TRUE(udp);
  std::vector<uint8_t> want = {3, 'w', 'w', 'w', 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o',
                               'm', 0};
  EXPECT_EQ(*udp, want) << "lower-cased wire format";
  auto tcp = get(f, parse(dnsQuery(true, "www.example.com")).p);
  ASSERT_TRUE(tcp);
  EXPECT_EQ(*tcp, want) << "TCP: after the length prefix";
  EXPECT_FALSE(get(f, parse(dnsQuery(false, "www.example.com", 0)).p)) << "no question";
  // A compression pointer in the question: missing.
  Frame c = dnsQuery(false, "a");
  auto pc = parse(c);
  c[pc.m.payload_offset + 12] = 0xC0;
  EXPECT_FALSE(get(f, parse(c).p));
  // Truncated name (label runs past the payload).
  Frame t = PacketBuilder().ipv4("10.0.0.1", "10.0.0.53").udp(1, 53)
                .payload(bytes({0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 9, 'a', 'b'})).build();
  EXPECT_FALSE(get(f, parse(t).p));
}

TEST(LbKey, RawL2Edges) {
  Frame fr = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).payload("abcdefgh").build();
  auto r = parse(fr);
  EXPECT_EQ(*get(raw(LbAnchor::kL2, 0, 6), r.p), slice(fr, 0, 6)) << "destination MAC";
  uint16_t n = uint16_t(fr.size());
  EXPECT_EQ(*get(raw(LbAnchor::kL2, n - 16, 16), r.p), slice(fr, n - 16, 16));
  EXPECT_EQ(*get(raw(LbAnchor::kL2, n - 1, 1), r.p), slice(fr, n - 1, 1));
  EXPECT_FALSE(get(raw(LbAnchor::kL2, n - 15, 16), r.p)) << "one byte past the frame";
  EXPECT_FALSE(get(raw(LbAnchor::kL2, n, 1), r.p));
  EXPECT_FALSE(get(raw(LbAnchor::kL2, 65534, 1), r.p));
}

TEST(LbKey, RawL3StopsAtTheDatagram) {
  // Ethernet padding after a short datagram is not part of the l3 anchor's bytes.
  Frame fr = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).padTo(60).build();
  auto r = parse(fr);
  ASSERT_EQ(r.m.l3_len, 28);
  EXPECT_EQ(*get(raw(LbAnchor::kL3, 12, 4), r.p), bytes({10, 0, 0, 1})) << "IPv4 source";
  EXPECT_EQ(*get(raw(LbAnchor::kL3, 27, 1), r.p), slice(fr, 14 + 27, 1));
  EXPECT_FALSE(get(raw(LbAnchor::kL3, 28, 1), r.p)) << "padding";
  EXPECT_TRUE(get(raw(LbAnchor::kL2, 59, 1), r.p)) << "l2 sees the padding";
  // VLAN tags move the l3 anchor.
  auto v = parse(PacketBuilder().vlan(1).vlan(2).ipv4("10.9.9.9", "10.0.0.2").udp(1, 2).build());
  EXPECT_EQ(*get(raw(LbAnchor::kL3, 12, 4), v.p), bytes({10, 9, 9, 9}));
}

TEST(LbKey, RawL4AndPayloadEdges) {
  Frame fr = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(0x1234, 0x5678)
                 .tcpOptions({1, 1, 1, 1}).payload("0123456789").padTo(100).build();
  auto r = parse(fr);
  EXPECT_EQ(*get(raw(LbAnchor::kL4, 0, 4), r.p), bytes({0x12, 0x34, 0x56, 0x78}));
  EXPECT_EQ(*get(raw(LbAnchor::kPayload, 0, 4), r.p), bytes({'0', '1', '2', '3'}))
      << "payload starts after the TCP options";
  EXPECT_EQ(*get(raw(LbAnchor::kPayload, 6, 4), r.p), bytes({'6', '7', '8', '9'}));
  EXPECT_FALSE(get(raw(LbAnchor::kPayload, 7, 4), r.p)) << "past the payload (padding follows)";
  EXPECT_EQ(*get(raw(LbAnchor::kL4, 24 + 9, 1), r.p), bytes({'9'}));
  EXPECT_FALSE(get(raw(LbAnchor::kL4, 24 + 10, 1), r.p));
  auto empty = parse(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build());
  EXPECT_FALSE(get(raw(LbAnchor::kPayload, 0, 1), empty.p)) << "no payload";
  EXPECT_TRUE(get(raw(LbAnchor::kL4, 7, 1), empty.p)) << "last byte of the UDP header";
  // IPv6 with an extension header: l4 is after it.
  auto v6 = parse(PacketBuilder().ipv6("2001:db8::1", "2001:db8::2").ipv6DestOpts(8)
                      .udp(0xAAAA, 0xBBBB).payload("zz").build());
  EXPECT_EQ(*get(raw(LbAnchor::kL4, 0, 2), v6.p), bytes({0xAA, 0xAA}));
  EXPECT_EQ(*get(raw(LbAnchor::kPayload, 0, 2), v6.p), bytes({'z', 'z'}));
}

TEST(LbKey, Masks) {
  auto f = named(LbFieldKind::kIpSrc);
  f.masked = true;
  std::memset(f.mask, 0, 16);
  f.mask[0] = f.mask[1] = f.mask[2] = 0xff;
  auto a = parse(PacketBuilder().ipv4("10.1.2.3", "10.0.0.2").udp(1, 2).build());
  auto b = parse(PacketBuilder().ipv4("10.1.2.200", "10.0.0.2").udp(9, 2).build());
  auto c = parse(PacketBuilder().ipv4("10.1.3.3", "10.0.0.2").udp(1, 2).build());
  EXPECT_EQ(*get(f, a.p), *get(f, b.p));
  EXPECT_NE(*get(f, a.p), *get(f, c.p));
  auto rf = raw(LbAnchor::kPayload, 0, 2);
  rf.masked = true;
  rf.mask[0] = 0xf0;
  rf.mask[1] = 0x0f;
  auto p = parse(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2)
                     .payload(bytes({0xAB, 0xCD})).build());
  EXPECT_EQ(*get(rf, p.p), bytes({0xA0, 0x0D}));
}

LbBackend macBackend(const std::string& id) {
  LbBackend b;
  b.id = id;
  b.mac = std::array<uint8_t, 6>{2, 0, 0, 0, 0, 1};
  return b;
}

CompiledLbService serviceWithKey(std::vector<LbKeyField> key, LbFallback fb) {
  LbService s;
  s.id = "svc";
  IpPrefix pre;
  pre.addr = {10, 0, 0, 0};
  pre.len = 8;
  s.dst = {pre};
  s.key = std::move(key);
  s.fallback = fb;
  s.backends = {macBackend("a")};
  return *buildLbService(s);
}

TEST(LbKey, KeyHashAndFallback) {
  LbKeyField sid;
  sid.kind = LbFieldKind::kRaw;
  sid.anchor = LbAnchor::kPayload;
  sid.offset = 4;
  sid.length = 4;
  auto svc = serviceWithKey({sid}, LbFallback::kHash5Tuple);
  // Same session id from different clients: same hash; different id: different hash.
  auto a = parse(PacketBuilder().ipv4("10.1.0.1", "10.0.0.9").udp(1000, 7000)
                     .payload(bytes({0, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef})).build());
  auto b = parse(PacketBuilder().ipv4("10.2.0.2", "10.0.0.9").udp(2000, 7000)
                     .payload(bytes({9, 9, 9, 9, 0xde, 0xad, 0xbe, 0xef, 1})).build());
  auto c = parse(PacketBuilder().ipv4("10.1.0.1", "10.0.0.9").udp(1000, 7000)
                     .payload(bytes({0, 0, 0, 0, 0xde, 0xad, 0xbe, 0xee})).build());
  bool ma, mb, mc;
  EXPECT_EQ(svc.keyHash(a.p, &ma), svc.keyHash(b.p, &mb));
  EXPECT_NE(svc.keyHash(a.p, &ma), svc.keyHash(c.p, &mc));
  EXPECT_FALSE(ma || mb || mc);
  // Too short for the session id: missing, and the hash is the 5-tuple's.
  auto s = parse(PacketBuilder().ipv4("10.1.0.1", "10.0.0.9").udp(1000, 7000)
                     .payload(bytes({0, 0, 0, 0, 0xde})).build());
  bool ms;
  EXPECT_EQ(svc.keyHash(s.p, &ms), lbHash5Tuple(s.p));
  EXPECT_TRUE(ms);
  // No fields: the 5-tuple.
  auto five = serviceWithKey({}, LbFallback::kDrop);
  EXPECT_EQ(five.keyHash(a.p, &ma), lbHash5Tuple(a.p));
  EXPECT_FALSE(ma);
}

TEST(LbKey, ServiceMatch) {
  LbService s;
  s.id = "web";
  IpPrefix v4, v6;
  v4.addr = {192, 0, 2, 0};
  v4.len = 24;
  v6.v6 = true;
  v6.addr = {0x20, 0x01, 0x0d, 0xb8};
  v6.len = 32;
  s.dst = {v4, v6};
  s.protocol = 6;
  s.dst_ports = PortRange{80, 443};
  s.backends = {macBackend("a")};
  auto svc = buildLbService(s);
  auto yes = [&](Frame f) { return svc->matches(parse(std::move(f)).p); };
  EXPECT_TRUE(yes(PacketBuilder().ipv4("10.0.0.1", "192.0.2.77").tcp(1, 443).build()));
  EXPECT_TRUE(yes(PacketBuilder().ipv6("2001:db9::1", "2001:db8::5").tcp(1, 80).build()));
  EXPECT_FALSE(yes(PacketBuilder().ipv4("10.0.0.1", "192.0.3.77").tcp(1, 443).build()));
  EXPECT_FALSE(yes(PacketBuilder().ipv4("10.0.0.1", "192.0.2.77").tcp(1, 444).build()));
  EXPECT_FALSE(yes(PacketBuilder().ipv4("10.0.0.1", "192.0.2.77").udp(1, 443).build()));
  s.vlan = 7;
  svc = buildLbService(s);
  EXPECT_FALSE(yes(PacketBuilder().ipv4("10.0.0.1", "192.0.2.77").tcp(1, 443).build()));
  EXPECT_TRUE(yes(PacketBuilder().vlan(7).ipv4("10.0.0.1", "192.0.2.77").tcp(1, 443).build()));
}

TEST(LbKey, HashIsFixed) {
  // Golden values: a change here changes which backend every deployed key maps to (and two
  // appliances of different versions behind one ECMP group would disagree).
  const uint8_t k[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  EXPECT_EQ(lbHash64(k, sizeof(k), kLbKeySeed), 6965853097466890787ull);
  EXPECT_EQ(lbHash64(k, 0, kLbKeySeed), 7550734500882854454ull);
}

}  // namespace
}  // namespace dpu::rules
