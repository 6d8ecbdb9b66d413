// The firewall through the real worker path (Harness): allow / deny / reject with the exact
// reject frames, stateful return traffic, rule changes on live flows (re-evaluate vs keep
// established), countries from a GeoIP database, per-rule counters, fragments, Explain.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "dataplane/api/dataplane.h"
#include "dataplane/packet/parser.h"
#include "tests/dataplane/pipeline/harness.h"
#include "tests/dataplane/stages/fw_test_util.h"
#include "tests/util/packet_builder.h"

namespace dpu::dp {
namespace {

using rules::FwAction;
using test::Frame;
using test::PacketBuilder;
using test::TestRule;

constexpr uint8_t kTcp = 6, kUdp = 17;

rules::DataplaneSettings smallSettings() {
  rules::DataplaneSettings s;
  s.flow_capacity = 4096;
  s.frag_max_datagrams = 64;
  return s;
}

std::unique_ptr<rules::Snapshot> snapWith(std::shared_ptr<const rules::CompiledFirewall> fw) {
  auto s = std::make_unique<rules::Snapshot>();
  s->dataplane = smallSettings();
  s->firewall = std::move(fw);
  return s;
}

uint64_t drops(const CountersSnapshot::Flat& c, DropReason r) {
  return c.drops[static_cast<int>(r)];
}

PacketMeta parse(const Frame& f) {
  PacketMeta m;
  EXPECT_EQ(parsePacket(f.data(), static_cast<uint32_t>(f.size()), m), ParseStatus::kOk);
  return m;
}


// The frame `r` is a TCP RST answering `orig` (addresses, ports and MACs swapped when it goes
// back to the sender) with the given seq / ack / flags and valid checksums.
void expectRst(const Frame& r, const Frame& orig, bool to_sender, uint32_t seq, uint32_t ack,
               uint8_t flags) {
  PacketMeta o = parse(orig), m = parse(r);
  EXPECT_TRUE(test::checksumsOk(r));
  EXPECT_EQ(m.l3, o.l3);
  EXPECT_EQ(m.l4_proto, kTcp);
  EXPECT_EQ(m.src, to_sender ? o.dst : o.src);
  EXPECT_EQ(m.dst, to_sender ? o.src : o.dst);
  EXPECT_EQ(m.sport, to_sender ? o.dport : o.sport);
  EXPECT_EQ(m.dport, to_sender ? o.sport : o.dport);
  EXPECT_EQ(m.tcp_seq, seq);
  EXPECT_EQ(m.tcp_ack, ack);
  EXPECT_EQ(m.tcp_flags, flags);
  EXPECT_EQ(m.payload_len, 0);
  EXPECT_EQ(m.vlan_outer, o.vlan_outer);
  const size_t a = to_sender ? 6 : 0, b = to_sender ? 0 : 6;
  EXPECT_TRUE(std::equal(r.begin(), r.begin() + 6, orig.begin() + a));
  EXPECT_TRUE(std::equal(r.begin() + 6, r.begin() + 12, orig.begin() + b));
}

// `r` is an ICMP / ICMPv6 administratively-prohibited unreachable about `orig`.
void expectIcmpProhibited(const Frame& r, const Frame& orig) {
  PacketMeta o = parse(orig), m = parse(r);
  bool v6 = o.l3 == L3Type::kIpv6;
  EXPECT_TRUE(test::checksumsOk(r));
  EXPECT_EQ(m.l4_proto, v6 ? 58 : 1);
  EXPECT_EQ(m.icmp_type, v6 ? 1 : 3);
  EXPECT_EQ(m.icmp_code, v6 ? 1 : 13);
  EXPECT_EQ(m.src, o.dst);
  EXPECT_EQ(m.dst, o.src);
  EXPECT_TRUE(std::equal(r.begin(), r.begin() + 6, orig.begin() + 6));
  // The quote: the offending datagram from its IP header on (whole, it is small).
  size_t quote_at = m.l4_offset + 8;
  size_t dgram = o.l3_len;
  ASSERT_EQ(r.size(), quote_at + dgram);
  EXPECT_TRUE(std::equal(r.begin() + quote_at, r.end(), orig.begin() + o.l3_offset));
}

TEST(FirewallPipeline, AllowDenyRejectWithTheirFrames) {
  auto fw = test::makeFirewall({
      {.id = "no-ssh", .action = FwAction::kDeny, .proto = kTcp, .dport_lo = 22, .dport_hi = 22},
      {.id = "no-telnet", .action = FwAction::kReject, .proto = kTcp, .dport_lo = 23, .dport_hi = 23},
      {.id = "no-dns", .action = FwAction::kReject, .proto = kUdp, .dport_lo = 53, .dport_hi = 53},
      {.id = "web", .action = FwAction::kAllow, .proto = kTcp, .dport_lo = 80, .dport_hi = 80},
  });
  Harness h(snapWith(fw));
  Frame ssh = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 22, kTcpSyn, 100).build();
  Frame telnet = PacketBuilder().eth(test::mac("02:00:00:00:00:aa"), test::mac("02:00:00:00:00:bb"))
                     .vlan(7).ipv4("10.0.0.1", "10.0.0.2").tcp(40001, 23, kTcpSyn, 1000).build();
  Frame dns = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(5353, 53).payload("query").build();
  Frame dns6 = PacketBuilder().ipv6("2001:db8::1", "2001:db8::2").udp(5353, 53).payload("q6").build();
  Frame web = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(40002, 80, kTcpSyn, 5).build();
  Frame other = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1000, 1234).build();
  for (const Frame* f : {&ssh, &telnet, &dns, &dns6, &web, &other}) h.send(0, *f);
  h.poll();

