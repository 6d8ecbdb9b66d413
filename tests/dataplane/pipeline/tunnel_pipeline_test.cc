// Tunnels through the real worker path (Harness): the stages judge the inner packet of
// VXLAN / Geneve / GRE / IP-in-IP / MPLS, the tunnel id separates flows, passing packets
// leave unchanged, answers (TCP RST, ICMP unreachable, DNS) go back inside the tunnel with
// every outer length and checksum right, MPLS answers are suppressed, malformed tunnels are
// dropped with their reason, and OUTER_ONLY keeps the outer-only behaviour.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "dataplane/api/dataplane.h"
#include "dataplane/packet/parser.h"
#include "dataplane/packet/tunnel_config.h"
#include "dataplane/stages/dns/dns_message.h"
#include "rules/compile/firewall_compiler.h"
#include "rules/compile/yara_translate.h"
#include "rules/compiled/dpi.h"
#include "tests/dataplane/pipeline/harness.h"
#include "tests/dataplane/stages/fw_test_util.h"
#include "tests/util/dns_builder.h"
#include "tests/util/packet_builder.h"
#include "tests/util/tunnel_frames.h"

namespace dpu::dp {
namespace {

using rules::FwAction;
using test::Frame;
using test::PacketBuilder;

constexpr uint8_t kTcp = 6, kUdp = 17;

rules::DataplaneSettings settings(bool inspect = true) {
  rules::DataplaneSettings s;
  s.flow_capacity = 4096;
  s.frag_max_datagrams = 64;
  s.tunnels_inspect = inspect;
  return s;
}

std::unique_ptr<rules::Snapshot> fwSnap(bool inspect = true) {
  auto s = std::make_unique<rules::Snapshot>();
  s->dataplane = settings(inspect);
  s->firewall = test::makeFirewall({
      {.id = "no-ssh", .action = FwAction::kDeny, .proto = kTcp, .dport_lo = 22, .dport_hi = 22},
      {.id = "rej-telnet", .action = FwAction::kReject, .proto = kTcp, .dport_lo = 23, .dport_hi = 23},
      {.id = "rej-snmp", .action = FwAction::kReject, .proto = kUdp, .dport_lo = 161, .dport_hi = 161},
  });
  return s;
}

uint64_t drops(const CountersSnapshot::Flat& c, DropReason r) { return c.drops[static_cast<int>(r)]; }

PacketMeta parseT(const Frame& f, ParseStatus want = ParseStatus::kOk) {
  const TunnelParseConfig tc = toTunnelParseConfig(rules::DataplaneSettings{});
  PacketMeta m;
  EXPECT_EQ(parsePacket(f.data(), uint32_t(f.size()), m, &tc), want);
  return m;
}

// Every outer layer of `f` is consistent: IPv4 header checksums, IP lengths reaching the end
// of the frame, UDP lengths, UDP checksums (0 allowed over IPv4), GRE checksums.
void expectOuterConsistent(const Frame& f) {
  const PacketMeta m = parseT(f);
  ASSERT_GT(m.tunnel_depth, 0);
  const uint32_t end = uint32_t(m.l3_offset) + m.l3_len;
  EXPECT_EQ(end, f.size());
  for (uint32_t i = 0; i < m.tunnel_depth; ++i) {
    const TunnelLayer& t = m.tunnel[i];
    if (t.ip_off == 0) continue;
    const uint8_t* ip = f.data() + t.ip_off;
    if (t.outer_v6) {
      EXPECT_EQ(uint32_t(ip[4] << 8 | ip[5]), end - t.ip_off - 40) << "layer " << i;
    } else {
      EXPECT_EQ(uint32_t(ip[2] << 8 | ip[3]), end - t.ip_off) << "layer " << i;
      EXPECT_EQ(test::inetChecksum(ip, (ip[0] & 15) * 4u), 0) << "layer " << i;
    }
    if (t.type == TunnelType::kVxlan || t.type == TunnelType::kGeneve) {
      const uint8_t* u = f.data() + t.hdr_off;
      const uint32_t ulen = end - t.hdr_off;
      EXPECT_EQ(uint32_t(u[4] << 8 | u[5]), ulen);
      if (t.outer_v6 || u[6] || u[7]) {
        // Pseudo-header sum + the datagram verifies to 0.
        uint32_t s = 0;
        const uint32_t alen = t.outer_v6 ? 16 : 4;
        const uint8_t* a = ip + (t.outer_v6 ? 8 : 12);
        for (uint32_t k = 0; k < 2 * alen; k += 2) s += uint32_t(a[k] << 8 | a[k + 1]);
        s += 17 + ulen;
        EXPECT_EQ(test::inetChecksum(u, ulen, s), 0) << "layer " << i;
      }
    }
    if (t.type == TunnelType::kGre && (f[t.hdr_off] & 0x80)) {
      EXPECT_EQ(test::inetChecksum(f.data() + t.hdr_off, end - t.hdr_off), 0);
    }
  }
}

// The innermost packet as a plain Ethernet frame (for checksumsOk and the plain parser).
Frame innerAsFrame(const Frame& f) {
  const PacketMeta m = parseT(f);
  Frame r(14, 0x02);  // an Ethernet header
  r[12] = m.l3 == L3Type::kIpv6 ? 0x86 : 0x08;
  r[13] = m.l3 == L3Type::kIpv6 ? 0xdd : 0x00;
  r.insert(r.end(), f.begin() + m.l3_offset, f.begin() + m.l3_offset + m.l3_len);
  return r;
}

Frame tcpSyn(uint16_t dport, uint16_t sport = 40000, const char* s = "10.0.0.1",
             const char* d = "10.0.0.2") {
  return PacketBuilder().ipv4(s, d).tcp(sport, dport, kTcpSyn, 1000).build();
}

TEST(TunnelPipeline, FirewallJudgesTheInnerPacketOfEachTunnelType) {
  Harness h(fwSnap());
  test::GreOpts keyed;
  keyed.key = true;
  keyed.key_value = 5;
  keyed.checksum = true;
  const Frame ssh = tcpSyn(22), web = tcpSyn(80);
  std::vector<Frame> denied = {
      test::vxlanFrame(ssh, 1), test::geneveFrame(ssh, 2), test::greFrame(test::ipOf(ssh), 0x0800, keyed),
      test::greFrame(ssh, 0x6558), test::ipipFrame(ssh), test::ipipFrame(ssh, test::outerV6()),
      test::mplsFrame(ssh, {30, 31}),
      test::vxlanFrame(test::greFrame(test::ipOf(ssh), 0x0800), 3),  // nested twice
  };
  // The same tunnels with the web SYN inside.
  const std::vector<Frame> passed = {test::vxlanFrame(web, 1), test::geneveFrame(web, 2), test::greFrame(test::ipOf(web), 0x0800, keyed),
            test::greFrame(web, 0x6558), test::ipipFrame(web), test::ipipFrame(web, test::outerV6()),
            test::mplsFrame(web, {30, 31}), test::vxlanFrame(test::greFrame(test::ipOf(web), 0x0800), 3)};
  for (size_t i = 0; i < denied.size(); ++i) {
    h.send(0, denied[i]);
    h.send(0, passed[i]);
  }
  h.poll();
  const auto out = h.out(1);
  EXPECT_EQ(out, passed);  // forwarded byte for byte
  const auto& v = h.verdicts();
  ASSERT_EQ(v.size(), 2 * denied.size());
  for (size_t i = 0; i < denied.size(); ++i) {
    EXPECT_EQ(v[2 * i].verdict, Verdict::kDrop) << i;
    EXPECT_EQ(v[2 * i].reason, DropReason::kFirewallDeny) << i;
    EXPECT_EQ(v[2 * i + 1].verdict, Verdict::kForward) << i;
  }
  EXPECT_EQ(drops(h.counters(), DropReason::kFirewallDeny), denied.size());
}

TEST(TunnelPipeline, OuterOnlyJudgesTheOuterPacket) {
  Harness h(fwSnap(false));
  const Frame f = test::vxlanFrame(tcpSyn(22), 1);
  h.send(0, f);
  h.poll();
  EXPECT_EQ(h.out(1), std::vector<Frame>{f});
  EXPECT_EQ(drops(h.counters(), DropReason::kFirewallDeny), 0u);
}

TEST(TunnelPipeline, TunnelIdSeparatesFlows) {
  Harness h(fwSnap());
  const Frame c2s = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1000, 2000).payload("x").build();
  const Frame s2c = PacketBuilder().ipv4("10.0.0.2", "10.0.0.1").udp(2000, 1000).payload("y").build();
  test::Outer back{"192.0.2.2", "192.0.2.1"};
  test::GreOpts k;
  k.key = true;
  k.key_value = 100;  // GRE key 100: the same id as VNI 100 (ids are compared, not types)
  // One at a time: the worker polls side A before side B.
  const std::pair<int, Frame> in[] = {{0, test::vxlanFrame(c2s, 100)},
                                      {0, test::vxlanFrame(c2s, 200)},
                                      {1, test::vxlanFrame(s2c, 100, back)},
                                      {0, c2s},  // the same 5-tuple outside any tunnel
                                      {0, test::greFrame(test::ipOf(c2s), 0x0800, k)}};
  for (const auto& [side, f] : in) {
    h.send(side, f);
    h.poll();
  }
  const auto& v = h.verdicts();
  ASSERT_EQ(v.size(), 5u);
  for (const auto& x : v) EXPECT_EQ(x.verdict, Verdict::kForward);
  EXPECT_TRUE(v[0].flow_new);
  EXPECT_TRUE(v[1].flow_new);
  EXPECT_NE(v[0].flow_id, v[1].flow_id);
  EXPECT_EQ(v[2].flow_id, v[0].flow_id);  // the answer in VNI 100: the same flow
  EXPECT_FALSE(v[2].flow_new);
  EXPECT_TRUE(v[3].flow_new);
  EXPECT_EQ(v[4].flow_id, v[0].flow_id);
  EXPECT_EQ(h.counters().flows_created, 3u);
}

TEST(TunnelPipeline, RejectsAreAnsweredInsideTheTunnel) {
  Harness h(fwSnap());
  const Frame telnet = PacketBuilder().eth(test::mac("02:00:00:00:00:0a"), test::mac("02:00:00:00:00:0b"))
                           .ipv4("10.0.0.1", "10.0.0.2").tcp(40001, 23, kTcpSyn, 1000).build();
  const Frame snmp6 = PacketBuilder().eth(test::mac("02:00:00:00:00:0a"), test::mac("02:00:00:00:00:0b"))
                          .ipv6("2001:db8::1", "2001:db8::2").udp(5000, 161).payload("get").build();
  test::GreOpts g;
  g.checksum = g.key = g.seq = true;
  g.key_value = 9;
  const std::vector<Frame> in = {
      test::vxlanFrame(telnet, 7), test::vxlanFrame(snmp6, 7, test::outerV6()),
      test::geneveFrame(telnet, 8, test::outerV6(), 0x6558, 2),
      test::greFrame(test::ipOf(snmp6), 0x86dd, g), test::ipipFrame(telnet, test::outerV6()),
      test::vxlanFrame(test::greFrame(telnet, 0x6558, g), 11),
  };
  for (const Frame& f : in) h.send(0, f);
  h.poll();
  const auto back = h.out(0);
  ASSERT_EQ(back.size(), in.size());
  EXPECT_TRUE(h.out(1).empty());
  for (size_t i = 0; i < in.size(); ++i) {
    SCOPED_TRACE(i);
    const Frame& a = back[i];
    const PacketMeta q = parseT(in[i]), r = parseT(a);
    expectOuterConsistent(a);
    ASSERT_EQ(r.tunnel_depth, q.tunnel_depth);
    EXPECT_EQ(r.tunnel_id, q.tunnel_id);
    // Outer MACs swapped; every layer's addresses swapped, UDP ports kept.
    EXPECT_TRUE(std::equal(a.begin(), a.begin() + 6, in[i].begin() + 6));
    for (uint32_t l = 0; l < q.tunnel_depth; ++l) {
      const TunnelLayer& t = q.tunnel[l];
      EXPECT_EQ(r.tunnel[l].type, t.type);
      const uint32_t ao = t.outer_v6 ? 8 : 12, n = t.outer_v6 ? 16 : 4;
      EXPECT_TRUE(std::equal(a.begin() + t.ip_off + ao, a.begin() + t.ip_off + ao + n,
                             in[i].begin() + t.ip_off + ao + n));
      if (t.type == TunnelType::kVxlan || t.type == TunnelType::kGeneve) {
        EXPECT_TRUE(std::equal(a.begin() + t.hdr_off, a.begin() + t.hdr_off + 4, in[i].begin() + t.hdr_off));
      }
      if (t.eth_off) {
        EXPECT_TRUE(std::equal(a.begin() + t.eth_off, a.begin() + t.eth_off + 6,
                               in[i].begin() + t.eth_off + 6));
      }
    }
    // The inner answer: addresses swapped, valid checksums.
    EXPECT_TRUE(r.src == q.dst);
    EXPECT_TRUE(r.dst == q.src);
    EXPECT_TRUE(test::checksumsOk(innerAsFrame(a)));
    if (q.l4_proto == kTcp) {
      EXPECT_EQ(r.l4_proto, kTcp);
      EXPECT_EQ(r.tcp_flags, kTcpRst | kTcpAck);
      EXPECT_EQ(r.tcp_ack, 1001u);
    } else {
      EXPECT_EQ(r.l4_proto, 58);
      EXPECT_EQ(r.icmp_type, 1);
    }
  }
  EXPECT_EQ(h.counters().fw_rst_sent + h.counters().fw_icmp_sent, in.size());
}

TEST(TunnelPipeline, MplsAnswersAreSuppressed) {
  Harness h(fwSnap());
  h.send(0, test::mplsFrame(tcpSyn(23), {16, 17}));
  h.poll();
  EXPECT_TRUE(h.out(0).empty());
  EXPECT_TRUE(h.out(1).empty());
  EXPECT_EQ(drops(h.counters(), DropReason::kFirewallReject), 1u);
  EXPECT_EQ(h.counters().fw_reject_suppressed, 1u);
  EXPECT_EQ(h.counters().fw_rst_sent, 0u);
}

TEST(TunnelPipeline, MalformedTunnelsFollowTheMalformedPolicy) {
  for (rules::Policy p : {rules::Policy::kDrop, rules::Policy::kForward}) {
    auto s = fwSnap();
    s->dataplane.malformed = p;
    s->dataplane.tunnel_max_depth = 1;
    s->dataplane.tunnels_strict = true;  // the truncated VXLAN header is malformed
    Harness h(std::move(s));
    const Frame cut = PacketBuilder().ipv4("192.0.2.1", "192.0.2.2").udp(1, 4789).payload("abc").build();
    test::GreOpts bad;
    bad.extra_flags = 0x4000;
    const Frame gre = test::greFrame(test::ipOf(tcpSyn(80)), 0x0800, bad);
    const Frame deep = test::vxlanFrame(test::ipipFrame(tcpSyn(80)), 1);
    for (const Frame* f : {&cut, &gre, &deep}) h.send(0, *f);
    h.poll();
    const auto& v = h.verdicts();
    ASSERT_EQ(v.size(), 3u);
    if (p == rules::Policy::kDrop) {
      EXPECT_EQ(v[0].reason, DropReason(ParseStatus::kTruncatedVxlan));
      EXPECT_EQ(v[1].reason, DropReason(ParseStatus::kBadGre));
      EXPECT_EQ(v[2].reason, DropReason(ParseStatus::kTunnelTooDeep));
      for (const auto& x : v) EXPECT_EQ(x.verdict, Verdict::kDrop);
      EXPECT_STREQ(dropReasonName(v[2].reason), "tunnel_too_deep");
    } else {
      for (const auto& x : v) EXPECT_EQ(x.verdict, Verdict::kForward);
      EXPECT_EQ(h.counters().malformed_forwarded, 3u);
    }
  }
}

// Issue 30: a client whose UDP port happens to be 6081, and the server's answers to it (UDP
// to 6081, application bytes that are no Geneve header): one plain UDP flow, forwarded both
// ways byte for byte, counted geneve_not_parsed. dataplane.tunnels.strict drops the answer
// as bad_geneve (the behaviour before).
TEST(TunnelPipeline, PlainUdpOnATunnelPortIsJudgedAsPlainUdp) {
  for (bool strict : {false, true}) {
    auto s = fwSnap();
    s->dataplane.tunnels_strict = strict;
    Harness h(std::move(s));
    const Frame ask = PacketBuilder().ipv4("10.0.0.9", "10.0.1.1").udp(6081, 8080)
                          .payload("query").build();
    const Frame answer = PacketBuilder().ipv4("10.0.1.1", "10.0.0.9").udp(8080, 6081)
                             .payload("Z: the answer, first byte 0x5a = Geneve version 1").build();
    const Frame answer_vx = PacketBuilder().ipv4("10.0.1.1", "10.0.0.9").udp(8080, 4789)
                                .payload("abc").build();  // shorter than a VXLAN header
    h.send(0, ask);
    h.poll();
    h.send(1, answer);
    h.send(1, answer_vx);
    h.poll();
    const auto& v = h.verdicts();
    ASSERT_EQ(v.size(), 3u);
    EXPECT_EQ(v[0].verdict, Verdict::kForward);
    EXPECT_EQ(h.out(1), std::vector<Frame>{ask});
    const CountersSnapshot::Flat c = h.counters();
    if (!strict) {
      EXPECT_EQ(v[1].verdict, Verdict::kForward);
      EXPECT_EQ(v[2].verdict, Verdict::kForward);
      EXPECT_EQ(h.out(0), (std::vector<Frame>{answer, answer_vx}));
      EXPECT_EQ(c.flows_created, 2u);  // the 6081 conversation is one flow both ways
      EXPECT_EQ(c.geneve_not_parsed, 1u);
      EXPECT_EQ(c.vxlan_not_parsed, 1u);
      EXPECT_EQ(c.verdicts[static_cast<int>(Verdict::kDrop)], 0u);
    } else {
      EXPECT_EQ(v[1].reason, DropReason(ParseStatus::kBadGeneve));
      EXPECT_EQ(v[2].reason, DropReason(ParseStatus::kTruncatedVxlan));
      EXPECT_TRUE(h.out(0).empty());
      EXPECT_EQ(c.geneve_not_parsed, 0u);
      EXPECT_EQ(c.vxlan_not_parsed, 0u);
    }
  }
}

// The firewall judges such a datagram by its own header: a rule on UDP destination port 4789
// denies a datagram to 4789 that is no VXLAN, while a VXLAN packet to that port is still
// opened and judged by its inner packet.
TEST(TunnelPipeline, RulesSeeThePlainDatagramOnATunnelPort) {
  auto s = std::make_unique<rules::Snapshot>();
  s->dataplane = settings();
  s->firewall = test::makeFirewall({
      {.id = "no-vxlan-port", .action = FwAction::kDeny, .proto = kUdp, .dport_lo = 4789, .dport_hi = 4789},
  });
  Harness h(std::move(s));
  const Frame plain = PacketBuilder().ipv4("10.0.0.9", "10.0.1.1").udp(5000, 4789).payload("abc").build();
  // A real VXLAN packet to the same port is opened: the rule sees the inner packet (80/tcp).
  const Frame real = test::vxlanFrame(tcpSyn(80), 9);
  for (const Frame* f : {&plain, &real}) h.send(0, *f);
  h.poll();
  const auto& v = h.verdicts();
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].reason, DropReason::kFirewallDeny);
  EXPECT_EQ(v[1].verdict, Verdict::kForward);
  EXPECT_EQ(h.counters().vxlan_not_parsed, 1u);
}

