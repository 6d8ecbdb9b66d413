// Packet tables through the real worker path: frames built in code are put on the rx ring
// of a net_ring port, the worker polls, and the test checks verdicts, counters and the exact
// frames that come out of each side.
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_ring.h>

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "dataplane/api/dataplane.h"
#include "dataplane/packet/parser.h"
#include "tests/dataplane/pipeline/harness.h"
#include "tests/util/packet_builder.h"

namespace dpu::dp {
namespace {

using test::Frame;
using test::PacketBuilder;

rules::DataplaneSettings smallSettings() {
  rules::DataplaneSettings s;
  s.flow_capacity = 4096;
  s.frag_max_datagrams = 64;
  return s;
}

uint64_t drops(const CountersSnapshot::Flat& c, DropReason r) {
  return c.drops[static_cast<int>(r)];
}

TEST(Pipeline, TcpSessionBothDirectionsForwardedUnchanged) {
  Harness h(smallSettings());
  Frame syn = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 80, kTcpSyn, 1).build();
  Frame synack =
      PacketBuilder().ipv4("10.0.0.2", "10.0.0.1").tcp(80, 40000, kTcpSyn | kTcpAck, 9, 2).build();
  Frame ack = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 80, kTcpAck, 2, 10).build();
  Frame data = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 80, kTcpAck | kTcpPsh, 2, 10)
                   .payload("GET / HTTP/1.0\r\n\r\n").build();
  h.send(0, syn);
  h.poll();
  h.send(1, synack);
  h.poll();
  h.send(0, ack);
  h.send(0, data);
  h.poll();
  auto to_b = h.out(1);
  auto to_a = h.out(0);
  ASSERT_EQ(to_b.size(), 3u);
  ASSERT_EQ(to_a.size(), 1u);
  EXPECT_EQ(to_b[0], syn);
  EXPECT_EQ(to_b[1], ack);
  EXPECT_EQ(to_b[2], data);
  EXPECT_EQ(to_a[0], synack);
  auto c = h.counters();
  EXPECT_EQ(c.flows_created, 1u);
  EXPECT_EQ(c.flow_cache_hits, 3u);
  EXPECT_EQ(c.rx_packets[0], 3u);
  EXPECT_EQ(c.rx_packets[1], 1u);
  EXPECT_EQ(c.tx_packets[1], 3u);
  EXPECT_EQ(c.tx_packets[0], 1u);
  ASSERT_EQ(h.verdicts().size(), 4u);
  EXPECT_TRUE(h.verdicts()[0].flow_new);
  EXPECT_FALSE(h.verdicts()[1].flow_new);
  EXPECT_EQ(h.verdicts()[0].flow_id, h.verdicts()[1].flow_id);
  EXPECT_EQ(h.verdicts()[1].in_side, kSideB);
  // Handshake completed: the flow is established.
  const FlowTable& ft = h.dp().worker(0).flows();
  FlowKey k;
  PacketMeta m;
  ASSERT_EQ(parsePacket(syn.data(), static_cast<uint32_t>(syn.size()), m), ParseStatus::kOk);
  makeFlowKey(m, k);
  int32_t pos = ft.lookup(k);
  ASSERT_GE(pos, 0);
  EXPECT_EQ(ft.entry(pos).tcp_state, TcpState::kEstablished);
  EXPECT_EQ(ft.entry(pos).packets[0], 3u);
  EXPECT_EQ(ft.entry(pos).packets[1], 1u);
}

Frame truncated(const Frame& f, size_t n) { return Frame(f.begin(), f.begin() + n); }

struct MalformedCase {
  const char* name;
  Frame frame;
  DropReason reason;
};