  auto to_b = h.out(1);
  ASSERT_EQ(to_b.size(), 2u);
  EXPECT_EQ(to_b[0], web);
  EXPECT_EQ(to_b[1], other);
  auto to_a = h.out(0);  // the rejects go back out of the ingress side
  ASSERT_EQ(to_a.size(), 3u);
  // SYN without ACK: seq 0, ack = SEG.SEQ + 1 (the SYN), RST|ACK; VLAN tag kept.
  expectRst(to_a[0], telnet, true, 0, 1001, kTcpRst | kTcpAck);
  expectIcmpProhibited(to_a[1], dns);
  expectIcmpProhibited(to_a[2], dns6);

  const auto& v = h.verdicts();
  ASSERT_EQ(v.size(), 6u);
  EXPECT_EQ(v[0].verdict, Verdict::kDrop);
  EXPECT_EQ(v[0].stage, Stage::kFirewall);
  EXPECT_EQ(v[0].reason, DropReason::kFirewallDeny);
  EXPECT_EQ(v[0].rule, 0u);
  EXPECT_EQ(v[1].verdict, Verdict::kReject);
  EXPECT_EQ(v[1].reason, DropReason::kFirewallReject);
  EXPECT_EQ(v[1].rule, 1u);
  EXPECT_EQ(v[2].verdict, Verdict::kReject);
  EXPECT_EQ(v[3].verdict, Verdict::kReject);
  EXPECT_EQ(v[4].verdict, Verdict::kForward);
  EXPECT_EQ(v[4].stage, Stage::kFirewall);
  EXPECT_EQ(v[4].rule, 3u);
  EXPECT_EQ(v[5].verdict, Verdict::kForward);
  EXPECT_EQ(v[5].stage, Stage::kNone);
  EXPECT_EQ(v[5].rule, kNoRule);

  auto c = h.counters();
  EXPECT_EQ(drops(c, DropReason::kFirewallDeny), 1u);
  EXPECT_EQ(drops(c, DropReason::kFirewallReject), 3u);
  EXPECT_EQ(c.verdicts[static_cast<int>(Verdict::kReject)], 3u);
  EXPECT_EQ(c.stage_drops[static_cast<int>(Stage::kFirewall)], 4u);
  EXPECT_EQ(c.stage_packets[static_cast<int>(Stage::kFirewall)], 6u);
  EXPECT_EQ(c.fw_rst_sent, 1u);
  EXPECT_EQ(c.fw_icmp_sent, 2u);
  EXPECT_EQ(c.fw_allowed, 2u);
  EXPECT_EQ(c.fw_denied, 1u);
  EXPECT_EQ(c.fw_rejected, 3u);
  EXPECT_EQ(c.tx_packets[0], 3u);
  EXPECT_EQ(c.tx_packets[1], 2u);
  // Drop events name the firewall and the rule.
  int fw_events = 0;
  h.dp().drainEvents([&](const Event& e) {
    if (e.type == EventType::kDrop && e.stage == Stage::kFirewall) ++fw_events;
  });
  EXPECT_EQ(fw_events, 4);
}

