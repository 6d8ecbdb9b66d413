// The load balancer through the real worker path (Harness): backend choice equal to the
// compiled table's, each forwarding mode with the exact output frame (L2 MAC, NAT with
// checksums and reverse translation of the answers, IP-in-IP v4 and v6), flow affinity across
// drain / flush (rehash and reset), weights, a payload-field key with its fallback, per-backend
// counters and drop reasons.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "dataplane/api/dataplane.h"
#include "dataplane/packet/parser.h"
#include "dataplane/stages/lb_view.h"
#include "rules/compile/lb_compiler.h"
#include "tests/dataplane/pipeline/harness.h"
#include "tests/util/packet_builder.h"

namespace dpu::dp {
namespace {

using rules::LbBackend;
using rules::LbBackendState;
using rules::LbMode;
using rules::LbService;
using test::Frame;
using test::PacketBuilder;

constexpr uint8_t kTcp = 6, kUdp = 17;

LbBackend backend(int n, uint32_t weight = 1) {
  LbBackend b;
  b.id = "be" + std::to_string(n);
  b.ipv4 = std::array<uint8_t, 4>{10, 1, 0, uint8_t(n)};
  b.ipv6 = std::array<uint8_t, 16>{0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                   uint8_t(n)};
  b.mac = std::array<uint8_t, 6>{0x02, 0xbe, 0, 0, 0, uint8_t(n)};
  b.weight = weight;
  return b;
}

LbService web(LbMode mode, int nbackends) {
  LbService s;
  s.id = "web";
  rules::IpPrefix v4, v6;
  v4.addr = {192, 0, 2, 10};
  v4.len = 32;
  v6.v6 = true;
  v6.addr = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10};
  v6.len = 128;
  s.dst = {v4, v6};
  s.protocol = kTcp;
  s.dst_ports = rules::PortRange{80, 80};
  s.mode = mode;
  s.tunnel_src_v4 = std::array<uint8_t, 4>{198, 51, 100, 1};
  s.tunnel_src_v6 = std::array<uint8_t, 16>{0x20, 0x01, 0x0d, 0xb8, 0xff, 0, 0, 0, 0, 0, 0, 0,
                                            0, 0, 0, 1};
  for (int i = 1; i <= nbackends; ++i) s.backends.push_back(backend(i));
  return s;
}

std::unique_ptr<rules::Snapshot> snapWith(const rules::LbModel& m) {
  auto s = std::make_unique<rules::Snapshot>();
  s->dataplane.flow_capacity = 16384;
  s->dataplane.frag_max_datagrams = 64;
  auto c = rules::compileLb(m);
  EXPECT_TRUE(c.ok()) << c.status();
  s->lb = *c;
  return s;
}

PacketMeta parse(const Frame& f) {
  PacketMeta m;
  EXPECT_EQ(parsePacket(f.data(), uint32_t(f.size()), m), ParseStatus::kOk);
  return m;
}

Frame syn(int client, uint16_t sport = 40000) {
  std::string src = "10.0." + std::to_string(client / 250) + "." + std::to_string(client % 250 + 1);
  return PacketBuilder().ipv4(src, "192.0.2.10").tcp(sport, 80, kTcpSyn, 1).build();
}
Frame data(int client, uint16_t sport = 40000) {
  std::string src = "10.0." + std::to_string(client / 250) + "." + std::to_string(client % 250 + 1);
  return PacketBuilder().ipv4(src, "192.0.2.10").tcp(sport, 80, kTcpAck, 2, 1).payload("GET /")
      .build();
}

// Backend number a frame went to in L2 mode (last byte of the destination MAC).
int macBackend(const Frame& f) {
  EXPECT_EQ(f[1], 0xbe);
  return f[5];
}

// The backend the compiled service picks for frame f (what the dataplane must do).
int expectedBackend(const rules::CompiledLbService& svc, const Frame& f) {
  PacketMeta m = parse(f);
  rules::LbPacket p;
  lbView(m, f.data(), uint32_t(f.size()), p);
  bool missing;
  return std::stoi(svc.backends[svc.pick(svc.keyHash(p, &missing))].id.substr(2));
}

uint64_t drops(const CountersSnapshot::Flat& c, DropReason r) {
  return c.drops[static_cast<int>(r)];
}

TEST(LbPipeline, L2PicksTheTablesBackendAndRewritesOnlyTheMac) {
  rules::LbModel m{{web(LbMode::kL2, 5)}};
  auto snap = snapWith(m);
  auto svc = snap->lb->services[0];
  Harness h(std::move(snap));
  constexpr int kFlows = 500;
  for (int c = 0; c < kFlows; ++c) h.send(0, syn(c));
  h.send(0, PacketBuilder().ipv4("10.9.9.9", "192.0.2.11").tcp(1, 80, kTcpSyn).build());
  h.poll();
  auto out = h.out(1);
  ASSERT_EQ(out.size(), size_t(kFlows + 1));
  std::map<int, int> per;
  for (int c = 0; c < kFlows; ++c) {
    Frame want = syn(c);
    int be = expectedBackend(*svc, want);
    EXPECT_EQ(macBackend(out[c]), be) << c;
    per[be]++;
    std::copy(out[c].begin(), out[c].begin() + 6, want.begin());
    EXPECT_EQ(out[c], want) << "only the destination MAC changes";
  }
  EXPECT_EQ(per.size(), 5u);
  EXPECT_EQ(out[kFlows][1], 0x00) << "not the VIP: untouched";
  auto c = h.counters();
  EXPECT_EQ(c.lb_flows_balanced, uint64_t(kFlows));
  EXPECT_EQ(c.stage_packets[static_cast<int>(Stage::kLb)], uint64_t(kFlows));
  auto stats = h.dp().lbBackendStats();
  ASSERT_EQ(stats.size(), 5u);
  uint64_t pk = 0, fl = 0;
  for (const auto& s : stats) {
    int be = svc->findBackend(s.identity, 0);
    ASSERT_GE(be, 0);
    EXPECT_EQ(s.flows_active, uint64_t(per[be + 1]));
    pk += s.packets;
    fl += s.flows_active;
  }
  EXPECT_EQ(pk, uint64_t(kFlows));
  EXPECT_EQ(fl, uint64_t(kFlows));
  const auto& v = h.verdicts();
  EXPECT_EQ(v[0].backend, uint16_t(macBackend(out[0]) - 1));
}

// Sends the data packet of every flow and returns the backend each went to (0 = dropped).
std::vector<int> dataRound(Harness& h, int flows) {
  size_t before = h.verdicts().size();
  for (int c = 0; c < flows; ++c) h.send(0, data(c));
  h.poll();
  auto out = h.out(1);
  std::vector<int> be(flows, 0);
  size_t k = 0;
  for (int c = 0; c < flows; ++c) {
    if (h.verdicts()[before + c].verdict == Verdict::kForward) be[c] = macBackend(out[k++]);
  }
  EXPECT_EQ(k, out.size());
  return be;
}

TEST(LbPipeline, DrainKeepsTrackedFlowsFlushRehashes) {
  rules::LbModel m{{web(LbMode::kL2, 4)}};
  Harness h(snapWith(m));
  constexpr int kFlows = 400;
  for (int c = 0; c < kFlows; ++c) h.send(0, syn(c));
  h.poll();
  std::vector<int> first(kFlows);
  auto out = h.out(1);
  for (int c = 0; c < kFlows; ++c) first[c] = macBackend(out[c]);

  // Drain be2: every tracked flow stays where it is; new flows avoid be2.
  m.services[0].backends[1].state = LbBackendState::kDraining;
  ASSERT_TRUE(h.dp().prepareAndPublish(snapWith(m)).ok());
  EXPECT_EQ(dataRound(h, kFlows), first);
  for (int c = kFlows; c < 2 * kFlows; ++c) h.send(0, syn(c));
  h.poll();
  for (const Frame& f : h.out(1)) EXPECT_NE(macBackend(f), 2) << "new flow on a draining backend";
  uint64_t on2 = std::count(first.begin(), first.end(), 2);
  ASSERT_GT(on2, 0u);
  for (const auto& s : h.dp().lbBackendStats()) {
    if (s.identity == rules::buildLbService(m.services[0])->backends[1].identity) {
      EXPECT_EQ(s.flows_active, on2);
    }
  }

  // Remove be2 (flush, rehash): its flows move to the remaining backends, the others stay.
  m.services[0].backends.erase(m.services[0].backends.begin() + 1);
  ASSERT_TRUE(h.dp().prepareAndPublish(snapWith(m)).ok());
  auto after = dataRound(h, kFlows);
  for (int c = 0; c < kFlows; ++c) {
    if (first[c] == 2) {
      EXPECT_NE(after[c], 2);
      EXPECT_NE(after[c], 0);
    } else {
      EXPECT_EQ(after[c], first[c]) << "flow " << c << " moved";
    }
  }
  EXPECT_EQ(h.counters().lb_flows_rehashed, on2);
  // And they stay on their new backend.
  EXPECT_EQ(dataRound(h, kFlows), after);
}

TEST(LbPipeline, FlushWithResetDropsTheFlowsOfTheRemovedBackend) {
  rules::LbModel m{{web(LbMode::kL2, 3)}};
  Harness h(snapWith(m));
  constexpr int kFlows = 200;
  for (int c = 0; c < kFlows; ++c) h.send(0, syn(c));
  h.poll();
  std::vector<int> first;
  for (const Frame& f : h.out(1)) first.push_back(macBackend(f));
  m.services[0].orphans = rules::LbOrphanPolicy::kReset;
  m.services[0].backends[0].state = LbBackendState::kDown;
  ASSERT_TRUE(h.dp().prepareAndPublish(snapWith(m)).ok());
  auto after = dataRound(h, kFlows);
  uint64_t on1 = 0;
  for (int c = 0; c < kFlows; ++c) {
    if (first[c] == 1) {
      ++on1;
      EXPECT_EQ(after[c], 0);
    } else {
      EXPECT_EQ(after[c], first[c]);
    }
  }
  auto c = h.counters();
  EXPECT_EQ(drops(c, DropReason::kLbFlowReset), on1);
  EXPECT_EQ(c.lb_flows_reset, on1);
  // Later packets of a reset flow are dropped too (no new backend mid-connection).
  dataRound(h, kFlows);
  EXPECT_EQ(drops(h.counters(), DropReason::kLbFlowReset), 2 * on1);
}

TEST(LbPipeline, NatRewritesAndTranslatesTheAnswersBack) {
  rules::LbModel m{{web(LbMode::kNat, 3)}};
  for (auto& b : m.services[0].backends) b.port = 8080;
  m.services[0].protocol.reset();  // TCP and UDP
  Harness h(snapWith(m));
  Frame req = PacketBuilder().ipv4("10.0.0.7", "192.0.2.10").tcp(40000, 80, kTcpSyn, 1).build();
  Frame req6 = PacketBuilder().ipv6("2001:db8:99::7", "2001:db8::10").tcp(40001, 80, kTcpSyn, 1)
                   .build();
  Frame ureq = PacketBuilder().ipv4("10.0.0.8", "192.0.2.10").udp(5000, 80).payload("hello")
                   .build();
  h.send(0, req);
  h.send(0, req6);
  h.send(0, ureq);
  h.poll();
  auto out = h.out(1);
  ASSERT_EQ(out.size(), 3u);
  PacketMeta o = parse(out[0]), o6 = parse(out[1]), ou = parse(out[2]);
  for (const Frame& f : out) EXPECT_TRUE(test::checksumsOk(f));
  EXPECT_EQ(o.dst.b[0], 10);
  EXPECT_EQ(o.dst.b[1], 1);
  EXPECT_EQ(o.dport, 8080);
  EXPECT_EQ(o.src, parse(req).src);
  EXPECT_EQ(o.sport, 40000);
  EXPECT_EQ(o6.dst.b[5], 1) << "2001:db8:1::n";
  EXPECT_EQ(o6.dport, 8080);
  EXPECT_EQ(ou.dport, 8080);
  EXPECT_EQ(macBackend(out[0]), o.dst.b[3]) << "the backend's MAC too";

  // The backend answers from its own address and port; the client sees the VIP's.
  auto answer = [](const PacketMeta& to, bool v6, bool udp) {
    PacketBuilder b;
    std::string bsrc = test::ipToString(to.dst, v6), cdst = test::ipToString(to.src, v6);
    if (v6) b.ipv6(bsrc, cdst); else b.ipv4(bsrc, cdst);
    if (udp) b.udp(to.dport, to.sport).payload("world");
    else b.tcp(to.dport, to.sport, kTcpSyn | kTcpAck, 77, 2);
    return b.build();
  };
  h.send(1, answer(o, false, false), 1000001);
  h.send(1, answer(o6, true, false), 1000001);
  h.send(1, answer(ou, false, true), 1000001);
  h.poll();
  auto back = h.out(0);
  ASSERT_EQ(back.size(), 3u);
  PacketMeta a = parse(back[0]), a6 = parse(back[1]), au = parse(back[2]);
  for (const Frame& f : back) EXPECT_TRUE(test::checksumsOk(f));
  EXPECT_EQ(a.src, parse(req).dst);
  EXPECT_EQ(a.sport, 80);
  EXPECT_EQ(a.dst, parse(req).src);
  EXPECT_EQ(a.dport, 40000);
  EXPECT_EQ(a6.src, parse(req6).dst);
  EXPECT_EQ(a6.sport, 80);
  EXPECT_EQ(au.src, parse(ureq).dst);
  EXPECT_EQ(au.sport, 80);
  EXPECT_EQ(h.counters().lb_nat_reversed, 3u);
  EXPECT_EQ(h.counters().lb_nat_no_reverse, 0u);
}

TEST(LbPipeline, IpipEncapsulatesV4InV4AndV6InV6) {
  rules::LbModel m{{web(LbMode::kIpip, 2)}};
  Harness h(snapWith(m));
  Frame req = PacketBuilder().vlan(5).ipv4("10.0.0.7", "192.0.2.10").tcp(40000, 80, kTcpSyn, 1)
                  .build();
  Frame req6 = PacketBuilder().ipv6("2001:db8:99::7", "2001:db8::10").tcp(40001, 80, kTcpSyn, 1)
                   .build();
  h.send(0, req);
  h.send(0, req6);
  h.poll();
  auto out = h.out(1);
  ASSERT_EQ(out.size(), 2u);
  // v4: L2 (with its tag) + outer IPv4 (proto 4, tunnel source -> backend) + the packet.
  ASSERT_EQ(out[0].size(), req.size() + 20);
  PacketMeta o = parse(out[0]);
  EXPECT_EQ(o.l4_proto, 4);
  EXPECT_EQ(o.vlan_outer, 5);
  EXPECT_EQ(o.src.b[0], 198);
  EXPECT_EQ(o.dst.b[0], 10);
  EXPECT_EQ(o.dst.b[1], 1);
  EXPECT_TRUE(test::checksumsOk(out[0]));
  EXPECT_TRUE(std::equal(req.begin() + 18, req.end(), out[0].begin() + 18 + 20));
  EXPECT_TRUE(std::equal(req.begin() + 6, req.begin() + 18, out[0].begin() + 6));
  EXPECT_EQ(macBackend(out[0]), o.dst.b[3]);
  // v6: outer IPv6 with next header 41.
  ASSERT_EQ(out[1].size(), req6.size() + 40);
  PacketMeta o6 = parse(out[1]);
  EXPECT_EQ(o6.l4_proto, 41);
  EXPECT_EQ(o6.l3_len, req6.size() - 14 + 40);
  EXPECT_EQ(o6.src.b[4], 0xff);
  EXPECT_TRUE(std::equal(req6.begin() + 14, req6.end(), out[1].begin() + 14 + 40));
}

TEST(LbPipeline, WeightsSplitNewFlows) {
  rules::LbModel m{{web(LbMode::kL2, 2)}};
  m.services[0].backends[0].weight = 1;
  m.services[0].backends[1].weight = 3;
  Harness h(snapWith(m));
  constexpr int kFlows = 4000;
  for (int c = 0; c < kFlows; ++c) {
    h.send(0, syn(c % 1000, uint16_t(1000 + c / 1000)));
    if (c % 1000 == 999) h.poll();
  }
  h.poll();
  int n2 = 0, n = 0;
  for (const Frame& f : h.out(1)) {
    n2 += macBackend(f) == 2;
    ++n;
  }
  ASSERT_EQ(n, kFlows);
  EXPECT_NEAR(double(n2) / n, 0.75, 0.03);
}

TEST(LbPipeline, PayloadSessionIdKeyAndFallbackDrop) {
  LbService s = web(LbMode::kL2, 8);
  s.protocol = kUdp;
  s.dst_ports = rules::PortRange{7000, 7000};
  rules::LbKeyField sid;
  sid.kind = rules::LbFieldKind::kRaw;
  sid.anchor = rules::LbAnchor::kPayload;
  sid.offset = 2;
  sid.length = 4;
  s.key = {sid};
  s.fallback = rules::LbFallback::kDrop;
  Harness h(snapWith(rules::LbModel{{s}}));
  auto pkt = [](int client, uint32_t session) {
    std::vector<uint8_t> pl = {0xAA, 0xBB, uint8_t(session >> 24), uint8_t(session >> 16),
                               uint8_t(session >> 8), uint8_t(session), 0x01};
    return PacketBuilder().ipv4("10.7.0." + std::to_string(client), "192.0.2.10")
        .udp(uint16_t(20000 + client), 7000).payload(pl).build();
  };
  // 20 sessions, each seen from 5 clients: every client of a session lands on one backend.
  for (uint32_t sess = 0; sess < 20; ++sess) {
    for (int c = 1; c <= 5; ++c) h.send(0, pkt(int(sess) * 5 + c, 0x1000 + sess));
  }
  h.send(0, PacketBuilder().ipv4("10.7.0.99", "192.0.2.10").udp(1, 7000).payload("ab").build());
  h.poll();
  auto out = h.out(1);
  ASSERT_EQ(out.size(), 100u);
  std::set<int> used;
  for (int sess = 0; sess < 20; ++sess) {
    int be = macBackend(out[sess * 5]);
    used.insert(be);
    for (int c = 1; c < 5; ++c) EXPECT_EQ(macBackend(out[sess * 5 + c]), be) << "session " << sess;
  }
  EXPECT_GT(used.size(), 3u) << "sessions spread over the backends";
  auto c = h.counters();
  EXPECT_EQ(drops(c, DropReason::kLbKeyMissing), 1u);
  EXPECT_EQ(c.lb_key_missing, 1u);
  EXPECT_EQ(h.verdicts().back().stage, Stage::kLb);
}

TEST(LbPipeline, NoBackendInTheTableDrops) {
  rules::LbModel m{{web(LbMode::kL2, 2)}};
  for (auto& b : m.services[0].backends) b.state = LbBackendState::kDown;
  Harness h(snapWith(m));
  h.send(0, syn(1));
  h.poll();
  EXPECT_TRUE(h.out(1).empty());
  EXPECT_EQ(drops(h.counters(), DropReason::kLbNoBackend), 1u);
  // A backend comes back: the same flow's next packet gets it (nothing was pinned).
  m.services[0].backends[1].state = LbBackendState::kActive;
  ASSERT_TRUE(h.dp().prepareAndPublish(snapWith(m)).ok());
  h.send(0, data(1));
  h.poll();
  auto out = h.out(1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(macBackend(out[0]), 2);
}

// Known limitation, pinned down: later fragments of a datagram to a service are not given the
// first fragment's backend; they pass unchanged (never hashed on their own) and are counted.
TEST(LbPipeline, LaterFragmentsPassUnbalancedAndCounted) {
  LbService s = web(LbMode::kL2, 3);
  s.protocol = kUdp;
  s.dst_ports.reset();
  Harness h(snapWith(rules::LbModel{{s}}));
  Frame whole = PacketBuilder().ipv4("10.0.0.7", "192.0.2.10").udp(5000, 9000)
                    .payload(std::string(100, 'x')).build();
  auto frags = test::fragmentIpv4(whole, 40);
  ASSERT_EQ(frags.size(), 3u);
  for (const Frame& f : frags) h.send(0, f);
  h.poll();
  auto out = h.out(1);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0][1], 0xbe) << "first fragment: balanced";
  EXPECT_EQ(out[1], frags[1]);
  EXPECT_EQ(out[2], frags[2]);
  EXPECT_EQ(h.counters().lb_fragments_passed, 2u);
}

}  // namespace
}  // namespace dpu::dp
