// Fragmented datagrams reassembled for inspection through the real worker path (Harness):
// a DNS query for a blocked name and a DPI payload (pcap case evasion_fragments) sent as IPv4 / IPv6 fragments (tiny,
// out of order) are judged whole and blocked (every fragment dropped, one NXDOMAIN answer);
// clean ones leave byte-identical; overlaps with different data drop the datagram;
// identical overlaps pass; an IPv6 atomic fragment is judged alone; each exhaustion cause
// (no buffer, too big, held pool) under fail_closed and fail_open; a flood of incomplete
// datagrams stays within the configured budget and every packet gets one counted verdict.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/api/dataplane.h"
#include "dataplane/packet/parser.h"
#include "tests/dataplane/pipeline/harness.h"
#include "tests/util/dns_builder.h"
#include "tests/util/dns_snapshot.h"
#include "tests/util/packet_builder.h"

namespace dpu::dp {
namespace {

using test::Frame;
using test::PacketBuilder;
using test::parseFrame;

uint64_t drops(const CountersSnapshot::Flat& c, DropReason r) {
  return c.drops[static_cast<int>(r)];
}

rules::DataplaneSettings settings() {
  rules::DataplaneSettings s;
  s.flow_capacity = 4096;
  s.frag_max_datagrams = 64;
  s.frag_reassembly_buffers = 8;
  s.frag_max_held = 64;
  s.frag_timeout_ms = 1000;
  s.aging_slice = 4096;
  return s;
}

std::unique_ptr<rules::Snapshot> dnsSnap(const rules::DataplaneSettings& ds = settings()) {
  return test::dnsSnapshot(ds);
}

Frame query4(const std::string& name, uint16_t sport, uint16_t id = 0x2222) {
  return PacketBuilder()
      .eth(test::mac("02:00:00:00:00:0a"), test::mac("02:00:00:00:00:0b"))
      .ipv4("10.0.0.1", "10.0.0.53")
      .ipv4Id(id)
      .udp(sport, 53)
      .payload(test::dnsQuery(name, 1, id))
      .build();
}

Frame query6(const std::string& name, uint16_t sport) {
  return PacketBuilder()
      .eth(test::mac("02:00:00:00:00:0a"), test::mac("02:00:00:00:00:0b"))
      .ipv6("2001:db8::1", "2001:db8::53")
      .udp(sport, 53)
      .payload(test::dnsQuery(name, 28, 0x3333))
      .build();
}

// Sends `frags` in `order` (1 µs apart) and polls.
void sendAll(Harness& h, const std::vector<Frame>& frags, const std::vector<size_t>& order,
             uint64_t t0 = 1000000) {
  for (size_t k = 0; k < order.size(); ++k) h.send(0, frags[order[k]], t0 + k);
  h.poll();
}

std::vector<size_t> inOrder(size_t n) {
  std::vector<size_t> o(n);
  for (size_t i = 0; i < n; ++i) o[i] = i;
  return o;
}

TEST(DatagramPipeline, BlockedQueryInTinyFragmentsOutOfOrderIsAnsweredOnce) {
  for (bool v6 : {false, true}) {
    SCOPED_TRACE(v6 ? "ipv6" : "ipv4");
    Harness h(dnsSnap());
    Frame q = v6 ? query6("www.ads.example", 40001) : query4("www.ads.example", 40001);
    auto frags = v6 ? test::fragmentIpv6(q, 8, 77) : test::fragmentIpv4(q, 8);
    ASSERT_GE(frags.size(), 5u);
    std::vector<size_t> order = inOrder(frags.size());
    std::reverse(order.begin(), order.end());
    std::swap(order[1], order[3]);
    sendAll(h, frags, order);
    EXPECT_TRUE(h.out(1).empty()) << "a fragment of the blocked query went through";
    auto back = h.out(0);
    ASSERT_EQ(back.size(), 1u);  // one NXDOMAIN, built from the reassembled query
    PacketMeta am = parseFrame(back[0]);
    EXPECT_FALSE(am.is_fragment);
    EXPECT_EQ(am.dport, 40001);
    const uint8_t* dns = back[0].data() + am.payload_offset;
    EXPECT_EQ(dns[3] & 0x0f, 3);  // rcode NXDOMAIN
    auto c = h.counters();
    EXPECT_EQ(c.frag_reassembled, 1u);
    EXPECT_EQ(c.dns[kDnsBlocked], 1u);
    EXPECT_EQ(drops(c, DropReason::kDnsAnswered), 1u);
    EXPECT_EQ(drops(c, DropReason::kFragDatagramDropped), frags.size() - 1);
    EXPECT_EQ(h.verdicts().size(), frags.size());
    EXPECT_EQ(c.frag_buffers_in_use, 0u);
  }
}

TEST(DatagramPipeline, CleanFragmentsLeaveUnchangedInArrivalOrder) {
  Harness h(dnsSnap());
  auto frags = test::fragmentIpv4(query4("www.example.org", 40002), 8);
  std::vector<size_t> order = {2, 0, 3, 1};
  for (size_t i = 4; i < frags.size(); ++i) order.push_back(i);
  sendAll(h, frags, order);
  auto out = h.out(1);
  ASSERT_EQ(out.size(), frags.size());
  // Held fragments first (arrival order), the completing one last.
  for (size_t k = 0; k < order.size(); ++k) EXPECT_EQ(out[k], frags[order[k]]) << k;
  auto c = h.counters();
  EXPECT_EQ(c.frag_reassembled, 1u);
  EXPECT_EQ(c.dns[kDnsQueries], 1u);  // the reassembled query was read
  EXPECT_EQ(c.flows_created, 1u);
}

TEST(DatagramPipeline, OverlapWithDifferentDataDropsTheDatagram) {
  for (rules::Policy p : {rules::Policy::kDrop, rules::Policy::kForward}) {
    SCOPED_TRACE(p == rules::Policy::kDrop ? "drop" : "forward");
    auto ds = settings();
    ds.frag_overlapping = p;
    Harness h(dnsSnap(ds));
    // The clean name first, then the same bytes carrying the blocked name.
    Frame ok = query4("www.abc.example", 40003);
    Frame bad = query4("www.ads.example", 40003);
    auto fo = test::fragmentIpv4(ok, 16);
    auto fb = test::fragmentIpv4(bad, 16);
    ASSERT_EQ(fo.size(), fb.size());
    ASSERT_NE(fo[1], fb[1]);
    h.send(0, fo[0], 1000000);
    h.send(0, fo[1], 1000001);
    h.send(0, fb[1], 1000002);  // overlaps fo[1] with different bytes
    for (size_t i = 2; i < fo.size(); ++i) h.send(0, fo[i], 1000003 + i);
    h.poll();
    auto c = h.counters();
    EXPECT_EQ(c.frag_overlap_conflicts, 1u);
    if (p == rules::Policy::kDrop) {
      EXPECT_TRUE(h.out(1).empty());
      EXPECT_EQ(drops(c, DropReason::kFragOverlapConflict), 1u);
      EXPECT_EQ(c.frag_reassembled, 0u);
    } else {
      // FORWARD keeps the first copy: the clean name is what was inspected and passes.
      EXPECT_EQ(h.out(1).size(), fo.size() + 1);
      EXPECT_EQ(c.frag_reassembled, 1u);
      EXPECT_EQ(c.dns[kDnsBlocked], 0u);
    }
  }
}

TEST(DatagramPipeline, IdenticalOverlapIsAccepted) {
  Harness h(dnsSnap());
  auto frags = test::fragmentIpv4(query4("www.ads.example", 40004), 16);
  h.send(0, frags[0], 1000000);
  h.send(0, frags[0], 1000001);  // an identical duplicate
  for (size_t i = 1; i < frags.size(); ++i) h.send(0, frags[i], 1000002 + i);
  h.poll();
  auto c = h.counters();
  EXPECT_EQ(c.frag_overlap_identical, 1u);
  EXPECT_EQ(c.frag_reassembled, 1u);
  EXPECT_EQ(c.dns[kDnsBlocked], 1u);
  EXPECT_TRUE(h.out(1).empty());
  EXPECT_EQ(h.out(0).size(), 1u);
}

TEST(DatagramPipeline, Ipv6AtomicFragmentIsJudgedAlone) {
  Harness h(dnsSnap());
  std::vector<Frame> frags = {PacketBuilder()
                                  .eth(test::mac("02:00:00:00:00:0a"), test::mac("02:00:00:00:00:0b"))
                                  .ipv6("2001:db8::1", "2001:db8::53")
                                  .ipv6Fragment(99, 0, false)  // offset 0, M clear
                                  .udp(40005, 53)
                                  .payload(test::dnsQuery("www.ads.example", 28, 0x3333))
                                  .build()};
  PacketMeta m = parseFrame(frags[0]);
  ASSERT_TRUE(m.is_fragment);
  ASSERT_FALSE(m.more_fragments);
  sendAll(h, frags, {0});
  EXPECT_TRUE(h.out(1).empty());
  EXPECT_EQ(h.out(0).size(), 1u);
  auto c = h.counters();
  EXPECT_EQ(c.frag_atomic, 1u);
  EXPECT_EQ(c.dns[kDnsBlocked], 1u);
  EXPECT_EQ(c.frag_datagrams_active, 0u);
}

// Exhaustion: one reassembly buffer; a second datagram interleaved with the first finds
// none. fail_closed drops it whole; fail_open lets its first fragment be judged alone.
TEST(DatagramPipeline, NoBufferAppliesTheFailPolicy) {
  for (rules::Policy p : {rules::Policy::kDrop, rules::Policy::kForward}) {
    SCOPED_TRACE(p == rules::Policy::kDrop ? "fail_closed" : "fail_open");
    auto ds = settings();
    ds.frag_reassembly_buffers = 1;
    ds.frag_on_exhaustion = p;
    Harness h(dnsSnap(ds));
    auto a = test::fragmentIpv4(query4("www.example.org", 40010, 0x10), 16);
    auto b = test::fragmentIpv4(query4("www.ads.example", 40011, 0x11), 16);
    h.send(0, a[0], 1000000);   // takes the only buffer
    for (size_t i = 0; i < b.size(); ++i) h.send(0, b[i], 1000001 + i);  // none left
    for (size_t i = 1; i < a.size(); ++i) h.send(0, a[i], 1000100 + i);
    h.poll();
    auto c = h.counters();
    EXPECT_EQ(c.frag_no_buffer, 1u);
    EXPECT_EQ(c.frag_reassembled, 1u);  // the first datagram
    size_t uninspected = 0, dropped_events = 0;
    h.dp().drainEvents([&](const Event& e) {
      if (e.type == EventType::kUninspected && e.reason == DropReason::kFragNoBuffer) ++uninspected;
      if (e.type == EventType::kDrop && e.reason == DropReason::kFragNoBuffer) ++dropped_events;
    });
    auto out = h.out(1);
    if (p == rules::Policy::kDrop) {
      EXPECT_EQ(c.frag_fail_closed, 1u);
      EXPECT_EQ(drops(c, DropReason::kFragNoBuffer), 1u);
      EXPECT_EQ(drops(c, DropReason::kFragDatagramDropped), b.size() - 1);
      EXPECT_EQ(dropped_events, 1u);
      EXPECT_EQ(out.size(), a.size());
    } else {
      // Uninspected (its query is for a blocked name, yet it passes), counted and evented.
      EXPECT_EQ(c.frag_fail_open, 1u);
      EXPECT_EQ(uninspected, 1u);
      EXPECT_EQ(out.size(), a.size() + b.size());
      EXPECT_EQ(c.dns[kDnsBlocked], 0u);
    }
    EXPECT_EQ(h.verdicts().size(), a.size() + b.size());
  }
}

// Too big: the held first fragment is judged alone (fail_open) or all dropped (closed).
TEST(DatagramPipeline, TooBigAppliesTheFailPolicy) {
  for (rules::Policy p : {rules::Policy::kDrop, rules::Policy::kForward}) {
    SCOPED_TRACE(p == rules::Policy::kDrop ? "fail_closed" : "fail_open");
    auto ds = settings();
    ds.frag_max_datagram_bytes = 1280;
    ds.frag_on_exhaustion = p;
    Harness h(dnsSnap(ds));
    Frame big = PacketBuilder()
                    .eth(test::mac("02:00:00:00:00:0a"), test::mac("02:00:00:00:00:0b"))
                    .ipv4("10.0.0.1", "10.0.0.9")
                    .udp(5000, 6000)
                    .payload(std::string(2000, 'x'))
                    .build();
    auto f = test::fragmentIpv4(big, 800);
    ASSERT_EQ(f.size(), 3u);
    sendAll(h, f, {0, 1, 2});  // the second fragment ends past 1280
    auto c = h.counters();
    EXPECT_EQ(c.frag_too_big, 1u);
    if (p == rules::Policy::kDrop) {
      EXPECT_EQ(c.frag_fail_closed, 1u);
      EXPECT_TRUE(h.out(1).empty());
      EXPECT_EQ(drops(c, DropReason::kFragTooBig), 1u);
      EXPECT_EQ(drops(c, DropReason::kFragDatagramDropped), 2u);
    } else {
      EXPECT_EQ(c.frag_fail_open, 1u);
      auto out = h.out(1);
      ASSERT_EQ(out.size(), 3u);
      EXPECT_EQ(out[0], f[0]);  // the first fragment, judged in the second one's place
      EXPECT_EQ(c.flows_created, 1u);
    }
    EXPECT_EQ(h.verdicts().size(), 3u);
    EXPECT_EQ(c.frag_buffers_in_use, 0u);
  }
}

// Held pool used up: fail_closed drops the datagram that found no handle.
TEST(DatagramPipeline, HeldPoolFullAppliesTheFailPolicy) {
  auto ds = settings();
  ds.frag_max_held = 16;
  ds.frag_reassembly_buffers = 64;
  Harness h(dnsSnap(ds));
  Frame big = PacketBuilder()
                  .eth(test::mac("02:00:00:00:00:0a"), test::mac("02:00:00:00:00:0b"))
                  .ipv4("10.0.0.1", "10.0.0.9")
                  .udp(5000, 6000)
                  .payload(std::string(400, 'y'))
                  .build();
  auto f = test::fragmentIpv4(big, 16);  // 26 fragments: 16 held, then none left
  ASSERT_GT(f.size(), 17u);
  sendAll(h, f, inOrder(f.size()));
  auto c = h.counters();
  EXPECT_EQ(c.frag_hold_full, 1u);
  EXPECT_EQ(c.frag_fail_closed, 1u);
  EXPECT_TRUE(h.out(1).empty());
  EXPECT_EQ(drops(c, DropReason::kFragHoldFull), 1u);
  EXPECT_EQ(drops(c, DropReason::kFragDatagramDropped), f.size() - 1);
  EXPECT_EQ(h.verdicts().size(), f.size());
}

// Many incomplete datagrams: buffers and held fragments never exceed the budget, the rest
// is refused by policy, and after the timeout nothing is left.
TEST(DatagramPipeline, FloodOfIncompleteDatagramsIsBounded) {
  auto ds = settings();
  ds.frag_reassembly_buffers = 16;
  ds.frag_max_held = 32;
  ds.frag_max_datagrams = 64;
  Harness h(dnsSnap(ds));
  const int n = 2000;
  uint64_t t = 1000000;
  uint64_t max_buffers = 0, max_active = 0;
  for (int i = 0; i < n; ++i) {
    Frame dg = PacketBuilder()
                   .eth(test::mac("02:00:00:00:00:0a"), test::mac("02:00:00:00:00:0b"))
                   .ipv4("10.0.0.1", "10.0.0.9")
                   .ipv4Id(static_cast<uint16_t>(i))
                   .udp(5000, 53)
                   .payload(std::string(64, 'z'))
                   .build();
    auto f = test::fragmentIpv4(dg, 16);
    h.send(0, f[i % 3], ++t);  // one fragment of each: never complete
    if (i % 32 == 31) {
      h.poll();
      auto c = h.counters();
      max_buffers = std::max<uint64_t>(max_buffers, c.frag_buffers_in_use);
      max_active = std::max<uint64_t>(max_active, c.frag_datagrams_active);
      (void)h.out(1);
    }
  }
  h.poll();
  auto during = h.counters();
  EXPECT_LE(max_buffers, 16u);
  EXPECT_LE(max_active, 64u);
  EXPECT_LE(rte_mempool_in_use_count(h.pool()), 32u + 64u);  // held + ring slack
  EXPECT_EQ(during.frag_no_buffer + during.frag_hold_full, during.frag_fail_closed);
  EXPECT_GT(during.frag_fail_closed, 0u);
  // Past the timeout everything held is dropped as incomplete.
  for (int i = 0; i < 8; ++i) h.send(0, PacketBuilder().arp(1, "192.0.2.1", "192.0.2.2").build(), t + 3000000 + i);
  h.poll();
  EXPECT_EQ(h.out(1).size(), 8u);  // the ARP frames only
  auto after = h.counters();
  EXPECT_EQ(after.frag_buffers_in_use, 0u);
  EXPECT_EQ(after.frag_datagrams_active, 0u);
  EXPECT_EQ(rte_mempool_in_use_count(h.pool()), 0u);
  EXPECT_EQ(h.verdicts().size(), static_cast<size_t>(n + 8));
  EXPECT_GT(drops(after, DropReason::kFragIncomplete), 0u);
  EXPECT_EQ(after.totalDrops(), static_cast<uint64_t>(n));
}

}  // namespace
}  // namespace dpu::dp