TEST(FirewallPipeline, RejectOfAnEstablishedSegmentResetsBothEnds) {
  auto fw = test::makeFirewall(
      {{.id = "no-web", .action = FwAction::kReject, .proto = kTcp, .dport_lo = 80, .dport_hi = 80}});
  auto s = snapWith(fw);
  s->dataplane.tcp_midstream = rules::Policy::kForward;
  Harness h(std::move(s));
  // Picked up mid-stream: data with ACK, 10 payload bytes.
  Frame data = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 80, kTcpAck | kTcpPsh, 5000, 9000)
                   .payload("0123456789").build();
  h.send(0, data);
  h.poll();
  auto to_a = h.out(0), to_b = h.out(1);
  ASSERT_EQ(to_a.size(), 1u);
  ASSERT_EQ(to_b.size(), 1u);
  // To the sender: seq = SEG.ACK, RST only. To the receiver: as from the sender, seq = SEG.SEQ.
  expectRst(to_a[0], data, true, 9000, 0, kTcpRst);
  expectRst(to_b[0], data, false, 5000, 9000, kTcpRst | kTcpAck);
  EXPECT_EQ(h.counters().fw_rst_sent, 2u);
}

TEST(FirewallPipeline, ReturnTrafficNeedsNoRule) {
  // Flows started on side B are denied by default; side A may start flows to port 443 only.
  auto fw = test::makeFirewall(
      {{.id = "out-https", .action = FwAction::kAllow, .proto = kTcp, .dport_lo = 443,
        .dport_hi = 443, .dir = 1}},
      FwAction::kDeny, FwAction::kDeny);
  Harness h(snapWith(fw));
  Frame syn = PacketBuilder().ipv4("10.0.0.1", "192.0.2.9").tcp(40000, 443, kTcpSyn, 1).build();
  Frame synack = PacketBuilder().ipv4("192.0.2.9", "10.0.0.1").tcp(443, 40000, kTcpSyn | kTcpAck, 7, 2).build();
  Frame ack = PacketBuilder().ipv4("10.0.0.1", "192.0.2.9").tcp(40000, 443, kTcpAck, 2, 8).build();
  Frame reply = PacketBuilder().ipv4("192.0.2.9", "10.0.0.1").tcp(443, 40000, kTcpAck | kTcpPsh, 8, 2)
                    .payload("hello").build();
  Frame in_syn = PacketBuilder().ipv4("192.0.2.9", "10.0.0.1").tcp(5555, 443, kTcpSyn, 1).build();
  h.send(0, syn);
  h.poll();
  h.send(1, synack);
  h.poll();
  h.send(0, ack);
  h.send(1, reply);
  h.send(1, in_syn);  // a flow started on side B: default deny
  h.poll();
  EXPECT_EQ(h.out(1).size(), 2u);
  auto to_a = h.out(0);
  ASSERT_EQ(to_a.size(), 2u);
  EXPECT_EQ(to_a[0], synack);
  EXPECT_EQ(to_a[1], reply);
  const auto& v = h.verdicts();
  ASSERT_EQ(v.size(), 5u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(v[i].verdict, Verdict::kForward) << i;
    EXPECT_EQ(v[i].rule, 0u) << i;
  }
  EXPECT_EQ(v[4].verdict, Verdict::kDrop);
  EXPECT_EQ(v[4].rule, kNoRule);
  EXPECT_EQ(v[4].stage, Stage::kFirewall);
  auto c = h.counters();
  EXPECT_EQ(c.flow_cache_hits, 3u);
  EXPECT_EQ(c.fw_allowed, 1u);  // one classification for the whole connection
  EXPECT_EQ(c.fw_denied, 1u);
}

// A TCP connection through the appliance, then a new rule set, then one packet each way.
struct LiveFlow {
  Frame syn = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 8080, kTcpSyn, 100).build();
  Frame synack = PacketBuilder().ipv4("10.0.0.2", "10.0.0.1").tcp(8080, 40000, kTcpSyn | kTcpAck, 700, 101).build();
  Frame ack = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 8080, kTcpAck, 101, 701).build();
  Frame fwd = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 8080, kTcpAck | kTcpPsh, 101, 701)
                  .payload("more").build();
  Frame back = PacketBuilder().ipv4("10.0.0.2", "10.0.0.1").tcp(8080, 40000, kTcpAck | kTcpPsh, 701, 105)
                   .payload("data").build();
  void open(Harness& h) {
    h.send(0, syn);
    h.poll();
    h.send(1, synack);
    h.poll();
    h.send(0, ack);
    h.poll();
    EXPECT_EQ(h.out(1).size(), 2u);
    EXPECT_EQ(h.out(0).size(), 1u);
  }
};