// The same for the encapsulation recognised by protocol: a GRE packet whose header no
// decapsulator accepts (routing bit) is the IP protocol 47 packet it is, forwarded with a
// flow and counted gre_not_parsed; strict drops it as bad_gre (the behaviour before).
TEST(TunnelPipeline, BadGreIsJudgedAsTheOuterPacket) {
  for (bool strict : {false, true}) {
    auto s = fwSnap();
    s->dataplane.tunnels_strict = strict;
    Harness h(std::move(s));
    test::GreOpts bad;
    bad.extra_flags = 0x4000;  // R: RFC 1701 source routing
    // Opened, it would be an SSH SYN (no-ssh); no decapsulator opens it (Linux ip_gre rejects
    // the R bit), so it is judged as what the receiver sees: protocol 47, no rule.
    const Frame gre = test::greFrame(test::ipOf(tcpSyn(22)), 0x0800, bad);
    h.send(0, gre);
    h.poll();
    const auto& v = h.verdicts();
    ASSERT_EQ(v.size(), 1u);
    const CountersSnapshot::Flat c = h.counters();
    if (!strict) {
      EXPECT_EQ(v[0].verdict, Verdict::kForward);
      EXPECT_EQ(h.out(1), std::vector<Frame>{gre});
      EXPECT_EQ(c.gre_not_parsed, 1u);
      EXPECT_EQ(c.flows_created, 1u);
    } else {
      EXPECT_EQ(v[0].reason, DropReason(ParseStatus::kBadGre));
      EXPECT_EQ(c.gre_not_parsed, 0u);
    }
  }
}