TEST(Pipeline, MalformedFramesDroppedWithTheirReason) {
  Frame good = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 2, kTcpSyn).build();
  std::vector<MalformedCase> cases = {
      {"truncated_l2", truncated(good, 10), dropReasonFromParse(ParseStatus::kTruncatedL2)},
      {"bad_ihl", PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").ipv4Ihl(3).udp(1, 2).build(),
       dropReasonFromParse(ParseStatus::kBadIpv4Ihl)},
      {"bad_total_len",
       PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").ipv4TotalLength(2000).udp(1, 2).build(),
       dropReasonFromParse(ParseStatus::kBadIpv4TotalLength)},
      {"bad_tcp_doff",
       PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 2, kTcpSyn).tcpDataOffset(2).build(),
       dropReasonFromParse(ParseStatus::kBadTcpDataOffset)},
      {"bad_udp_len", PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 2).udpLength(3).build(),
       dropReasonFromParse(ParseStatus::kBadUdpLength)},
      {"truncated_ipv6",
       truncated(PacketBuilder().ipv6("2001:db8::1", "2001:db8::2").udp(1, 2).build(), 30),
       dropReasonFromParse(ParseStatus::kTruncatedIpv6)},
  };
  Harness h(smallSettings());
  for (const auto& c : cases) h.send(0, c.frame);
  h.poll();
  EXPECT_TRUE(h.out(1).empty());
  auto cnt = h.counters();
  ASSERT_EQ(h.verdicts().size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].name);
    EXPECT_EQ(h.verdicts()[i].verdict, Verdict::kDrop);
    EXPECT_EQ(h.verdicts()[i].reason, cases[i].reason);
    EXPECT_EQ(h.verdicts()[i].stage, Stage::kParse);
    EXPECT_GE(drops(cnt, cases[i].reason), 1u);
  }
  EXPECT_EQ(cnt.verdicts[static_cast<int>(Verdict::kDrop)], cases.size());
}

TEST(Pipeline, MalformedForwardPolicyPassesFramesOn) {
  auto s = smallSettings();
  s.malformed = rules::Policy::kForward;
  Harness h(s);
  Frame bad = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").ipv4Ihl(3).udp(1, 2).build();
  h.send(0, bad);
  h.poll();
  auto out = h.out(1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], bad);
  EXPECT_EQ(h.counters().malformed_forwarded, 1u);
}

TEST(Pipeline, NonIpPolicy) {
  Frame arp = PacketBuilder().arp(1, "192.0.2.1", "192.0.2.2").build();
  {
    Harness h(smallSettings());
    h.send(1, arp);
    h.poll();
    auto out = h.out(0);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0], arp);
    EXPECT_EQ(h.counters().non_ip_forwarded, 1u);
  }
  {
    auto s = smallSettings();
    s.non_ip = rules::Policy::kDrop;
    Harness h(s);
    h.send(1, arp);
    h.poll();
    EXPECT_TRUE(h.out(0).empty());
    EXPECT_EQ(drops(h.counters(), DropReason::kNonIp), 1u);
  }
}

TEST(Pipeline, OutOfOrderFragmentsWaitForTheFirstAndFollowIt) {
  Harness h(smallSettings());
  Frame dgram = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").ipv4Id(77).udp(5000, 53)
                    .payload(std::string(100, 'x')).build();
  auto frags = test::fragmentIpv4(dgram, 48);
  ASSERT_EQ(frags.size(), 3u);
  h.send(0, frags[2]);
  h.send(0, frags[1]);
  h.poll();
  EXPECT_TRUE(h.out(1).empty());
  EXPECT_EQ(h.counters().frag_held, 2u);
  h.send(0, frags[0]);
  h.poll();
  auto out = h.out(1);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], frags[0]);
  EXPECT_EQ(out[1], frags[2]);
  EXPECT_EQ(out[2], frags[1]);
  ASSERT_EQ(h.verdicts().size(), 3u);
  for (const auto& v : h.verdicts()) EXPECT_EQ(v.verdict, Verdict::kForward);
  EXPECT_EQ(h.counters().flows_created, 1u);
}

TEST(Pipeline, OverlappingFragmentDroppedByDefault) {
  Harness h(smallSettings());
  Frame dgram = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").ipv4Id(9).udp(5000, 53)
                    .payload(std::string(100, 'x')).build();
  auto frags = test::fragmentIpv4(dgram, 48);
  h.send(0, frags[0]);
  h.send(0, frags[1]);
  h.send(0, frags[1]);  // exact duplicate overlaps
  h.poll();
  EXPECT_EQ(h.out(1).size(), 2u);
  EXPECT_EQ(drops(h.counters(), DropReason::kFragOverlap), 1u);
}