// Port 8080 blocked first, then every TCP flow allowed (same id as in the first rule set).
std::shared_ptr<rules::CompiledFirewall> blockAlt(FwAction action, bool reevaluate) {
  auto fw = test::makeFirewall({{.id = "block-8080", .action = action, .proto = kTcp,
                                 .dport_lo = 8080, .dport_hi = 8080},
                                {.id = "allow-all-tcp", .action = FwAction::kAllow, .proto = kTcp}});
  fw->reevaluate_on_change = reevaluate;
  return fw;
}

TEST(FirewallPipeline, NewDenyCutsALiveConnection) {
  auto fw0 = test::makeFirewall({{.id = "allow-all-tcp", .action = FwAction::kAllow, .proto = kTcp}});
  Harness h(snapWith(fw0));
  LiveFlow f;
  f.open(h);
  auto gen = h.dp().prepareAndPublish(snapWith(blockAlt(FwAction::kDeny, true)));
  ASSERT_TRUE(gen.ok()) << gen.status();
  h.send(0, f.fwd);
  h.send(1, f.back);
  h.poll();
  EXPECT_TRUE(h.out(0).empty());
  EXPECT_TRUE(h.out(1).empty());
  const auto& v = h.verdicts();
  ASSERT_EQ(v.size(), 5u);
  for (int i : {3, 4}) {
    EXPECT_EQ(v[i].verdict, Verdict::kDrop);
    EXPECT_EQ(v[i].reason, DropReason::kFirewallDeny);
    EXPECT_EQ(v[i].rule, 0u);
    EXPECT_EQ(v[i].generation, 2u);
    EXPECT_EQ(v[i].flow_id, v[0].flow_id);  // the same flow, judged again
  }
  EXPECT_EQ(h.counters().fw_denied, 1u);  // judged once, in the initiator's direction
}

TEST(FirewallPipeline, NewRejectResetsALiveConnection) {
  auto fw0 = test::makeFirewall({{.id = "allow-all-tcp", .action = FwAction::kAllow, .proto = kTcp}});
  Harness h(snapWith(fw0));
  LiveFlow f;
  f.open(h);
  ASSERT_TRUE(h.dp().prepareAndPublish(snapWith(blockAlt(FwAction::kReject, true))).ok());
  h.send(1, f.back);  // the responder speaks first after the change
  h.poll();
  auto to_b = h.out(1), to_a = h.out(0);
  ASSERT_EQ(to_b.size(), 1u);  // RST back to the sender (the responder, on side B)
  ASSERT_EQ(to_a.size(), 1u);  // and to the initiator, as from the responder
  expectRst(to_b[0], f.back, true, 105, 0, kTcpRst);
  expectRst(to_a[0], f.back, false, 701, 105, kTcpRst | kTcpAck);
}

TEST(FirewallPipeline, KeepEstablishedKeepsALiveConnection) {
  auto fw0 = test::makeFirewall({{.id = "allow-all-tcp", .action = FwAction::kAllow, .proto = kTcp}});
  Harness h(snapWith(fw0));
  LiveFlow f;
  f.open(h);
  ASSERT_TRUE(h.dp().prepareAndPublish(snapWith(blockAlt(FwAction::kDeny, false))).ok());
  h.send(0, f.fwd);
  h.poll();
  h.send(1, f.back);
  h.poll();
  // A new connection to the same port is judged by the new rules.
  h.send(0, PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(40001, 8080, kTcpSyn, 1).build());
  h.poll();
  auto to_b = h.out(1), to_a = h.out(0);
  ASSERT_EQ(to_b.size(), 1u);
  ASSERT_EQ(to_a.size(), 1u);
  EXPECT_EQ(to_b[0], f.fwd);
  EXPECT_EQ(to_a[0], f.back);
  const auto& v = h.verdicts();
  ASSERT_EQ(v.size(), 6u);
  // The kept verdict names the rule that allowed it, found again in the new rule set by id.
  EXPECT_EQ(v[3].rule, 1u);
  EXPECT_EQ(v[3].generation, 2u);
  EXPECT_EQ(v[5].verdict, Verdict::kDrop);
  EXPECT_EQ(v[5].rule, 0u);
  auto rc = h.dp().ruleCounters();
  ASSERT_EQ(rc.size(), 2u);
  EXPECT_EQ(rc[0].id, "block-8080");
  EXPECT_EQ(rc[0].flows, 1u);
  EXPECT_EQ(rc[0].packets, 1u);
  EXPECT_EQ(rc[1].id, "allow-all-tcp");
  EXPECT_EQ(rc[1].flows, 1u);     // carried over from the first rule set
  EXPECT_EQ(rc[1].packets, 5u);   // 3 before the change + 2 kept
}