// --- Firewall rules on the tunnel id (rte_acl field) ---
TEST(TunnelPipeline, FirewallRuleMatchesTheTunnelId) {
  rules::FirewallModel fm;
  rules::FirewallRule deny;
  deny.id = "no-web-in-vni-100";
  deny.action = FwAction::kDeny;
  deny.protocols = {kTcp};
  deny.dst_ports = {{80, 80}};
  deny.tunnel_id = 100;
  rules::FirewallRule none;
  none.id = "no-telnet-outside-ids";
  none.action = FwAction::kDeny;
  none.protocols = {kTcp};
  none.dst_ports = {{23, 23}};
  none.tunnel_id = 0;  // outside tunnels, or in a tunnel without an id
  fm.rules = {deny, none};
  rules::ConfigErrorList errs;
  auto fw = rules::compileFirewall(fm, &errs);
  ASSERT_TRUE(fw.ok()) << fw.status();
  auto s = std::make_unique<rules::Snapshot>();
  s->dataplane = settings();
  s->firewall = *fw;
  Harness h(std::move(s));
  test::GreOpts key100;
  key100.key = true;
  key100.key_value = 100;
  const Frame web = tcpSyn(80), telnet = tcpSyn(23);
  const std::vector<Frame> in = {
      test::vxlanFrame(web, 100),                          // denied
      test::vxlanFrame(web, 101),                          // allowed
      web,                                                 // allowed
      test::greFrame(test::ipOf(web), 0x0800, key100),     // denied (GRE key 100)
      test::vxlanFrame(test::ipipFrame(web), 100),         // denied (IP-in-IP keeps the VNI)
      telnet,                                              // denied (id 0)
      test::ipipFrame(telnet),                             // denied (IP-in-IP: no id)
      test::vxlanFrame(telnet, 5),                         // allowed
      test::vxlanFrame(tcpSyn(80, 40000, "10.0.0.1", "10.0.0.2"), 100, test::outerV6()),  // denied
  };
  const bool denied[] = {true, false, false, true, true, true, true, false, true};
  for (const Frame& f : in) h.send(0, f);
  h.poll();
  const auto& v = h.verdicts();
  ASSERT_EQ(v.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(v[i].verdict, denied[i] ? Verdict::kDrop : Verdict::kForward) << i;
  }
  // IPv6 inner packets use the IPv6 context: the same rule.
  const Frame web6 = PacketBuilder().ipv6("2001:db8::1", "2001:db8::2").tcp(40000, 80, kTcpSyn, 1).build();
  h.send(0, test::vxlanFrame(web6, 100));
  h.send(0, test::vxlanFrame(web6, 7));
  h.poll();
  ASSERT_EQ(v.size(), in.size() + 2);
  EXPECT_EQ(v[in.size()].verdict, Verdict::kDrop);
  EXPECT_EQ(v[in.size() + 1].verdict, Verdict::kForward);
}