TEST(Pipeline, TinyFirstFragmentDropsTheWholeDatagram) {
  Harness h(smallSettings());
  Frame dgram = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").ipv4Id(5).tcp(1, 2, kTcpSyn)
                    .payload(std::string(64, 'y')).build();
  auto frags = test::fragmentIpv4(dgram, 8);  // first fragment: 8 bytes of a 20-byte header
  ASSERT_GT(frags.size(), 3u);
  for (const auto& f : frags) h.send(0, f);
  h.poll();
  EXPECT_TRUE(h.out(1).empty());
  auto c = h.counters();
  EXPECT_EQ(drops(c, DropReason::kFragTiny), 1u);
  EXPECT_EQ(drops(c, DropReason::kFragDatagramDropped), frags.size() - 1);
}

TEST(Pipeline, MidstreamTcpPolicy) {
  Frame mid = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(1, 2, kTcpAck, 100, 200).build();
  {
    Harness h(smallSettings());
    h.send(0, mid);
    h.poll();
    EXPECT_EQ(h.out(1).size(), 1u);
    EXPECT_EQ(h.counters().flows_midstream, 1u);
  }
  {
    auto s = smallSettings();
    s.tcp_midstream = rules::Policy::kDrop;
    Harness h(s);
    h.send(0, mid);
    h.poll();
    EXPECT_TRUE(h.out(1).empty());
    EXPECT_EQ(drops(h.counters(), DropReason::kTcpMidstream), 1u);
    EXPECT_EQ(h.counters().flows_created, 0u);
  }
}

TEST(Pipeline, FullFlowTablePolicy) {
  for (rules::Policy pol : {rules::Policy::kForward, rules::Policy::kDrop}) {
    auto s = smallSettings();
    s.flow_capacity = 1024;
    s.flow_when_full = pol;
    Harness h(s);
    const int kFlows = 1200;
    for (int i = 0; i < kFlows; ++i) {
      h.send(0, PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(static_cast<uint16_t>(1000 + i), 53)
                    .build());
      if (i % 500 == 499) h.poll();
    }
    h.poll();
    auto c = h.counters();
    EXPECT_EQ(c.flows_created + c.flow_table_full, static_cast<uint64_t>(kFlows));
    EXPECT_GE(c.flows_created, 1024u);
    EXPECT_GT(c.flow_table_full, 0u);
    size_t out = h.out(1).size();
    if (pol == rules::Policy::kDrop) {
      EXPECT_EQ(out, c.flows_created);
      EXPECT_EQ(drops(c, DropReason::kFlowTableFull), c.flow_table_full);
    } else {
      EXPECT_EQ(out, static_cast<size_t>(kFlows));
      EXPECT_EQ(c.untracked_forwarded, c.flow_table_full);
    }
  }
}

TEST(Pipeline, IdleFlowsExpireByProtocolTimeout) {
  auto s = smallSettings();
  s.udp_s = 5;
  s.aging_slice = 4096;
  Harness h(s);
  Frame q = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(3333, 53).build();
  h.send(0, q, 1000000);
  h.poll();
  h.send(0, q, 4000000);  // 3 s later: same flow
  h.poll();
  EXPECT_EQ(h.counters().flows_created, 1u);
  h.send(0, q, 10000000);  // 6 s idle: first the poll ages it, then a new flow
  h.poll();
  h.dp().worker(0).pollOnce();
  auto c = h.counters();
  EXPECT_EQ(c.flows_created, 2u);
  EXPECT_EQ(c.flows_expired, 1u);
  // The expiry produced a flow-end event with both packets of the first flow.
  int flow_events = 0;
  h.dp().drainEvents([&](const Event& e) {
    if (e.type == EventType::kFlowEnd) {
      ++flow_events;
      EXPECT_EQ(e.packets[0], 2u);
      EXPECT_EQ(e.end_reason, FlowEndReason::kTimeout);
    }
  });
  EXPECT_EQ(flow_events, 1);
}