TEST(FirewallPipeline, UnchangedFirewallKeepsVerdictsWithoutReclassifying) {
  auto fw = test::makeFirewall({{.id = "allow-all-tcp", .action = FwAction::kAllow, .proto = kTcp}},
                               FwAction::kDeny, FwAction::kDeny);
  Harness h(snapWith(fw));
  LiveFlow f;
  f.open(h);
  auto next = snapWith(fw);  // same compiled firewall, other settings
  next->dataplane.udp_s = 33;
  ASSERT_TRUE(h.dp().prepareAndPublish(std::move(next)).ok());
  EXPECT_EQ(&h.dp().state().fw->compiled(), fw.get());
  h.send(0, f.fwd);
  h.poll();
  EXPECT_EQ(h.out(1).size(), 1u);
  auto c = h.counters();
  EXPECT_EQ(c.fw_allowed, 1u);  // not classified again
  EXPECT_EQ(h.verdicts().back().generation, 2u);
  EXPECT_EQ(h.verdicts().back().rule, 0u);
}

TEST(FirewallPipeline, RuleCountersCarryOverByRuleId) {
  auto fw0 = test::makeFirewall({
      {.id = "dns", .action = FwAction::kAllow, .proto = kUdp, .dport_lo = 53, .dport_hi = 53},
      {.id = "gone", .action = FwAction::kDeny, .proto = kUdp, .dport_lo = 99, .dport_hi = 99},
  });
  Harness h(snapWith(fw0));
  Frame q = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1111, 53).payload("abc").build();
  Frame a = PacketBuilder().ipv4("10.0.0.2", "10.0.0.1").udp(53, 1111).payload("answer").build();
  Frame x = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1111, 99).build();
  h.send(0, q, 1000000);
  h.poll();
  h.send(1, a, 1000100);
  h.poll();
  h.send(0, x, 1000200);
  h.send(0, PacketBuilder().ipv4("10.0.0.3", "10.0.0.2").udp(2222, 53).build(), 1000300);
  h.poll();
  auto rc = h.dp().ruleCounters();
  ASSERT_EQ(rc.size(), 2u);
  EXPECT_EQ(rc[0].id, "dns");
  EXPECT_EQ(rc[0].packets, 3u);
  EXPECT_EQ(rc[0].flows, 2u);
  EXPECT_EQ(rc[0].bytes, q.size() + a.size() + 42u);
  EXPECT_EQ(rc[0].last_hit_ns, 1000300000u);
  EXPECT_EQ(rc[1].packets, 1u);
  EXPECT_EQ(rc[1].flows, 1u);

  // New rule set: "dns" moves to rank 1, "gone" is gone, "new" starts at zero.
  auto fw1 = test::makeFirewall({
      {.id = "new", .action = FwAction::kDeny, .proto = kUdp, .dport_lo = 7, .dport_hi = 7},
      {.id = "dns", .action = FwAction::kAllow, .proto = kUdp, .dport_lo = 53, .dport_hi = 53},
  });
  ASSERT_TRUE(h.dp().prepareAndPublish(snapWith(fw1)).ok());
  rc = h.dp().ruleCounters();
  ASSERT_EQ(rc.size(), 2u);
  EXPECT_EQ(rc[0].id, "new");
  EXPECT_EQ(rc[0].packets, 0u);
  EXPECT_EQ(rc[1].id, "dns");
  EXPECT_EQ(rc[1].packets, 3u);
  EXPECT_EQ(rc[1].flows, 2u);
  // The existing DNS flow is judged again (re-evaluate on change) and counts on.
  h.send(0, q, 2000000);
  h.poll();
  rc = h.dp().ruleCounters();
  EXPECT_EQ(rc[1].packets, 4u);
  EXPECT_EQ(rc[1].flows, 3u);
  EXPECT_EQ(rc[1].last_hit_ns, 2000000000u);
}