// DNS list "ads" (NXDOMAIN for ads.example and below).
std::unique_ptr<rules::Snapshot> dnsSnap() {
  rules::DnsModel dm;
  rules::DnsListModel l;
  l.name = "ads";
  l.action = rules::DnsAction::kNxdomain;
  l.names = {"||ads.example^"};
  l.ttl = 60;
  dm.lists.push_back(l);
  auto s = std::make_unique<rules::Snapshot>();
  s->dataplane = settings();
  auto d = rules::compileDns(dm, nullptr);
  EXPECT_TRUE(d.ok()) << d.status();
  if (d.ok()) s->dns = *d;
  return s;
}

// --- DNS: a blocked query inside Geneve answered NXDOMAIN inside the tunnel ---
TEST(TunnelPipeline, DnsQueryInsideGeneveAnsweredInside) {
  Harness h(dnsSnap());
  auto query = [](const std::string& name, uint16_t id) {
    return PacketBuilder().eth(test::mac("02:00:00:00:00:0a"), test::mac("02:00:00:00:00:0b"))
        .ipv4("10.0.0.1", "10.0.0.53").udp(40000, 53).payload(test::dnsQuery(name, kTypeA, id)).build();
  };
  const Frame blocked = test::geneveFrame(query("www.ads.example", 0x4242), 77, test::outerV6(), 0x6558, 1);
  const Frame clean = test::geneveFrame(query("clean.example", 0x4343), 77, test::outerV6(), 0x6558, 1);
  h.send(0, blocked);
  h.send(0, clean);
  h.poll();
  EXPECT_EQ(h.out(1), std::vector<Frame>{clean});
  const auto back = h.out(0);
  ASSERT_EQ(back.size(), 1u);
  expectOuterConsistent(back[0]);
  const PacketMeta r = parseT(back[0]), q = parseT(blocked);
  EXPECT_EQ(r.tunnel_id, 77u);
  EXPECT_EQ(r.tunnel[0].type, TunnelType::kGeneve);
  EXPECT_TRUE(r.src == q.dst);
  EXPECT_EQ(r.sport, 53);
  EXPECT_EQ(r.dport, 40000);
  EXPECT_TRUE(test::checksumsOk(innerAsFrame(back[0])));
  const uint8_t* msg = back[0].data() + r.payload_offset;
  EXPECT_EQ(dnsGet16(msg), 0x4242);
  EXPECT_EQ(msg[3] & 0xf, 3);  // NXDOMAIN
  EXPECT_EQ(drops(h.counters(), DropReason::kDnsAnswered), 1u);
}

