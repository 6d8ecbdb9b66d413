// The load balancer through the real worker path (Harness): backend choice equal to the
// compiled table's, each forwarding mode with the exact output frame (L2 MAC, NAT with
// checksums and reverse translation of the answers, IP-in-IP v4 and v6), flow affinity across
// drain / flush (rehash and reset), weights, a payload-field key with its fallback, per-backend
// counters and drop reasons.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "dataplane/api/dataplane.h"
#include "dataplane/packet/parser.h"
#include "dataplane/stages/lb/lb_stage.h"
#include "dataplane/stages/lb/lb_view.h"
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
  EXPECT_EQ(h.counters().lb_nat_reverse_created, 3u) << "made with the forward packets";
  EXPECT_EQ(h.counters().flows_created, 6u);
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

// Issue 18.1: a connection that started while no service existed went out unbalanced; a
// service added later for its VIP must not move it to a backend mid-connection (that backend
// never saw the SYN). Both with no LB at all yet and with services removed and added again.
TEST(LbPipeline, AFlowStartedWhileNoServiceExistedStaysUnbalanced) {
  Harness h(snapWith(rules::LbModel{}));
  h.send(0, syn(1));
  h.poll();
  ASSERT_EQ(h.out(1), std::vector<Frame>{syn(1)});
  rules::LbModel m{{web(LbMode::kNat, 3)}};
  ASSERT_TRUE(h.dp().prepareAndPublish(snapWith(m)).ok());
  h.send(0, data(1));
  h.send(0, syn(2));  // a new connection is balanced
  h.poll();
  auto out = h.out(1);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], data(1)) << "the established flow was taken over by the new service";
  EXPECT_EQ(h.verdicts()[1].backend, kNoBackend);
  EXPECT_EQ(parse(out[1]).dst.b[0], 10) << "NAT to a backend";
  EXPECT_NE(h.verdicts()[2].backend, kNoBackend);
  EXPECT_EQ(h.counters().lb_flows_balanced, 1u);

  // Every service removed, a connection starts, the service comes back: it stays unbalanced.
  ASSERT_TRUE(h.dp().prepareAndPublish(snapWith(rules::LbModel{})).ok());
  h.send(0, syn(3));
  h.poll();
  ASSERT_EQ(h.out(1), std::vector<Frame>{syn(3)});
  ASSERT_TRUE(h.dp().prepareAndPublish(snapWith(m)).ok());
  h.send(0, data(3));
  h.send(0, data(1));
  h.poll();
  EXPECT_EQ(h.out(1), (std::vector<Frame>{data(3), data(1)}));
  EXPECT_EQ(h.counters().lb_flows_balanced, 1u);
}

// Issue 18.2: a flow whose backend goes down while no other backend is up: its packets are
// dropped (lb_no_backend) and never leave untranslated to the VIP; under rehash its next
// packet after a backend is back gets that backend (NAT), under rehash-or-reset it stays
// dropped.
TEST(LbPipeline, ARehashThatFindsNoBackendNeverSendsTheFlowUntranslated) {
  for (auto policy : {rules::LbOrphanPolicy::kRehash, rules::LbOrphanPolicy::kRehashOrReset}) {
    SCOPED_TRACE(int(policy));
    rules::LbModel m{{web(LbMode::kNat, 2)}};
    m.services[0].orphans = policy;
    Harness h(snapWith(m));
    h.send(0, syn(1));
    h.poll();
    ASSERT_EQ(h.out(1).size(), 1u);
    for (auto& b : m.services[0].backends) b.state = LbBackendState::kDown;
    ASSERT_TRUE(h.dp().prepareAndPublish(snapWith(m)).ok());
    h.send(0, data(1));
    h.send(0, data(1));
    h.poll();
    EXPECT_TRUE(h.out(1).empty()) << "a packet left untranslated while no backend was up";
    EXPECT_EQ(drops(h.counters(), DropReason::kLbNoBackend),
              policy == rules::LbOrphanPolicy::kRehash ? 2u : 1u);
    m.services[0].backends[1].state = LbBackendState::kActive;
    ASSERT_TRUE(h.dp().prepareAndPublish(snapWith(m)).ok());
    h.send(0, data(1));
    h.poll();
    auto out = h.out(1);
    if (policy == rules::LbOrphanPolicy::kRehash) {
      ASSERT_EQ(out.size(), 1u);
      PacketMeta o = parse(out[0]);
      EXPECT_EQ(o.dst.b[0], 10);
      EXPECT_EQ(o.dst.b[3], 2) << "be2, the backend that came back";
      EXPECT_EQ(h.verdicts().back().backend, 1u);
      EXPECT_EQ(h.counters().lb_flows_rehashed, 1u);
    } else {
      EXPECT_TRUE(out.empty());
      EXPECT_EQ(drops(h.counters(), DropReason::kLbFlowReset), 2u);
      EXPECT_EQ(h.counters().lb_flows_reset, 1u);
    }
  }
}