TEST(FirewallPipeline, DirectionAndVlanRules) {
  auto fw = test::makeFirewall({
      {.id = "b-side-no-udp", .action = FwAction::kDeny, .proto = kUdp, .dir = 2},
      {.id = "vlan-20", .action = FwAction::kDeny, .vlan = 20},
  });
  Harness h(snapWith(fw));
  h.send(0, PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).build());
  h.poll();
  h.send(1, PacketBuilder().ipv4("10.0.0.2", "10.0.0.1").udp(3, 4).build());
  h.poll();
  h.send(0, PacketBuilder().vlan(20).ipv4("10.0.0.1", "10.0.0.2").tcp(5, 6, kTcpSyn).build());
  h.send(0, PacketBuilder().vlan(21).ipv4("10.0.0.1", "10.0.0.2").tcp(5, 6, kTcpSyn).build());
  h.poll();
  const auto& v = h.verdicts();
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0].verdict, Verdict::kForward);
  EXPECT_EQ(v[1].verdict, Verdict::kDrop);
  EXPECT_EQ(v[1].rule, 0u);
  EXPECT_EQ(v[2].verdict, Verdict::kDrop);
  EXPECT_EQ(v[2].rule, 1u);
  EXPECT_EQ(v[3].verdict, Verdict::kForward);
}

TEST(FirewallPipeline, CountryRulesWithTheGeoIpDatabase) {
  std::string db = test::countryTestDb();
  if (db.empty()) {
    GTEST_SKIP() << "no GeoIP country test database under " << test::mmdbDir()
                 << " (GeoIP2-Country-Test.mmdb or maxmind+MaxMind-DB/test-data/"
                    "GeoLite2-Country-Test.mmdb): country rules cannot be tested";
  }
  // Documented: 81.2.69.142 GB, 89.160.20.112 SE, 2001:218:: JP (GeoLite2-Country-Test).
  auto fw = test::makeFirewall({
      {.id = "no-gb", .action = FwAction::kDeny, .src_cc = "GB"},
      {.id = "to-se-reject", .action = FwAction::kReject, .proto = kUdp, .dst_cc = "SE"},
  });
  fw->geoip_database = db;
  Harness h(snapWith(fw));
  Frame gb = PacketBuilder().ipv4("81.2.69.142", "10.0.0.2").udp(1, 2).build();
  Frame gb_reply = PacketBuilder().ipv4("10.0.0.2", "81.2.69.142").udp(2, 1).build();
  Frame to_gb = PacketBuilder().ipv4("10.0.0.3", "81.2.69.142").udp(1, 2).build();
  Frame to_se = PacketBuilder().ipv4("10.0.0.3", "89.160.20.112").udp(1, 2).build();
  Frame local = PacketBuilder().ipv4("10.0.0.3", "10.0.0.4").udp(1, 2).build();
  h.send(0, gb);
  h.poll();
  h.send(1, gb_reply);  // the reply belongs to the denied flow
  h.poll();
  h.send(0, to_gb);     // GB as destination is fine
  h.send(0, to_se);
  h.send(0, local);     // addresses the database does not know: country 0
  h.poll();
  const auto& v = h.verdicts();
  ASSERT_EQ(v.size(), 5u);
  EXPECT_EQ(v[0].verdict, Verdict::kDrop);
  EXPECT_EQ(v[0].rule, 0u);
  EXPECT_EQ(v[1].verdict, Verdict::kDrop);
  EXPECT_EQ(v[2].verdict, Verdict::kForward);
  EXPECT_EQ(v[3].verdict, Verdict::kReject);
  EXPECT_EQ(v[3].rule, 1u);
  EXPECT_EQ(v[4].verdict, Verdict::kForward);
  EXPECT_EQ(h.counters().geoip_lookups, 8u);  // two per flow judged, none for the reply
  // The countries are kept in the flow.
  const FlowTable& ft = h.dp().worker(0).flows();
  FlowKey k;
  makeFlowKey(parse(gb), k);
  int32_t pos = ft.lookup(k);
  ASSERT_GE(pos, 0);
  EXPECT_EQ(std::string(ft.cold(pos).src_country, 2), "GB");
  EXPECT_EQ(ft.cold(pos).countries_known, 1);

  // Explain resolves countries with the same database.
  ExplainResult r = h.dp().explain(gb.data(), static_cast<uint32_t>(gb.size()), kSideA);
  EXPECT_EQ(r.verdict.verdict, Verdict::kDrop);
  ASSERT_FALSE(r.steps.empty());
  EXPECT_EQ(r.steps.back().stage, Stage::kFirewall);
  EXPECT_NE(r.steps.back().detail.find("'no-gb'"), std::string::npos) << r.steps.back().detail;
  EXPECT_NE(r.steps.back().detail.find("source country GB"), std::string::npos);
}