// A DNS query fragmented inside VXLAN: reassembled for inspection (the outer lengths set for
// the whole datagram), answered inside the tunnel; every fragment dropped.
TEST(TunnelPipeline, FragmentedQueryInsideVxlanIsReassembled) {
  Harness h(dnsSnap());
  const Frame q = PacketBuilder().ipv4("10.0.0.1", "10.0.0.53").udp(40000, 53)
                      .payload(test::dnsQuery("www.ads.example", kTypeA, 0x5151)).build();
  const std::vector<Frame> frags = test::fragmentIpv4(q, 16);
  ASSERT_GE(frags.size(), 3u);
  for (const Frame& f : frags) h.send(0, test::vxlanFrame(f, 9));
  h.poll();
  EXPECT_TRUE(h.out(1).empty());
  const auto back = h.out(0);
  ASSERT_EQ(back.size(), 1u);
  expectOuterConsistent(back[0]);
  const PacketMeta r = parseT(back[0]);
  EXPECT_EQ(r.tunnel_id, 9u);
  EXPECT_EQ(r.dport, 40000);
  EXPECT_EQ(back[0][r.payload_offset + 3] & 0xf, 3);  // NXDOMAIN
  for (const auto& v : h.verdicts()) EXPECT_EQ(v.verdict, Verdict::kDrop);
  EXPECT_EQ(h.verdicts().size(), frags.size());
}

