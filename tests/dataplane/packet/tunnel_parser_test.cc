// Tunnel parsing (dataplane.tunnels INSPECT): VXLAN, Geneve, GRE, IP-in-IP, MPLS, nesting, the
// depth limit, malformed encapsulations, and the tunnel id in the flow key.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <ostream>

#include "dataplane/flow/flow_key.h"
#include "dataplane/packet/parser.h"
#include "tests/util/packet_builder.h"
#include "tests/util/tunnel_frames.h"

namespace dpu::dp {

void PrintTo(ParseStatus s, std::ostream* os) { *os << parseStatusName(s); }

namespace {

using test::Frame;
using test::PacketBuilder;

TunnelParseConfig inspectAll(uint8_t depth = 3) {
  TunnelParseConfig c;
  c.inspect = true;
  c.max_depth = depth;
  c.n_vxlan = 1;
  c.vxlan_ports[0] = 4789;
  c.n_geneve = 1;
  c.geneve_ports[0] = 6081;
  return c;
}

// Parses from a heap buffer of exactly the frame's size (an overread trips ASan).
ParseStatus parse(const Frame& f, PacketMeta& m, const TunnelParseConfig* tc, size_t len) {
  std::unique_ptr<uint8_t[]> buf(new uint8_t[len ? len : 1]);
  if (len) std::memcpy(buf.get(), f.data(), len);
  return parsePacket(buf.get(), static_cast<uint32_t>(len), m, tc);
}
ParseStatus parse(const Frame& f, PacketMeta& m, const TunnelParseConfig* tc) {
  return parse(f, m, tc, f.size());
}

Frame innerTcp(const char* s = "10.0.0.1", const char* d = "10.0.0.2", uint16_t sp = 1234,
               uint16_t dp = 80) {
  return PacketBuilder().ipv4(s, d).tcp(sp, dp, kTcpSyn, 100).payload("hello").build();
}
Frame innerUdp6() {
  return PacketBuilder().ipv6("2001:db8::1", "2001:db8::2").udp(5353, 53).payload("q").build();
}

// The inner packet as the plain parser sees it, placed at `at` in the tunnel frame.
void expectInner(const PacketMeta& m, const Frame& inner_eth, uint16_t at) {
  PacketMeta want;
  ASSERT_EQ(parsePacket(inner_eth.data(), uint32_t(inner_eth.size()), want), ParseStatus::kOk);
  const uint16_t shift = static_cast<uint16_t>(at - want.l3_offset);
  EXPECT_EQ(m.l3, want.l3);
  EXPECT_EQ(m.l3_offset, want.l3_offset + shift);
  EXPECT_EQ(m.l4_offset, want.l4_offset + shift);
  EXPECT_EQ(m.payload_offset, want.payload_offset + shift);
  EXPECT_EQ(m.payload_len, want.payload_len);
  EXPECT_EQ(m.l3_len, want.l3_len);
  EXPECT_EQ(m.l4_proto, want.l4_proto);
  EXPECT_TRUE(m.src == want.src);
  EXPECT_TRUE(m.dst == want.dst);
  EXPECT_EQ(m.sport, want.sport);
  EXPECT_EQ(m.dport, want.dport);
  EXPECT_EQ(m.tcp_flags, want.tcp_flags);
  EXPECT_EQ(m.tcp_seq, want.tcp_seq);
  EXPECT_EQ(m.has_l4, want.has_l4);
}

TEST(TunnelParser, VxlanOverIpv4) {
  const Frame inner = innerTcp();
  const Frame f = test::vxlanFrame(inner, 0x123456);
  const TunnelParseConfig tc = inspectAll();
  PacketMeta m;
  ASSERT_EQ(parse(f, m, &tc), ParseStatus::kOk);
  // outer: 14 Ethernet + 20 IPv4 + 8 UDP + 8 VXLAN; the inner Ethernet follows.
  expectInner(m, inner, 14 + 20 + 8 + 8 + 14);
  EXPECT_EQ(m.tunnel_depth, 1);
  EXPECT_EQ(m.tunnel_id, 0x123456u);
  EXPECT_EQ(m.tunnel[0].type, TunnelType::kVxlan);
  EXPECT_EQ(m.tunnel[0].ip_off, 14);
  EXPECT_EQ(m.tunnel[0].hdr_off, 34);
  EXPECT_EQ(m.tunnel[0].eth_off, 50);
  EXPECT_EQ(m.tunnel[0].outer_v6, 0);
  EXPECT_EQ(m.ether_type, 0x0800);  // the outer frame's
  EXPECT_EQ(m.frame_len, f.size());

  // Outer only (no config, or mode OUTER_ONLY): the outer UDP datagram, as before tunnels.
  TunnelParseConfig off = tc;
  off.inspect = false;
  const TunnelParseConfig* none = nullptr;
  for (const TunnelParseConfig* c : {none, static_cast<const TunnelParseConfig*>(&off)}) {
    PacketMeta o;
    ASSERT_EQ(parse(f, o, c), ParseStatus::kOk);
    EXPECT_EQ(o.tunnel_depth, 0);
    EXPECT_EQ(o.l4_proto, 17);
    EXPECT_EQ(o.dport, 4789);
    EXPECT_EQ(o.l3_offset, 14);
  }
}

TEST(TunnelParser, VxlanOverIpv6AndConfiguredPort) {
  const Frame inner = innerUdp6();
  TunnelParseConfig tc = inspectAll();
  tc.vxlan_ports[0] = 8472;  // Linux's historical VXLAN port
  const Frame f = test::vxlanFrame(inner, 7, test::outerV6(), 8472);
  PacketMeta m;
  ASSERT_EQ(parse(f, m, &tc), ParseStatus::kOk);
  expectInner(m, inner, 14 + 40 + 8 + 8 + 14);
  EXPECT_EQ(m.tunnel[0].outer_v6, 1);
  EXPECT_EQ(m.tunnel_id, 7u);
  // 4789 is not a VXLAN port in this config: the outer datagram is judged.
  const Frame g = test::vxlanFrame(inner, 7, test::outerV6(), 4789);
  ASSERT_EQ(parse(g, m, &tc), ParseStatus::kOk);
  EXPECT_EQ(m.tunnel_depth, 0);
  EXPECT_EQ(m.dport, 4789);
}

TEST(TunnelParser, GeneveEthernetIpAndOptions) {
  const Frame inner = innerTcp();
  const TunnelParseConfig tc = inspectAll();
  PacketMeta m;
  // Ethernet inside, 2 option words (8 bytes).
  Frame f = test::geneveFrame(inner, 0xabcdef, test::Outer(), 0x6558, 2);
  ASSERT_EQ(parse(f, m, &tc), ParseStatus::kOk);
  expectInner(m, inner, 14 + 20 + 8 + 16 + 14);
  EXPECT_EQ(m.tunnel[0].type, TunnelType::kGeneve);
  EXPECT_EQ(m.tunnel_id, 0xabcdefu);
  EXPECT_EQ(m.tunnel[0].eth_off, 14 + 20 + 8 + 16);
  // IPv4 directly inside (protocol 0x0800): no inner Ethernet.
  f = test::geneveFrame(test::ipOf(inner), 5, test::Outer(), 0x0800);
  ASSERT_EQ(parse(f, m, &tc), ParseStatus::kOk);
  expectInner(m, inner, 14 + 20 + 8 + 8);
  EXPECT_EQ(m.tunnel[0].eth_off, 0);
  // A protocol the parser does not open: the outer datagram is judged.
  f = test::geneveFrame(test::ipOf(inner), 5, test::Outer(), 0x88be);
  ASSERT_EQ(parse(f, m, &tc), ParseStatus::kOk);
  EXPECT_EQ(m.tunnel_depth, 0);
  EXPECT_EQ(m.dport, 6081);
}

TEST(TunnelParser, GreVariants) {
  const Frame inner = innerTcp();
  const Frame inner6 = innerUdp6();
  const TunnelParseConfig tc = inspectAll();
  PacketMeta m;
  // Plain GRE, IPv4 inside: no id.
  Frame f = test::greFrame(test::ipOf(inner), 0x0800);
  ASSERT_EQ(parse(f, m, &tc), ParseStatus::kOk);
  expectInner(m, inner, 14 + 20 + 4);
  EXPECT_EQ(m.tunnel[0].type, TunnelType::kGre);
  EXPECT_EQ(m.tunnel[0].hdr_off, 34);
  EXPECT_EQ(m.tunnel_id, 0u);
  // Checksum + key + sequence: 16-byte header, the key is the tunnel id.
  test::GreOpts g;
  g.checksum = g.key = g.seq = true;
  g.key_value = 0xdeadbeef;
  g.seq_value = 9;
  f = test::greFrame(test::ipOf(inner6), 0x86dd, g);
  ASSERT_EQ(parse(f, m, &tc), ParseStatus::kOk);
  expectInner(m, inner6, 14 + 20 + 16);
  EXPECT_EQ(m.tunnel_id, 0xdeadbeefu);
  // Key only, Ethernet inside (0x6558, NVGRE-like), over IPv6.
  test::GreOpts k;
  k.key = true;
  k.key_value = 42;
  f = test::greFrame(inner, 0x6558, k, test::outerV6());
  ASSERT_EQ(parse(f, m, &tc), ParseStatus::kOk);
  expectInner(m, inner, 14 + 40 + 8 + 14);
  EXPECT_EQ(m.tunnel[0].eth_off, 14 + 40 + 8);
  EXPECT_EQ(m.tunnel_id, 42u);
  // Version 1 (PPTP's enhanced GRE): judged as the outer packet.
  test::GreOpts v1;
  v1.extra_flags = 0x0001;
  f = test::greFrame(test::ipOf(inner), 0x880b, v1);
  ASSERT_EQ(parse(f, m, &tc), ParseStatus::kOk);
  EXPECT_EQ(m.tunnel_depth, 0);
  EXPECT_EQ(m.l4_proto, 47);
  // Unknown protocol (keepalive 0): judged as the outer packet.
  f = test::greFrame(Frame{}, 0x0000);
  ASSERT_EQ(parse(f, m, &tc), ParseStatus::kOk);
  EXPECT_EQ(m.tunnel_depth, 0);
}

// A GRE header no decapsulator accepts (RFC 2784 / 2890: the routing, strict-route and
// recursion bits, flags, a version other than 0 and 1, cut short): with
// dataplane.tunnels.strict malformed (bad_gre / truncated_gre); by default (issue 30) the
// outer IP packet it is, protocol 47, marked tunnel_not_parsed for its counter.
TEST(TunnelParser, GreMalformed) {
  const Frame inner = innerTcp();
  TunnelParseConfig strict = inspectAll();
  strict.strict = true;
  const TunnelParseConfig lax = inspectAll();
  PacketMeta m;
  auto expectOuterGre = [&](const Frame& f, const char* what) {
    ASSERT_EQ(parse(f, m, &lax), ParseStatus::kOk) << what;
    EXPECT_EQ(m.tunnel_depth, 0) << what;
    EXPECT_EQ(m.l3_offset, 14) << what;
    EXPECT_EQ(m.l4_proto, 47) << what;
    EXPECT_EQ(m.tunnel_not_parsed, TunnelType::kGre) << what;
  };
  for (uint16_t bad : {0x4000, 0x0800, 0x0100, 0x0008, 0x0002}) {  // R, s, recursion, flags, ver 2
    test::GreOpts g;
    g.extra_flags = bad;
    const Frame f = test::greFrame(test::ipOf(inner), 0x0800, g);
    EXPECT_EQ(parse(f, m, &strict), ParseStatus::kBadGre) << std::hex << bad;
    expectOuterGre(f, "bad flags");
  }
  // Key flag set, but the datagram ends inside the key.
  test::GreOpts k;
  k.key = true;
  Frame f = test::greFrame(Frame{}, 0x0800, k);
  f.resize(f.size() - 2);
  f[16] = 0;  // IPv4 total length: 20 + 6
  f[17] = 26;
  f[24] = f[25] = 0;  // header checksum left stale: the parser does not check it
  EXPECT_EQ(parse(f, m, &strict), ParseStatus::kTruncatedGre);
  expectOuterGre(f, "cut in the key");
  // Fewer than 4 bytes of GRE.
  f = PacketBuilder().ipv4("192.0.2.1", "192.0.2.2").l4Raw(47).payload(Frame{0x00, 0x00}).build();
  EXPECT_EQ(parse(f, m, &strict), ParseStatus::kTruncatedGre);
  expectOuterGre(f, "2 bytes");
  // Inner IPv4 cut short: the GRE header is valid, so the inner header's own reason, strict
  // or not (the endpoint would open it).
  Frame ip = test::ipOf(inner);
  ip.resize(12);
  EXPECT_EQ(parse(test::greFrame(ip, 0x0800), m, &strict), ParseStatus::kTruncatedIpv4);
  EXPECT_EQ(parse(test::greFrame(ip, 0x0800), m, &lax), ParseStatus::kTruncatedIpv4);
  // A valid GRE packet is opened and not marked.
  ASSERT_EQ(parse(test::greFrame(test::ipOf(inner), 0x0800), m, &lax), ParseStatus::kOk);
  EXPECT_EQ(m.tunnel_depth, 1);
  EXPECT_EQ(m.tunnel_not_parsed, TunnelType::kNone);
}

TEST(TunnelParser, IpInIpAllFamilies) {
  const Frame in4 = innerTcp();
  const Frame in6 = innerUdp6();
  const TunnelParseConfig tc = inspectAll();
  struct C { const Frame* inner; bool outer_v6; uint16_t at; uint8_t proto; };
  const C cases[] = {{&in4, false, 34, 4}, {&in6, false, 34, 41}, {&in4, true, 54, 4},
                     {&in6, true, 54, 41}};
  for (const C& c : cases) {
    const Frame f = test::ipipFrame(*c.inner, c.outer_v6 ? test::outerV6() : test::Outer());
    PacketMeta m;
    ASSERT_EQ(parse(f, m, &tc), ParseStatus::kOk);
    expectInner(m, *c.inner, c.at);
    EXPECT_EQ(m.tunnel[0].type, TunnelType::kIpip);
    EXPECT_EQ(m.tunnel[0].outer_v6, c.outer_v6 ? 1 : 0);
    EXPECT_EQ(m.tunnel_id, 0u);
    PacketMeta o;
    ASSERT_EQ(parse(f, o, nullptr), ParseStatus::kOk);
    EXPECT_EQ(o.l4_proto, c.proto);
  }
}

TEST(TunnelParser, MplsLabelStack) {
  const Frame in4 = innerTcp();
  const Frame in6 = innerUdp6();
  const TunnelParseConfig tc = inspectAll();
  PacketMeta m;
  Frame f = test::mplsFrame(in4, {100, 200});
  ASSERT_EQ(parse(f, m, &tc), ParseStatus::kOk);
  expectInner(m, in4, 14 + 8);
  EXPECT_EQ(m.tunnel[0].type, TunnelType::kMpls);
  EXPECT_EQ(m.tunnel[0].hdr_off, 14);
  EXPECT_EQ(m.tunnel[0].ip_off, 0);
  EXPECT_EQ(m.tunnel_id, 0u);  // labels differ per direction and per hop: no id
  f = test::mplsFrame(in6, {16});
  ASSERT_EQ(parse(f, m, &tc), ParseStatus::kOk);
  expectInner(m, in6, 14 + 4);
  // Outer only: MPLS is not IP.
  EXPECT_EQ(parse(f, m, nullptr), ParseStatus::kNonIp);
  // No bottom of stack before the end.
  EXPECT_EQ(parse(test::mplsFrame(Frame(14), {1, 2}, test::Outer(), false), m, &tc),
            ParseStatus::kTruncatedMpls);
  // Nine labels.
  EXPECT_EQ(parse(test::mplsFrame(in4, {1, 2, 3, 4, 5, 6, 7, 8, 9}), m, &tc), ParseStatus::kBadMpls);
  // Eight are fine.
  EXPECT_EQ(parse(test::mplsFrame(in4, {1, 2, 3, 4, 5, 6, 7, 8}), m, &tc), ParseStatus::kOk);
  // A payload that is not IP (an Ethernet pseudowire's control word): non-IP.
  Frame pw(14 + 8, 0);
  EXPECT_EQ(parse(test::mplsFrame(pw, {5}), m, &tc), ParseStatus::kNonIp);
  // MPLS inside GRE (0x8847): two layers.
  std::vector<uint8_t> label = {0x00, 0x06, 0x41, 0x40};  // label 100, bottom of stack
  f = test::greFrame(test::cat(label, test::ipOf(in4)), 0x8847);
  ASSERT_EQ(parse(f, m, &tc), ParseStatus::kOk);
  expectInner(m, in4, 14 + 20 + 4 + 4);
  EXPECT_EQ(m.tunnel_depth, 2);
  EXPECT_EQ(m.tunnel[1].type, TunnelType::kMpls);
}

// dataplane.tunnels.strict: a payload on a VXLAN / Geneve port that is not the tunnel's header
// is malformed (the behaviour before strict existed).
TEST(TunnelParser, VxlanGeneveMalformedWhenStrict) {
  const Frame inner = innerTcp();
  TunnelParseConfig tc = inspectAll();
  tc.strict = true;
  PacketMeta m;
  // Fewer than 8 bytes of VXLAN.
  Frame f = PacketBuilder().ipv4("192.0.2.1", "192.0.2.2").udp(1, 4789).payload("abc").build();
  EXPECT_EQ(parse(f, m, &tc), ParseStatus::kTruncatedVxlan);
  // I flag clear.
  EXPECT_EQ(parse(test::vxlanFrame(inner, 1, test::Outer(), 4789, 49152, 0x00), m, &tc),
            ParseStatus::kBadVxlan);
  // VXLAN header but the inner Ethernet header is cut.
  f = PacketBuilder().ipv4("192.0.2.1", "192.0.2.2").udp(1, 4789)
          .payload(Frame{0x08, 0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0}).build();
  EXPECT_EQ(parse(f, m, &tc), ParseStatus::kTruncatedL2);
  // Geneve: short header, options past the payload, version 1.
  f = PacketBuilder().ipv4("192.0.2.1", "192.0.2.2").udp(1, 6081).payload("abcd").build();
  EXPECT_EQ(parse(f, m, &tc), ParseStatus::kTruncatedGeneve);
  f = test::geneveFrame(Frame{}, 1, test::Outer(), 0x6558, 0);
  f[14 + 20 + 8] = 0x3f;  // 63 option words announced, none present
  EXPECT_EQ(parse(f, m, &tc), ParseStatus::kTruncatedGeneve);
  EXPECT_EQ(parse(test::geneveFrame(inner, 1, test::Outer(), 0x6558, 0, 1), m, &tc),
            ParseStatus::kBadGeneve);
  // An ARP frame inside VXLAN is non-IP (the non_ip policy judges it).
  const Frame arp = PacketBuilder().arp(1, "10.0.0.1", "10.0.0.2").build();
  EXPECT_EQ(parse(test::vxlanFrame(arp, 1), m, &tc), ParseStatus::kNonIp);
}

// The UDP datagram `m` describes: 192.0.2.1:sport -> 192.0.2.2:dport, not in a tunnel.
void expectPlainUdp(const PacketMeta& m, uint16_t sport, uint16_t dport, size_t payload) {
  EXPECT_EQ(m.tunnel_depth, 0);
  EXPECT_EQ(m.l3, L3Type::kIpv4);
  EXPECT_EQ(m.l4_proto, 17);
  EXPECT_TRUE(m.has_l4);
  EXPECT_EQ(m.sport, sport);
  EXPECT_EQ(m.dport, dport);
  EXPECT_EQ(m.l3_offset, 14);
  EXPECT_EQ(m.payload_offset, 14 + 20 + 8);
  EXPECT_EQ(m.payload_len, payload);
}

// Default (strict off): the port alone names the tunnel, so a datagram to 4789 / 6081 whose
// payload is not that tunnel's header is the plain UDP datagram it is (an LB NAT backend's
// answers to a client that picked port 6081), marked tunnel_not_parsed for its counter.
TEST(TunnelParser, NotATunnelOnATunnelPortIsPlainUdp) {
  const Frame inner = innerTcp();
  const TunnelParseConfig tc = inspectAll();
  PacketMeta m;
  Frame f = PacketBuilder().ipv4("192.0.2.1", "192.0.2.2").udp(443, 4789).payload("abc").build();
  ASSERT_EQ(parse(f, m, &tc), ParseStatus::kOk);
  expectPlainUdp(m, 443, 4789, 3);
  EXPECT_EQ(m.tunnel_not_parsed, TunnelType::kVxlan);
  // I flag clear: 8 bytes that are not VXLAN.
  f = test::vxlanFrame(inner, 1, test::Outer(), 4789, 49152, 0x00);
  ASSERT_EQ(parse(f, m, &tc), ParseStatus::kOk);
  expectPlainUdp(m, 49152, 4789, f.size() - 14 - 20 - 8);
  EXPECT_EQ(m.tunnel_not_parsed, TunnelType::kVxlan);
  // Geneve: short, options past the payload, version 1.
  f = PacketBuilder().ipv4("192.0.2.1", "192.0.2.2").udp(53, 6081).payload("abcd").build();
  ASSERT_EQ(parse(f, m, &tc), ParseStatus::kOk);
  expectPlainUdp(m, 53, 6081, 4);
  EXPECT_EQ(m.tunnel_not_parsed, TunnelType::kGeneve);
  f = test::geneveFrame(Frame{}, 1, test::Outer(), 0x6558, 0);
  f[14 + 20 + 8] = 0x3f;
  ASSERT_EQ(parse(f, m, &tc), ParseStatus::kOk);
  EXPECT_EQ(m.tunnel_not_parsed, TunnelType::kGeneve);
  EXPECT_EQ(m.tunnel_depth, 0);
  EXPECT_EQ(m.dport, 6081);
  // What the NAT backend sent: application bytes (first byte 0x5a: version 1).
  f = PacketBuilder().ipv4("192.0.2.1", "192.0.2.2").udp(8080, 6081)
          .payload("Z answer from the backend").build();
  ASSERT_EQ(parse(f, m, &tc), ParseStatus::kOk);
  expectPlainUdp(m, 8080, 6081, 25);
  EXPECT_EQ(m.tunnel_not_parsed, TunnelType::kGeneve);
  // A valid tunnel is still opened and not marked.
  ASSERT_EQ(parse(test::vxlanFrame(inner, 7), m, &tc), ParseStatus::kOk);
  EXPECT_EQ(m.tunnel_depth, 1);
  EXPECT_EQ(m.tunnel_not_parsed, TunnelType::kNone);
  // A valid tunnel header whose inner packet is malformed stays malformed: the endpoint
  // would open it (the inner headers' usual reasons, docs/tunnels.md).
  f = PacketBuilder().ipv4("192.0.2.1", "192.0.2.2").udp(1, 4789)
          .payload(Frame{0x08, 0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0}).build();
  EXPECT_EQ(parse(f, m, &tc), ParseStatus::kTruncatedL2);
  // Inside another tunnel: the datagram at that layer is judged (GRE, then UDP to 6081).
  const Frame udp_in = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(5000, 6081)
                           .payload("Zzzzzzzzzz").build();
  ASSERT_EQ(parse(test::greFrame(test::ipOf(udp_in), 0x0800), m, &tc), ParseStatus::kOk);
  EXPECT_EQ(m.tunnel_depth, 1);
  EXPECT_EQ(m.tunnel[0].type, TunnelType::kGre);
  EXPECT_EQ(m.l4_proto, 17);
  EXPECT_EQ(m.dport, 6081);
  EXPECT_EQ(m.payload_len, 10);
  EXPECT_EQ(m.tunnel_not_parsed, TunnelType::kGeneve);
  // Outer-only mode never looks.
  TunnelParseConfig outer = tc;
  outer.inspect = false;
  f = PacketBuilder().ipv4("192.0.2.1", "192.0.2.2").udp(53, 6081).payload("abcd").build();
  ASSERT_EQ(parse(f, m, &outer), ParseStatus::kOk);
  EXPECT_EQ(m.tunnel_not_parsed, TunnelType::kNone);
}

// RFC 7348 / RFC 8926: a tunnel is recognised by the UDP destination port. A datagram FROM
// 4789 / 6081 (a server answering a client that used that port) is never opened, whatever
// its payload looks like, unless it also goes TO a tunnel port.
TEST(TunnelParser, SourcePortAloneIsNotATunnel) {
  const Frame inner = innerTcp();
  const TunnelParseConfig tc = inspectAll();
  PacketMeta m;
  // A well-formed VXLAN / Geneve header and inner frame, but sent from the tunnel port.
  Frame f = test::vxlanFrame(inner, 5, test::Outer(), 40000, 4789);
  ASSERT_EQ(parse(f, m, &tc), ParseStatus::kOk);
  expectPlainUdp(m, 4789, 40000, f.size() - 14 - 20 - 8);
  EXPECT_EQ(m.tunnel_not_parsed, TunnelType::kNone);
  const Frame g = test::geneveFrame(inner, 5);
  f = PacketBuilder().ipv4("192.0.2.1", "192.0.2.2").udp(6081, 40000)
          .payload(Frame(g.begin() + 14 + 20 + 8, g.end())).build();
  ASSERT_EQ(parse(f, m, &tc), ParseStatus::kOk);
  expectPlainUdp(m, 6081, 40000, f.size() - 14 - 20 - 8);
  EXPECT_EQ(m.tunnel_not_parsed, TunnelType::kNone);
  // From one tunnel port to another: opened as the destination's tunnel.
  f = test::vxlanFrame(inner, 5, test::Outer(), 4789, 6081);
  ASSERT_EQ(parse(f, m, &tc), ParseStatus::kOk);
  EXPECT_EQ(m.tunnel_depth, 1);
  EXPECT_EQ(m.tunnel[0].type, TunnelType::kVxlan);
}

TEST(TunnelParser, NestingAndDepthLimit) {
  const Frame inner = innerTcp();
  // VXLAN (VNI 10) inside GRE with key 77: two layers, the innermost id (the VNI) wins.
  test::GreOpts k;
  k.key = true;
  k.key_value = 77;
  const Frame vx = test::vxlanFrame(inner, 10);
  const Frame two = test::greFrame(vx, 0x6558, k);
  TunnelParseConfig tc = inspectAll(2);
  PacketMeta m;
  ASSERT_EQ(parse(two, m, &tc), ParseStatus::kOk);
  EXPECT_EQ(m.tunnel_depth, 2);
  EXPECT_EQ(m.tunnel[0].type, TunnelType::kGre);
  EXPECT_EQ(m.tunnel[1].type, TunnelType::kVxlan);
  EXPECT_EQ(m.tunnel[1].ip_off, 14 + 20 + 8 + 14);
  EXPECT_EQ(m.tunnel_id, 10u);
  expectInner(m, inner, 14 + 20 + 8 + 14 + 20 + 8 + 8 + 14);
  // IP-in-IP inside VXLAN keeps the VNI (IP-in-IP has no id).
  const Frame ipip_in_vx = test::vxlanFrame(test::ipipFrame(inner), 99);
  ASSERT_EQ(parse(ipip_in_vx, m, &tc), ParseStatus::kOk);
  EXPECT_EQ(m.tunnel_depth, 2);
  EXPECT_EQ(m.tunnel_id, 99u);
  // max_depth 1: the second layer is one too many.
  tc.max_depth = 1;
  EXPECT_EQ(parse(two, m, &tc), ParseStatus::kTunnelTooDeep);
  // Three layers with max_depth 2 / 3 / 4.
  const Frame three = test::ipipFrame(two);
  tc.max_depth = 2;
  EXPECT_EQ(parse(three, m, &tc), ParseStatus::kTunnelTooDeep);
  tc.max_depth = 3;
  ASSERT_EQ(parse(three, m, &tc), ParseStatus::kOk);
  EXPECT_EQ(m.tunnel_depth, 3);
  tc.max_depth = 4;
  const Frame five = test::ipipFrame(test::ipipFrame(three));
  EXPECT_EQ(parse(five, m, &tc), ParseStatus::kTunnelTooDeep);
}

TEST(TunnelParser, OuterFragmentIsNotOpened) {
  const Frame inner = innerTcp();
  Frame f = PacketBuilder().ipv4("192.0.2.1", "192.0.2.2").ipv4Fragment(5, 0, true).l4Raw(4)
                .payload(test::ipOf(inner)).build();
  const TunnelParseConfig tc = inspectAll();
  PacketMeta m;
  ASSERT_EQ(parse(f, m, &tc), ParseStatus::kOk);
  EXPECT_EQ(m.tunnel_depth, 0);
  EXPECT_TRUE(m.is_fragment);
  EXPECT_EQ(m.l4_proto, 4);
}

// Every prefix of every tunnel frame parses to some status without reading past it, and
// a prefix that cuts the inner packet is never kOk with the full inner lengths.
TEST(TunnelParser, EveryTruncationIsSafe) {
  const Frame inner = innerTcp();
  test::GreOpts g;
  g.checksum = g.key = g.seq = true;
  const Frame frames[] = {test::vxlanFrame(inner, 1), test::geneveFrame(inner, 2, test::outerV6(), 0x6558, 3),
                          test::greFrame(inner, 0x6558, g), test::ipipFrame(inner, test::outerV6()),
                          test::mplsFrame(inner, {1, 2, 3}),
                          test::greFrame(test::vxlanFrame(inner, 3), 0x6558)};
  const TunnelParseConfig tc = inspectAll();
  for (const Frame& f : frames) {
    for (size_t n = 0; n < f.size(); ++n) {
      PacketMeta m;
      const ParseStatus s = parse(f, m, &tc, n);
      if (s == ParseStatus::kOk) {
        EXPECT_LE(uint32_t(m.l3_offset) + m.l3_len, n);
      }
    }
  }
}

TEST(TunnelFlowKey, VniSeparatesIdenticalInnerFlows) {
  const TunnelParseConfig tc = inspectAll();
  const Frame fwd = innerTcp("10.0.0.1", "10.0.0.2", 1234, 80);
  const Frame rev = innerTcp("10.0.0.2", "10.0.0.1", 80, 1234);
  PacketMeta a, b, c, plain;
  ASSERT_EQ(parse(test::vxlanFrame(fwd, 100), a, &tc), ParseStatus::kOk);
  ASSERT_EQ(parse(test::vxlanFrame(rev, 100, test::Outer{"192.0.2.2", "192.0.2.1"}), b, &tc),
            ParseStatus::kOk);
  ASSERT_EQ(parse(test::vxlanFrame(fwd, 200), c, &tc), ParseStatus::kOk);
  ASSERT_EQ(parse(fwd, plain, &tc), ParseStatus::kOk);
  FlowKey ka, kb, kc, kp;
  const bool da = makeFlowKey(a, ka);
  const bool db = makeFlowKey(b, kb);
  makeFlowKey(c, kc);
  makeFlowKey(plain, kp);
  EXPECT_EQ(std::memcmp(&ka, &kb, sizeof(FlowKey)), 0);  // both directions, one flow
  EXPECT_NE(da, db);
  EXPECT_EQ(ka.tunnel_id, 100u);
  EXPECT_NE(std::memcmp(&ka, &kc, sizeof(FlowKey)), 0);  // VNI 200: another flow
  EXPECT_NE(std::memcmp(&ka, &kp, sizeof(FlowKey)), 0);  // not tunneled: another flow
  EXPECT_EQ(kp.tunnel_id, 0u);
  // The inner 5-tuple is what the key holds.
  EXPECT_EQ(ka.proto, 6);
  EXPECT_EQ(ka.lo_port, 1234);
  EXPECT_EQ(ka.hi_port, 80);
}

}  // namespace
}  // namespace dpu::dp