TEST(FirewallPipeline, PrepareFailsOnABadGeoIpDatabaseAndNothingChanges) {
  Harness h(snapWith(test::makeFirewall({})));
  auto fw = test::makeFirewall({{.id = "no-gb", .action = FwAction::kDeny, .src_cc = "GB"}});
  fw->geoip_database = "/nonexistent/GeoIP2-Country.mmdb";
  auto p = h.dp().prepare(snapWith(fw));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("/nonexistent/GeoIP2-Country.mmdb"), std::string::npos);
  EXPECT_EQ(h.dp().currentGeneration(), 1u);
}

TEST(FirewallPipeline, RejectedFirstFragmentIsAnsweredOnceAndTheRestDropped) {
  auto fw = test::makeFirewall(
      {{.id = "no-dns", .action = FwAction::kReject, .proto = kUdp, .dport_lo = 53, .dport_hi = 53}});
  Harness h(snapWith(fw));
  Frame d = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").ipv4Id(3).udp(5000, 53)
                .payload(std::string(100, 'x')).build();
  auto frags = test::fragmentIpv4(d, 48);
  ASSERT_EQ(frags.size(), 3u);
  h.send(0, frags[2]);  // held until the first arrives
  h.send(0, frags[0]);
  h.send(0, frags[1]);
  h.poll();
  EXPECT_TRUE(h.out(1).empty());
  auto to_a = h.out(0);
  ASSERT_EQ(to_a.size(), 1u);
  PacketMeta m = parse(to_a[0]);
  EXPECT_EQ(m.icmp_type, 3);
  EXPECT_EQ(m.icmp_code, 13);
  EXPECT_TRUE(test::checksumsOk(to_a[0]));
  auto c = h.counters();
  EXPECT_EQ(drops(c, DropReason::kFirewallReject), 1u);
  EXPECT_EQ(drops(c, DropReason::kFragDatagramDropped), 2u);
}

TEST(FirewallPipeline, StrayResetIsJudgedToo) {
  auto fw = test::makeFirewall({{.id = "no-tcp", .action = FwAction::kReject, .proto = kTcp}});
  Harness h(snapWith(fw));
  h.send(0, PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 2, kTcpRst | kTcpAck, 5, 6).build());
  h.poll();
  EXPECT_TRUE(h.out(1).empty());
  EXPECT_TRUE(h.out(0).empty());  // a reset is never answered
  auto c = h.counters();
  EXPECT_EQ(drops(c, DropReason::kFirewallReject), 1u);
  EXPECT_EQ(c.fw_reject_suppressed, 1u);
  EXPECT_EQ(c.flows_created, 0u);
}