// --- DPI: a match inside GRE drops the inner flow ---
TEST(TunnelPipeline, DpiMatchInsideGre) {
  rules::DpiModel m;
  m.enabled = true;
  m.sources.push_back({"t", R"(rule evil { meta: action = "drop" strings: $a = "EVILPAYLOAD" condition: $a })"});
  m.streams_per_worker = 64;
  rules::ConfigErrorList errs;
  auto c = rules::compileDpi(m, errs);
  ASSERT_TRUE(c.ok()) << c.status();
  auto s = std::make_unique<rules::Snapshot>();
  s->dataplane = settings();
  s->dpi = *c;
  s->dpi_settings = m;
  s->dpi_settings.sources.clear();
  Harness h(std::move(s));
  test::GreOpts k;
  k.key = true;
  k.key_value = 3;
  auto gre = [&](const Frame& inner) { return test::greFrame(test::ipOf(inner), 0x0800, k); };
  const char* cli = "10.1.0.1";
  const char* srv = "10.1.0.2";
  uint64_t t = 1000000;
  auto send = [&](int side, const Frame& f, uint64_t ts) {
    h.send(side, f, ts);
    h.poll();  // in order: the worker polls side A before side B
  };
  send(0, gre(PacketBuilder().ipv4(cli, srv).tcp(40000, 80, kTcpSyn, 100).build()), ++t);
  send(1, gre(PacketBuilder().ipv4(srv, cli).tcp(80, 40000, kTcpSyn | kTcpAck, 500, 101).build()), ++t);
  send(0, gre(PacketBuilder().ipv4(cli, srv).tcp(40000, 80, kTcpAck, 101, 501).build()), ++t);
  send(0, gre(PacketBuilder().ipv4(cli, srv).tcp(40000, 80, kTcpAck | kTcpPsh, 101, 501)
                    .payload("GET / clean").build()), ++t);
  send(0, gre(PacketBuilder().ipv4(cli, srv).tcp(40000, 80, kTcpAck | kTcpPsh, 112, 501)
                    .payload("xxEVILPAYLOADxx").build()), ++t);
  const auto& v = h.verdicts();
  ASSERT_EQ(v.size(), 5u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(v[i].verdict, Verdict::kForward) << i << " " << dropReasonName(v[i].reason);
  }
  EXPECT_EQ(v[4].verdict, Verdict::kDrop);
  EXPECT_EQ(v[4].reason, DropReason::kDpiDrop);
  EXPECT_EQ(v[4].flow_id, v[0].flow_id);
}

}  // namespace
}  // namespace dpu::dp