TEST(Pipeline, PublishedSnapshotIsUsedFromTheNextBurst) {
  Harness h(smallSettings());
  Frame arp = PacketBuilder().arp(1, "192.0.2.1", "192.0.2.2").build();
  h.send(0, arp);
  h.poll();
  auto next = std::make_unique<rules::Snapshot>();
  next->dataplane = smallSettings();
  next->dataplane.non_ip = rules::Policy::kDrop;
  auto gen = h.dp().prepareAndPublish(std::move(next));
  ASSERT_TRUE(gen.ok()) << gen.status();
  EXPECT_EQ(*gen, 2u);
  h.send(0, arp);
  h.poll();
  ASSERT_EQ(h.verdicts().size(), 2u);
  EXPECT_EQ(h.verdicts()[0].generation, 1u);
  EXPECT_EQ(h.verdicts()[0].verdict, Verdict::kForward);
  EXPECT_EQ(h.verdicts()[1].generation, 2u);
  EXPECT_EQ(h.verdicts()[1].verdict, Verdict::kDrop);
  EXPECT_EQ(h.counters().generation, 2u);
}

namespace dpu::dp {
namespace {

TEST(Pipeline, SynAckWithoutSynIsMidstream) {
  auto s = smallSettings();
  s.tcp_midstream = rules::Policy::kDrop;
  Harness h(s);
  h.send(1, PacketBuilder().ipv4("10.0.0.2", "10.0.0.1").tcp(80, 40000, kTcpSyn | kTcpAck).build());
  h.send(0, PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 80, kTcpAck).build());
  h.poll();
  EXPECT_TRUE(h.out(0).empty());
  EXPECT_TRUE(h.out(1).empty());
  EXPECT_EQ(drops(h.counters(), DropReason::kTcpMidstream), 2u);
  EXPECT_EQ(h.counters().flows_created, 0u);
}

TEST(Pipeline, NewSynOnAClosedConnectionStartsANewFlow) {
  Harness h(smallSettings());
  auto pkt = [](uint8_t flags) {
    return PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").tcp(40000, 80, flags).build();
  };
  h.send(0, pkt(kTcpSyn));
  h.send(0, pkt(kTcpRst));
  h.poll();
  h.send(0, pkt(kTcpSyn), 2000000);
  h.poll();
  ASSERT_EQ(h.verdicts().size(), 3u);
  EXPECT_EQ(h.verdicts()[0].flow_id, h.verdicts()[1].flow_id);
  EXPECT_NE(h.verdicts()[2].flow_id, h.verdicts()[0].flow_id);
  EXPECT_TRUE(h.verdicts()[2].flow_new);
  int reused = 0;
  h.dp().drainEvents([&](const Event& e) {
    if (e.type == EventType::kFlowEnd && e.end_reason == FlowEndReason::kReused) ++reused;
  });
  EXPECT_EQ(reused, 1);
}

TEST(Pipeline, FlowEndEventNamesTheSideTheFlowStartedOn) {
  Harness h(smallSettings());
  h.send(1, PacketBuilder().ipv4("10.0.0.9", "10.0.0.1").udp(5353, 53).build());
  h.poll();
  while (!h.dp().worker(0).endFlows(4096)) {
  }
  int n = 0;
  h.dp().drainEvents([&](const Event& e) {
    if (e.type != EventType::kFlowEnd) return;
    ++n;
    EXPECT_EQ(e.in_side, kSideB);
    EXPECT_EQ(e.sport, 5353);
    EXPECT_EQ(e.end_reason, FlowEndReason::kShutdown);
  });
  EXPECT_EQ(n, 1);
}

TEST(Pipeline, FragmentIdReusedRightAfterCompletionIsANewDatagramInTheSameBurst) {
  Harness h(smallSettings());
  Frame a = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").ipv4Id(42).udp(5000, 53)
                .payload(std::string(100, 'a')).build();
  Frame b = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").ipv4Id(42).udp(5000, 53)
                .payload(std::string(100, 'b')).build();
  auto fa = test::fragmentIpv4(a, 64);
  auto fb = test::fragmentIpv4(b, 64);
  for (const auto& f : fa) h.send(0, f);
  for (const auto& f : fb) h.send(0, f);
  h.poll();  // all four frames in one burst
  EXPECT_EQ(h.out(1).size(), 4u);
  EXPECT_EQ(h.counters().frag_overlaps, 0u);
  for (const auto& v : h.verdicts()) EXPECT_EQ(v.verdict, Verdict::kForward);
}

TEST(Pipeline, StaleDatagramIsForgottenWhenItsNextFragmentArrives) {
  auto s = smallSettings();
  s.frag_timeout_ms = 1000;
  Harness h(s);
  Frame d = PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").ipv4Id(7).udp(5000, 53)
                .payload(std::string(100, 'x')).build();
  auto f = test::fragmentIpv4(d, 48);
  ASSERT_EQ(f.size(), 3u);
  h.send(0, f[1], 1000000);  // middle fragment, held
  h.poll();
  h.send(0, f[0], 3000000);  // 2 s later: the held middle fragment is stale
  h.send(0, f[2], 3000100);
  h.poll();
  auto c = h.counters();
  EXPECT_EQ(drops(c, DropReason::kFragTimeout), 1u);
  EXPECT_EQ(h.out(1).size(), 2u);
}

TEST(Pipeline, Ipv6FirstFragmentEndingInsideExtensionHeadersIsTiny) {
  Harness h(smallSettings());
  Frame d = PacketBuilder().ipv6("2001:db8::1", "2001:db8::2").ipv6DestOpts(64).udp(5000, 53)
                .payload(std::string(64, 'q')).build();
  auto f = test::fragmentIpv6(d, 16, 99);  // 16 bytes of a 64-byte destination-options header
  ASSERT_GE(f.size(), 2u);
  for (const auto& x : f) h.send(0, x);
  h.poll();
  EXPECT_TRUE(h.out(1).empty());
  auto c = h.counters();
  EXPECT_EQ(drops(c, DropReason::kFragTiny), 1u);
  EXPECT_EQ(drops(c, DropReason::kFragDatagramDropped), f.size() - 1);
}

TEST(Pipeline, AbsurdCaptureTimesDoNotWrapAndFlowsStillEnd) {
  // A capture whose tv_sec reads as -1 gives ~2^64 microseconds; times are clamped so the
  // end-of-input drain (now = UINT64_MAX) still ends the flow instead of looping forever.
  Harness h(smallSettings());
  h.send(0, PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1, 53).build(), UINT64_MAX - 5);
  h.poll();
  EXPECT_EQ(h.counters().flows_created, 1u);
  int calls = 0;
  while (!h.dp().worker(0).endFlows(4096)) ASSERT_LT(++calls, 10000) << "drain did not end";
  EXPECT_EQ(h.dp().worker(0).flows().size(), 0u);
}

}  // namespace
}  // namespace dpu::dp