TEST(FirewallPipeline, RejectNeverAnswersBroadcastOrMulticast) {
  auto fw = test::makeFirewall({{.id = "no-tcp", .action = FwAction::kReject, .proto = kTcp},
                                {.id = "no-udp", .action = FwAction::kReject, .proto = kUdp}});
  Harness h(snapWith(fw));
  std::vector<Frame> frames = {
      PacketBuilder().ipv4("10.0.0.1", "255.255.255.255").tcp(1000, 80, kTcpSyn).build(),
      PacketBuilder().ipv4("10.0.0.1", "224.0.0.251").tcp(1001, 80, kTcpSyn).build(),
      PacketBuilder().ipv6("2001:db8::1", "ff02::1").tcp(1002, 80, kTcpSyn).build(),
      PacketBuilder().ipv4("0.0.0.0", "10.0.0.2").tcp(1003, 80, kTcpSyn).build(),
      PacketBuilder().eth(test::kDefaultSrcMac, test::mac("ff:ff:ff:ff:ff:ff"))
          .ipv4("10.0.0.1", "10.0.0.2").tcp(1004, 80, kTcpSyn).build(),
      PacketBuilder().eth(test::kDefaultSrcMac, test::mac("33:33:00:00:00:01"))
          .ipv6("2001:db8::1", "2001:db8::2").tcp(1005, 80, kTcpSyn).build(),
      // A mid-connection segment (both ends would get a RST) to a broadcast address.
      PacketBuilder().ipv4("10.0.0.1", "255.255.255.255").tcp(1006, 80, kTcpAck, 5, 6).build(),
      PacketBuilder().ipv4("10.0.0.1", "255.255.255.255").udp(1007, 53).build(),
  };
  for (const Frame& f : frames) h.send(0, f);
  h.poll();
  EXPECT_TRUE(h.out(0).empty());
  EXPECT_TRUE(h.out(1).empty());
  auto c = h.counters();
  EXPECT_EQ(drops(c, DropReason::kFirewallReject), frames.size());
  EXPECT_EQ(c.fw_rst_sent, 0u);
  EXPECT_EQ(c.fw_icmp_sent, 0u);
  // One unanswered reject per answer that was not sent (the ACK segment had two).
  EXPECT_EQ(c.fw_reject_suppressed, frames.size() + 1);
}

TEST(FirewallPipeline, NoRulesAndAllowDefaultsSkipTheStage) {
  Harness h(snapWith(test::makeFirewall({})));
  Frame f = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 2, kTcpSyn).build();
  h.send(0, f);
  h.poll();
  EXPECT_EQ(h.out(1).size(), 1u);
  auto c = h.counters();
  EXPECT_EQ(c.stage_packets[static_cast<int>(Stage::kFirewall)], 0u);
  EXPECT_EQ(c.fw_allowed, 0u);
  EXPECT_EQ(h.verdicts()[0].stage, Stage::kNone);
  // A default deny alone runs it.
  ASSERT_TRUE(h.dp().prepareAndPublish(snapWith(test::makeFirewall({}, FwAction::kDeny))).ok());
  h.send(0, PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(3, 4, kTcpSyn).build());
  h.poll();
  EXPECT_TRUE(h.out(1).empty());
  EXPECT_EQ(h.verdicts().back().reason, DropReason::kFirewallDeny);
}

TEST(FirewallExplain, FirewallStepNamesTheRuleAndTheAction) {
  rules::Snapshot snap;
  snap.generation = 3;
  snap.firewall = test::makeFirewall(
      {{.id = "no-telnet", .action = FwAction::kReject, .proto = kTcp, .dport_lo = 23, .dport_hi = 23},
       {.id = "web", .action = FwAction::kAllow, .proto = kTcp, .dport_lo = 80, .dport_hi = 80}},
      FwAction::kAllow, FwAction::kDeny);
  auto run = [&](const Frame& f, uint8_t side) {
    return explainPacket(snap, f.data(), static_cast<uint32_t>(f.size()), side);
  };
  auto r = run(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(1000, 23, kTcpSyn).build(), kSideA);
  EXPECT_EQ(r.verdict.verdict, Verdict::kReject);
  EXPECT_EQ(r.verdict.rule, 0u);
  EXPECT_EQ(r.steps.back().stage, Stage::kFirewall);
  EXPECT_EQ(r.steps.back().decision, "reject");
  EXPECT_NE(r.steps.back().detail.find("'no-telnet'"), std::string::npos) << r.steps.back().detail;
  EXPECT_NE(r.steps.back().detail.find("TCP RST"), std::string::npos) << r.steps.back().detail;
  r = run(PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(1000, 80, kTcpSyn).build(), kSideA);
  EXPECT_EQ(r.verdict.verdict, Verdict::kForward);
  EXPECT_EQ(r.verdict.stage, Stage::kFirewall);
  r = run(PacketBuilder().ipv4("10.0.0.2", "10.0.0.1").udp(1, 2).build(), kSideB);
  EXPECT_EQ(r.verdict.verdict, Verdict::kDrop);
  EXPECT_EQ(r.verdict.reason, DropReason::kFirewallDeny);
  EXPECT_NE(r.steps.back().detail.find("default action for flows from side B: deny"),
            std::string::npos)
      << r.steps.back().detail;
}

}  // namespace
}  // namespace dpu::dp