// Issue 18.2, key missing: a flushed backend's flow whose next datagram lacks the key field
// (fallback drop) is dropped (lb_key_missing), not sent on to the VIP; the next datagram with
// the key picks a backend of the current table.
TEST(LbPipeline, AnOrphanWhoseDatagramLacksTheKeyIsDroppedThenRehashed) {
  LbService s = web(LbMode::kNat, 2);
  s.protocol = kUdp;
  s.dst_ports = rules::PortRange{7000, 7000};
  rules::LbKeyField sid;
  sid.kind = rules::LbFieldKind::kRaw;
  sid.anchor = rules::LbAnchor::kPayload;
  sid.offset = 0;
  sid.length = 4;
  s.key = {sid};
  s.fallback = rules::LbFallback::kDrop;
  rules::LbModel m{{s}};
  Harness h(snapWith(m));
  auto dgram = [](const std::string& pl) {
    return PacketBuilder().ipv4("10.7.0.1", "192.0.2.10").udp(20000, 7000).payload(pl).build();
  };
  h.send(0, dgram("sessA"));
  h.poll();
  auto out = h.out(1);
  ASSERT_EQ(out.size(), 1u);
  const int first = parse(out[0]).dst.b[3];
  // Flush the flow's backend (rehash), then a datagram too short for the key.
  m.services[0].backends.erase(m.services[0].backends.begin() + (first - 1));
  ASSERT_TRUE(h.dp().prepareAndPublish(snapWith(m)).ok());
  h.send(0, dgram("ab"));
  h.send(0, dgram("cd"));
  h.poll();
  EXPECT_TRUE(h.out(1).empty()) << "a keyless datagram of an orphan left untranslated";
  EXPECT_EQ(drops(h.counters(), DropReason::kLbKeyMissing), 2u);
  h.send(0, dgram("sessB"));
  h.poll();
  out = h.out(1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(parse(out[0]).dst.b[0], 10);
  EXPECT_EQ(parse(out[0]).dst.b[3], 3 - first) << "the remaining backend";
}

// Reassembles IPv4 fragments (untagged Ethernet, 20-byte headers, any order) into one
// unfragmented frame with a fresh header checksum: its L4 checksum then verifies only if every
// fragment was rewritten consistently with the first one's checksum fix.
Frame reassemble4(const std::vector<Frame>& frags) {
  Frame out;
  std::vector<uint8_t> body;
  for (const Frame& f : frags) {
    const uint8_t* ip = f.data() + 14;
    size_t off = size_t((ip[6] & 0x1f) << 8 | ip[7]) * 8;
    size_t len = size_t(ip[2] << 8 | ip[3]) - 20;
    if (body.size() < off + len) body.resize(off + len);
    std::copy(ip + 20, ip + 20 + len, body.begin() + long(off));
    if (off == 0) out.assign(f.begin(), f.begin() + 34);
  }
  EXPECT_EQ(out.size(), 34u) << "no first fragment";
  if (out.size() != 34) return out;
  out.insert(out.end(), body.begin(), body.end());
  uint8_t* ip = out.data() + 14;
  uint16_t tl = uint16_t(20 + body.size());
  ip[2] = uint8_t(tl >> 8);
  ip[3] = uint8_t(tl);
  ip[6] = ip[7] = 0;
  ip[10] = ip[11] = 0;
  uint16_t c = test::inetChecksum(ip, 20);
  ip[10] = uint8_t(c >> 8);
  ip[11] = uint8_t(c);
  return out;
}

uint16_t ipId(const Frame& f, size_t l3 = 14) { return uint16_t(f[l3 + 4] << 8 | f[l3 + 5]); }

Frame udpDatagram(const std::string& src, uint16_t sport, uint16_t id, size_t len = 100) {
  std::string body(len, 'x');
  for (size_t k = 0; k < len; ++k) body[k] = char('a' + (k * 7 + sport) % 26);
  return PacketBuilder().ipv4(src, "192.0.2.10").ipv4Id(id).udp(sport, 9000).payload(body)
      .build();
}

LbService udpService(LbMode mode, int nbackends) {
  LbService s = web(mode, nbackends);
  s.protocol = kUdp;
  s.dst_ports.reset();
  return s;
}

// Every fragment of a datagram goes where its first fragment went (the 5-tuple key is only in
// the first fragment): in order, and with the later fragments arriving first (held until the
// first one is judged). 60 datagrams over 7 backends, so "the same backend" is not luck.
TEST(LbPipeline, LaterFragmentsFollowTheFirstFragmentsBackend) {
  rules::LbModel m{{udpService(LbMode::kL2, 7)}};
  auto snap = snapWith(m);
  auto svc = snap->lb->services[0];
  Harness h(std::move(snap));
  constexpr int kDatagrams = 60;
  std::map<uint16_t, int> want;  // IP id -> backend
  std::set<int> used;
  uint64_t sent = 0;
  for (int d = 0; d < kDatagrams; ++d) {
    Frame whole = udpDatagram("10.0.1." + std::to_string(d + 1), uint16_t(5000 + d),
                              uint16_t(100 + d));
    want[uint16_t(100 + d)] = expectedBackend(*svc, whole);
    used.insert(want[uint16_t(100 + d)]);
    auto frags = test::fragmentIpv4(whole, 40);
    ASSERT_EQ(frags.size(), 3u);
    if (d % 2) std::reverse(frags.begin(), frags.end());  // later ones held, then released
    for (const Frame& f : frags) h.send(0, f);
    sent += frags.size();
  }
  h.poll();
  auto out = h.out(1);
  ASSERT_EQ(out.size(), sent);
  std::map<uint16_t, int> seen;
  for (const Frame& f : out) {
    uint16_t id = ipId(f);
    ASSERT_TRUE(want.count(id));
    EXPECT_EQ(macBackend(f), want[id]) << "datagram " << id;
    ++seen[id];
  }
  EXPECT_EQ(seen.size(), size_t(kDatagrams));
  EXPECT_GT(used.size(), 3u);
  auto c = h.counters();
  EXPECT_EQ(c.lb_fragments_followed, uint64_t(2 * kDatagrams));
  EXPECT_EQ(c.frag_held, uint64_t(2 * (kDatagrams / 2)));
  // Per-backend counters include the later fragments.
  uint64_t pk = 0;
  const auto* lb = static_cast<const LbStage*>(h.dp().worker(0).stage("lb"));
  ASSERT_NE(lb, nullptr);
  const auto* ctr = lb->counters();
  for (uint32_t k = 0; k < LbStage::kLbCounterSlots; ++k) pk += ctr[k].packets.load();
  EXPECT_EQ(pk, sent);
  // Each later fragment reports its datagram's backend in its verdict.
  for (const PacketVerdict& v : h.verdicts()) EXPECT_NE(v.backend, kNoBackend);
}

// NAT: the first fragment gets the backend's address and port with the UDP checksum fixed for
// the whole datagram; later fragments get the address (their header checksum fixed). Reassembled
// at the backend, the datagram's checksum verifies. The backend's fragmented answer gets the
// VIP back as its source in every fragment.
TEST(LbPipeline, NatRewritesEveryFragmentAndTheAnswersFragments) {
  LbService s = udpService(LbMode::kNat, 3);
  for (auto& b : s.backends) b.port = 8080;
  Harness h(snapWith(rules::LbModel{{s}}));
  Frame whole = udpDatagram("10.0.0.7", 5000, 77, 300);
  auto frags = test::fragmentIpv4(whole, 96);
  ASSERT_EQ(frags.size(), 4u);
  std::swap(frags[0], frags[2]);  // one later fragment before the first, one after
  for (const Frame& f : frags) h.send(0, f);
  h.poll();
  auto out = h.out(1);
  ASSERT_EQ(out.size(), 4u);
  PacketMeta first;
  for (const Frame& f : out) {
    EXPECT_TRUE(test::checksumsOk(f));
    PacketMeta o = parse(f);
    EXPECT_EQ(o.dst.b[0], 10);
    EXPECT_EQ(o.dst.b[1], 1);
    EXPECT_EQ(o.src, parse(whole).src);
    if (o.isFirstFragment()) first = o;
  }
  ASSERT_TRUE(first.is_fragment);
  EXPECT_EQ(first.dport, 8080);
  for (const Frame& f : out) EXPECT_EQ(parse(f).dst, first.dst) << "one backend";
  Frame at_backend = reassemble4(out);
  EXPECT_TRUE(test::checksumsOk(at_backend)) << "UDP checksum over the reassembled datagram";
  PacketMeta ab = parse(at_backend);
  EXPECT_EQ(ab.dport, 8080);
  EXPECT_EQ(ab.payload_len, 300u);

  // The backend's answer, fragmented, from its own address and port.
  std::string body(260, 'y');
  Frame ans = PacketBuilder().ipv4(test::ipToString(first.dst, false), "10.0.0.7").ipv4Id(9)
                  .udp(8080, 5000).payload(body).build();
  auto afr = test::fragmentIpv4(ans, 80);
  ASSERT_EQ(afr.size(), 4u);
  std::reverse(afr.begin(), afr.end());
  for (const Frame& f : afr) h.send(1, f, 1000001);
  h.poll();
  auto back = h.out(0);
  ASSERT_EQ(back.size(), 4u);
  for (const Frame& f : back) {
    EXPECT_TRUE(test::checksumsOk(f));
    EXPECT_EQ(parse(f).src, parse(whole).dst) << "the VIP";
  }
  Frame at_client = reassemble4(back);
  EXPECT_TRUE(test::checksumsOk(at_client));
  EXPECT_EQ(parse(at_client).sport, 9000);
  EXPECT_EQ(h.counters().lb_fragments_followed, 6u);
  EXPECT_EQ(h.counters().lb_nat_reversed, 4u);
  EXPECT_EQ(h.counters().lb_nat_reverse_created, 1u);
}

// With an inspecting stage configured (here DNS), datagrams are reassembled for inspection
// (docs/fragments.md): the LB judges the whole datagram and every fragment follows its rewrite,
// with the same result on the wire as when the first fragment is judged alone.
TEST(LbPipeline, NatOnReassembledDatagramsRewritesEveryFragment) {
  LbService s = udpService(LbMode::kNat, 3);
  for (auto& b : s.backends) b.port = 8080;
  auto snap = snapWith(rules::LbModel{{s}});
  rules::DnsModel dm;
  rules::DnsListModel l;
  l.name = "ads";
  l.action = rules::DnsAction::kNxdomain;
  l.names = {"ads.example"};
  dm.lists.push_back(l);
  auto d = rules::compileDns(dm, nullptr);
  ASSERT_TRUE(d.ok()) << d.status();
  snap->dns = *d;
  Harness h(std::move(snap));
  Frame whole = udpDatagram("10.0.0.7", 5000, 77, 300);
  auto frags = test::fragmentIpv4(whole, 96);
  ASSERT_EQ(frags.size(), 4u);
  std::swap(frags[0], frags[2]);
  for (const Frame& f : frags) h.send(0, f);
  h.poll();
  auto out = h.out(1);
  ASSERT_EQ(out.size(), 4u);
  for (const Frame& f : out) {
    EXPECT_TRUE(test::checksumsOk(f));
    EXPECT_EQ(parse(f).dst, parse(out[0]).dst) << "one backend";
  }
  Frame at_backend = reassemble4(out);
  EXPECT_TRUE(test::checksumsOk(at_backend)) << "UDP checksum over the reassembled datagram";
  EXPECT_EQ(parse(at_backend).dport, 8080);
  std::string body(260, 'y');
  Frame ans = PacketBuilder().ipv4(test::ipToString(parse(at_backend).dst, false), "10.0.0.7")
                  .ipv4Id(9).udp(8080, 5000).payload(body).build();
  auto afr = test::fragmentIpv4(ans, 80);
  std::reverse(afr.begin(), afr.end());
  for (const Frame& f : afr) h.send(1, f, 1000001);
  h.poll();
  auto back = h.out(0);
  ASSERT_EQ(back.size(), 4u);
  for (const Frame& f : back) EXPECT_EQ(parse(f).src, parse(whole).dst) << "the VIP";
  EXPECT_TRUE(test::checksumsOk(reassemble4(back)));
  auto c = h.counters();
  EXPECT_EQ(c.frag_reassembled, 2u);
  EXPECT_EQ(c.lb_fragments_followed, 8u);  // every fragment follows the datagram
  EXPECT_EQ(c.lb_nat_reversed, 4u);        // once per fragment, not for the datagram
}

// IP-in-IP: every fragment is wrapped to the first fragment's backend, the inner fragment
// unchanged; IPv4 and IPv6.
TEST(LbPipeline, IpipWrapsEveryFragmentToTheSameBackend) {
  LbService s = udpService(LbMode::kIpip, 5);
  auto snap = snapWith(rules::LbModel{{s}});
  auto svc = snap->lb->services[0];
  Harness h(std::move(snap));
  Frame whole = udpDatagram("10.0.0.9", 6000, 55, 200);
  Frame whole6 = PacketBuilder().ipv6("2001:db8:99::9", "2001:db8::10").udp(6001, 9000)
                     .payload(std::string(200, 'z')).build();
  auto f4 = test::fragmentIpv4(whole, 64);
  auto f6 = test::fragmentIpv6(whole6, 64, 4242);
  ASSERT_EQ(f4.size(), 4u);
  ASSERT_EQ(f6.size(), 4u);
  std::reverse(f6.begin(), f6.end());
  for (const Frame& f : f4) h.send(0, f);
  for (const Frame& f : f6) h.send(0, f);
  h.poll();
  auto out = h.out(1);
  ASSERT_EQ(out.size(), 8u);
  const int be4 = expectedBackend(*svc, whole), be6 = expectedBackend(*svc, whole6);
  std::vector<Frame> inner4, inner6;
  for (const Frame& f : out) {
    PacketMeta o = parse(f);
    if (o.l4_proto == 4) {
      EXPECT_TRUE(test::checksumsOk(f));
      EXPECT_EQ(o.dst.b[3], be4);
      EXPECT_EQ(macBackend(f), be4);
      inner4.emplace_back(f.begin(), f.begin() + 14);
      inner4.back().insert(inner4.back().end(), f.begin() + 34, f.end());
    } else {
      ASSERT_EQ(o.l4_proto, 41);
      EXPECT_EQ(o.dst.b[15], be6);
      inner6.emplace_back(f.begin(), f.begin() + 14);
      inner6.back().insert(inner6.back().end(), f.begin() + 54, f.end());
    }
  }
  ASSERT_EQ(inner4.size(), 4u);
  ASSERT_EQ(inner6.size(), 4u);
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_TRUE(std::equal(f4[k].begin() + 14, f4[k].end(), inner4[k].begin() + 14));
  }
  for (const Frame& f : inner6) {
    EXPECT_TRUE(std::find_if(f6.begin(), f6.end(), [&](const Frame& g) {
      return std::equal(g.begin() + 14, g.end(), f.begin() + 14, f.end());
    }) != f6.end());
  }
  EXPECT_EQ(h.counters().lb_fragments_followed, 6u);
}

}  // namespace
}  // namespace dpu::dp