// --- perf --- Per-stage cycle accounting and the latency histogram: every forwarded packet
// is one latency sample, the stages the packets went through have cycles, stages that did
// not run have none.
TEST(Pipeline, CycleAccountingAndLatencyCoverEveryForwardedPacket) {
  Harness h(smallSettings());
  constexpr int kPackets = 100;
  for (int i = 0; i < kPackets; ++i) {
    h.send(0, PacketBuilder().ipv4("10.0.0.1", "10.0.0.2").udp(1000 + i, 53).build());
  }
  h.send(0, Frame(10, 0x55));  // truncated: dropped by the parser, no latency sample
  h.poll();
  auto c = h.counters();
  ASSERT_EQ(c.verdicts[static_cast<int>(Verdict::kForward)], uint64_t(kPackets));
  uint64_t samples = 0;
  for (uint64_t v : c.latency) samples += v;
  EXPECT_EQ(samples, uint64_t(kPackets));
  EXPECT_GT(c.latency_max_ns, 0u);
  // The largest sample is the max, and no quantile reads above it.
  EXPECT_EQ(latencyQuantile(c.latency, 1.0, c.latency_max_ns), c.latency_max_ns);
  EXPECT_LE(latencyQuantile(c.latency, 0.5, c.latency_max_ns), c.latency_max_ns);
  EXPECT_GT(c.tsc_hz, 0u);
  for (int k : {kCyRx, kCyParse, kCyFlow, kCyFinish, kCyTx}) {
    EXPECT_GT(c.cycles[k], 0u) << cycleBucketName(k);
  }
  // No firewall, DNS, DPI or LB configured: their stages never ran.
  for (int k : {kCyFirewall, kCyDns, kCyDpi, kCyLb}) {
    EXPECT_EQ(c.cycles[k], 0u) << cycleBucketName(k);
  }
}

TEST(LatencyHistogram, BucketsAreContiguousAndQuantilesAreUpperBounds) {
  // Every value falls in a bucket whose limits contain it; limits increase.
  uint64_t prev_limit = 0;
  for (int i = 0; i < kLatencyBuckets; ++i) {
    uint64_t lim = latencyBucketLimit(i);
    EXPECT_GT(lim, prev_limit) << i;
    prev_limit = lim;
  }
  for (uint64_t v : {0ull, 1ull, 7ull, 8ull, 9ull, 15ull, 16ull, 17ull, 1000ull, 123456789ull,
                     (1ull << 40) - 1}) {
    int b = latencyBucket(v);
    EXPECT_LT(v, latencyBucketLimit(b)) << v;
    if (b > 0) {
      EXPECT_GE(v, latencyBucketLimit(b - 1)) << v;
    }
    // 8 buckets per power of two: a bucket is at most 1/8 of its lower limit wide.
    if (v >= 8) {
      EXPECT_LE(latencyBucketLimit(b) - v, v / 8 + 1) << v;
    }
  }
  uint64_t hist[kLatencyBuckets] = {};
  EXPECT_EQ(latencyQuantile(hist, 0.5, 0), 0u);
  hist[latencyBucket(1000)] = 98;
  hist[latencyBucket(50000)] = 2;
  EXPECT_EQ(latencyQuantile(hist, 0.5, 50000), latencyBucketLimit(latencyBucket(1000)));
  EXPECT_EQ(latencyQuantile(hist, 0.98, 50000), latencyBucketLimit(latencyBucket(1000)));
  // 50000 ns is in a bucket whose upper bound is above it: the quantile is the max, not the
  // bound (the summary printed "p99.9 114.7 us   max 113.8 us").
  ASSERT_GT(latencyBucketLimit(latencyBucket(50000)), 50000u);
  EXPECT_EQ(latencyQuantile(hist, 0.99, 50000), 50000u);
  EXPECT_EQ(latencyQuantile(hist, 0.999, 50000), 50000u);
  // A max inside the bucket of the quantile caps it; a max in a higher bucket does not.
  EXPECT_EQ(latencyQuantile(hist, 0.5, 1001), 1001u);
  EXPECT_EQ(latencyQuantile(hist, 0.5, 50000), latencyBucketLimit(latencyBucket(1000)));
}

// The case of the report: 1000 samples, the slowest 113.8 us, the p99.9 sample in the same
// bucket: every quantile is at most the max.
TEST(LatencyHistogram, QuantilesNeverExceedTheMax) {
  uint64_t hist[kLatencyBuckets] = {};
  const uint64_t max_ns = 113800;
  hist[latencyBucket(2000)] = 990;
  hist[latencyBucket(max_ns)] = 10;
  for (double q : {0.5, 0.9, 0.99, 0.999, 1.0}) {
    EXPECT_LE(latencyQuantile(hist, q, max_ns), max_ns) << q;
  }
  EXPECT_EQ(latencyQuantile(hist, 0.999, max_ns), max_ns);
}

}  // namespace
}  // namespace dpu::dp
