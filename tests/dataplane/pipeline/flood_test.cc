// Floods through the real worker path (the packet-table harness): a SYN flood from random
// sources against a small flow table, fragment floods (never-completed, overlapping,
// tiny, held-forever datagrams), and an out-of-order TCP flood against the TCP stream engine
// read by DPI (holes that never fill, retransmits, overlaps, with YARA rules loaded). What must hold: memory does not grow with the flood (the
// DPDK heap not at all, the C heap not with the packet count), no mbuf is leaked or held
// past the fragment timeout, every packet gets exactly one verdict, the full-table policy
// applies and the counters say so, and flows established before the flood keep working.
#include <malloc.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mempool.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "dataplane/api/dataplane.h"
#include "dataplane/frag/frag_tracker.h"
#include "rules/compile/yara_translate.h"
#include "tests/dataplane/pipeline/harness.h"
#include "tests/util/packet_builder.h"

namespace dpu::dp {
namespace {

using test::Frame;
using test::PacketBuilder;

uint64_t drops(const CountersSnapshot::Flat& c, DropReason r) {
  return c.drops[static_cast<int>(r)];
}

// Bytes allocated on every DPDK heap (the flow and fragment tables, rings, pools live there).
size_t dpdkHeapBytes() {
  size_t total = 0;
  for (unsigned s = 0; s < rte_socket_count(); ++s) {
    rte_malloc_socket_stats st{};
    if (rte_malloc_get_socket_stats(rte_socket_id_by_idx(s), &st) == 0) total += st.heap_allocsz_bytes;
  }
  return total;
}

size_t cHeapBytes() { return mallinfo2().uordblks; }

std::string randomV4(std::mt19937& rng) {
  uint32_t a = rng();
  return std::to_string(1 + (a >> 24) % 223) + "." + std::to_string((a >> 16) & 255) + "." +
         std::to_string((a >> 8) & 255) + "." + std::to_string(1 + (a & 255) % 254);
}

// Sends frames in chunks the rings and the test pool can take, polls, drains both sides and
// keeps the tallies (verdicts are counted and cleared per chunk so the recorder does not grow).
class Driver {
 public:
  explicit Driver(Harness& h) : h_(h) { h_.verdicts().reserve(kChunk + 64); }
  void send(int side, const Frame& f, uint64_t ts_us) {
    h_.send(side, f, ts_us);
    ++sent;
    if (++pending_ == kChunk) flush();
  }
  void flush() {
    h_.poll();
    pending_ = 0;
    out[0] += h_.out(0).size();
    out[1] += h_.out(1).size();
    for (const auto& v : h_.verdicts()) {
      ++verdicts;
      if (v.verdict == Verdict::kForward) ++forwarded;
      if (v.verdict == Verdict::kDrop) ++dropped;
    }
    h_.verdicts().clear();
  }
  uint64_t sent = 0, verdicts = 0, forwarded = 0, dropped = 0;
  uint64_t out[2] = {0, 0};

 private:
  static constexpr int kChunk = 512;
  Harness& h_;
  int pending_ = 0;
};

struct Session {
  std::string cli, srv;
  uint16_t sport;
  Frame c2s, s2c;
};

// A TCP session established before the flood (SYN, SYN+ACK, ACK) and a data frame per
// direction to send during it.
std::vector<Session> establish(Driver& d, int n, uint64_t ts_us) {
  std::vector<Session> out;
  for (int i = 0; i < n; ++i) {
    Session s{"10.1.0." + std::to_string(i + 1), "10.2.0." + std::to_string(i + 1),
              static_cast<uint16_t>(40000 + i), {}, {}};
    d.send(0, PacketBuilder().ipv4(s.cli, s.srv).tcp(s.sport, 443, kTcpSyn, 100).build(), ts_us);
    d.send(1, PacketBuilder().ipv4(s.srv, s.cli).tcp(443, s.sport, kTcpSyn | kTcpAck, 500, 101)
                  .build(), ts_us);
    d.send(0, PacketBuilder().ipv4(s.cli, s.srv).tcp(s.sport, 443, kTcpAck, 101, 501).build(),
           ts_us);
    s.c2s = PacketBuilder().ipv4(s.cli, s.srv).tcp(s.sport, 443, kTcpAck, 101, 501)
                .payload("GET / HTTP/1.1\r\n\r\n").build();
    s.s2c = PacketBuilder().ipv4(s.srv, s.cli).tcp(443, s.sport, kTcpAck, 501, 119)
                .payload("HTTP/1.1 200 OK\r\n\r\n").build();
    out.push_back(std::move(s));
  }
  d.flush();
  return out;
}

class SynFlood : public ::testing::TestWithParam<rules::Policy> {};

TEST_P(SynFlood, RandomSourcesAgainstAFullTable) {
  const rules::Policy policy = GetParam();
  rules::DataplaneSettings s;
  s.flow_capacity = 1024;
  s.flow_when_full = policy;
  s.tcp_syn_s = 5;
  s.aging_slice = 256;
  Harness h(s);
  Driver d(h);
  const int kSessions = 8;
  uint64_t t = 1000000;  // µs
  auto sessions = establish(d, kSessions, t);
  ASSERT_EQ(h.counters().flows_created, static_cast<uint64_t>(kSessions));
  const uint64_t pre_sent = d.sent;

  std::mt19937 rng(12345);
  auto flood = [&](int n, uint64_t* established_sent) {
    for (int i = 0; i < n; ++i) {
      d.send(0, PacketBuilder().ipv4(randomV4(rng), "192.0.2.80")
                    .tcp(static_cast<uint16_t>(1024 + rng() % 60000), 80, kTcpSyn, rng()).build(),
             ++t);
      if (i % 97 == 0) {  // the established sessions keep talking, both ways
        for (const auto& ss : sessions) {
          d.send(0, ss.c2s, t);
          d.send(1, ss.s2c, t);
          *established_sent += 2;
        }
      }
    }
    d.flush();
  };

  uint64_t est_sent = 0;
  flood(10000, &est_sent);
  const size_t dpdk_after_10k = dpdkHeapBytes();
  const size_t c_after_10k = cHeapBytes();
  const auto c1 = h.counters();
  // The table filled up to its capacity and no further; every other SYN met the policy.
  EXPECT_EQ(c1.flows_active, 1024u);
  EXPECT_EQ(c1.flows_created, 1024u);
  const uint64_t flood_syns = d.sent - pre_sent - est_sent;
  EXPECT_EQ(c1.flow_table_full, flood_syns - (1024 - kSessions));
  if (policy == rules::Policy::kDrop) {
    EXPECT_EQ(drops(c1, DropReason::kFlowTableFull), c1.flow_table_full);
    EXPECT_EQ(c1.untracked_forwarded, 0u);
  } else {
    EXPECT_EQ(drops(c1, DropReason::kFlowTableFull), 0u);
    EXPECT_EQ(c1.untracked_forwarded, c1.flow_table_full);
  }

  flood(40000, &est_sent);
  const auto c2 = h.counters();
  // Memory does not grow with the flood: 40000 more SYNs, nothing more on the DPDK heap, the
  // C heap within noise (no per-packet or per-flow allocation).
  EXPECT_EQ(dpdkHeapBytes(), dpdk_after_10k);
  EXPECT_LT(cHeapBytes(), c_after_10k + 64 * 1024);
  EXPECT_EQ(c2.flows_active, 1024u);
  EXPECT_EQ(c2.flows_created, 1024u);
  EXPECT_EQ(c2.flow_table_full, d.sent - pre_sent - est_sent - (1024 - kSessions));

  // Every packet judged once; the established sessions never lost a packet, and every data
  // packet was tracked by its flow (no new flow, no table-full for them).
  EXPECT_EQ(d.verdicts, d.sent);
  EXPECT_EQ(d.forwarded + d.dropped, d.sent);
  EXPECT_EQ(d.out[0] + d.out[1], d.forwarded);
  EXPECT_EQ(d.out[0], est_sent / 2 + kSessions);  // SYN+ACKs of establish() + s2c data
  if (policy == rules::Policy::kDrop) {
    EXPECT_EQ(d.dropped, c2.flow_table_full);
    EXPECT_EQ(d.out[1], est_sent / 2 + 2 * kSessions + (1024 - kSessions));
  } else {
    EXPECT_EQ(d.dropped, 0u);
  }
  EXPECT_EQ(c2.rx_packets[0] + c2.rx_packets[1], d.sent);

  // The flood stops; after the SYN timeout the half-open flows age out (bounded slices) and
  // the table takes new flows again. The sessions, idle 6 s, are still established.
  t += 6 * 1000000;
  for (int i = 0; i < 200; ++i) {  // traffic to drive the aging: 200 ARP frames
    d.send(0, PacketBuilder().arp(1, "192.0.2.1", "192.0.2.2").build(), t);
    if (i % 8 == 7) d.flush();
  }
  d.flush();
  const auto c3 = h.counters();
  EXPECT_EQ(c3.flows_expired, 1024u - kSessions);
  EXPECT_EQ(c3.flows_active, static_cast<uint64_t>(kSessions));
  const uint64_t created_before = c3.flows_created;
  const uint64_t full_before = c3.flow_table_full;
  h.verdicts().clear();
  for (const auto& ss : sessions) {
    h.send(0, ss.c2s, t);
    h.send(1, ss.s2c, t);
  }
  h.send(0, PacketBuilder().ipv4("198.51.100.7", "192.0.2.80").tcp(5555, 80, kTcpSyn).build(), t);
  h.poll();
  EXPECT_EQ(h.out(1).size(), static_cast<size_t>(kSessions + 1));
  EXPECT_EQ(h.out(0).size(), static_cast<size_t>(kSessions));
  ASSERT_EQ(h.verdicts().size(), static_cast<size_t>(2 * kSessions + 1));
  int fresh = 0;
  for (const auto& v : h.verdicts()) {
    EXPECT_EQ(v.verdict, Verdict::kForward);
    EXPECT_NE(v.flow_id, 0u);
    fresh += v.flow_new;
  }
  EXPECT_EQ(fresh, 1);  // the new SYN; the sessions' packets found their flows
  const auto c4 = h.counters();
  EXPECT_EQ(c4.flows_created, created_before + 1);
  EXPECT_EQ(c4.flow_table_full, full_before);
  EXPECT_EQ(rte_mempool_in_use_count(h.pool()), 0u);
}

INSTANTIATE_TEST_SUITE_P(Policies, SynFlood,
                         ::testing::Values(rules::Policy::kDrop, rules::Policy::kForward),
                         [](const auto& info) {
                           return info.param == rules::Policy::kDrop ? std::string("Drop")
                                                                     : std::string("Forward");
                         });

rules::DataplaneSettings fragSettings() {
  rules::DataplaneSettings s;
  s.flow_capacity = 4096;
  s.frag_max_datagrams = 64;
  s.frag_timeout_ms = 1000;
  s.frag_max_fragments = 16;
  s.aging_slice = 4096;
  return s;
}

// One kind of fragment flood; every frame from `make(i)` is sent at 1 µs steps.
struct FragFloodResult {
  CountersSnapshot::Flat during, after;
  uint64_t max_pool_in_use = 0;
  uint64_t sent = 0, verdicts = 0, forwarded = 0, dropped = 0, out = 0;
  size_t dpdk_mid = 0, dpdk_end = 0, c_mid = 0, c_end = 0;
};

template <typename Make>
FragFloodResult fragFlood(int n, Make make) {
  FragFloodResult r;
  Harness h(fragSettings());
  Driver d(h);
  uint64_t t = 1000000;
  for (int i = 0; i < n; ++i) {
    for (const Frame& f : make(i)) d.send(i % 2, f, ++t);
    if (i % 64 == 63) {
      d.flush();
      r.max_pool_in_use = std::max<uint64_t>(r.max_pool_in_use, rte_mempool_in_use_count(h.pool()));
    }
    if (i == n / 4) {
      d.flush();
      r.dpdk_mid = dpdkHeapBytes();
      r.c_mid = cHeapBytes();
    }
  }
  d.flush();
  r.max_pool_in_use = std::max<uint64_t>(r.max_pool_in_use, rte_mempool_in_use_count(h.pool()));
  r.dpdk_end = dpdkHeapBytes();
  r.c_end = cHeapBytes();
  r.during = h.counters();
  // Past the timeout: whatever is still tracked or held is forgotten and dropped.
  t += 2 * 1000000;
  for (int i = 0; i < 64; ++i) d.send(0, PacketBuilder().arp(1, "192.0.2.1", "192.0.2.2").build(), t + i);
  d.flush();
  r.after = h.counters();
  r.sent = d.sent;
  r.verdicts = d.verdicts;
  r.forwarded = d.forwarded;
  r.dropped = d.dropped;
  r.out = d.out[0] + d.out[1];
  EXPECT_EQ(rte_mempool_in_use_count(h.pool()), 0u) << "mbufs held past the fragment timeout";
  return r;
}

void expectBoundedAndAccounted(const FragFloodResult& r) {
  EXPECT_EQ(r.dpdk_end, r.dpdk_mid);
  EXPECT_LT(r.c_end, r.c_mid + 64 * 1024);
  EXPECT_LE(r.during.frag_datagrams_active, 128u);
  EXPECT_LE(r.max_pool_in_use, 128u * kMaxHeldPerDatagram + 600);  // held + one chunk in flight
  EXPECT_EQ(r.after.frag_datagrams_active, 0u);
  EXPECT_EQ(r.verdicts, r.sent);  // every packet judged exactly once (held ones later)
  EXPECT_EQ(r.out, r.forwarded);
  EXPECT_EQ(r.forwarded + r.dropped, r.sent);
  EXPECT_EQ(r.after.totalDrops(), r.dropped);  // every drop counted under a reason
  EXPECT_EQ(r.after.rx_packets[0] + r.after.rx_packets[1], r.sent);
}

// First fragments only (MF set, the rest never comes), each a new datagram: the table
// fills; later ones are dropped as table-full; the timeout empties it.
TEST(FragFlood, NeverCompletedDatagrams) {
  std::mt19937 rng(7);
  auto r = fragFlood(20000, [&](int i) {
    Frame dg = PacketBuilder().ipv4(randomV4(rng), "192.0.2.53").ipv4Id(static_cast<uint16_t>(i))
                   .udp(static_cast<uint16_t>(1024 + i % 50000), 53).payload(std::string(64, 'q'))
                   .build();
    auto frags = test::fragmentIpv4(dg, 32);
    return std::vector<Frame>{frags[0]};
  });
  expectBoundedAndAccounted(r);
  EXPECT_GT(drops(r.during, DropReason::kFragTableFull), 15000u);
  EXPECT_EQ(r.during.frag_packets, 20000u);
}

// Later fragments only (the first never arrives): held up to the per-datagram bound, then
// dropped as hold-full; held ones are dropped at the timeout, each counted.
TEST(FragFlood, LaterFragmentsWhoseFirstNeverArrives) {
  std::mt19937 rng(8);
  auto r = fragFlood(3000, [&](int i) {
    Frame dg = PacketBuilder().ipv4("10.9.0.1", "192.0.2.53").ipv4Id(static_cast<uint16_t>(i / 40))
                   .udp(4000, 53).payload(std::string(800, 'h')).build();
    auto frags = test::fragmentIpv4(dg, 16);  // ~51 fragments
    return std::vector<Frame>{frags[1 + i % 40]};
  });
  expectBoundedAndAccounted(r);
  EXPECT_GT(drops(r.during, DropReason::kFragHoldFull), 0u);
  EXPECT_GT(r.after.frag_timeouts, 0u);
  EXPECT_EQ(drops(r.after, DropReason::kFragTimeout), r.after.frag_timeouts);
  EXPECT_EQ(r.forwarded, 64u);  // only the ARP frames sent after the timeout
}

// The same bytes over and over (overlaps), tiny first fragments, too many fragments and
// IPv6 fragments, mixed.
TEST(FragFlood, OverlappingTinyAndTooManyMixed) {
  std::mt19937 rng(9);
  Frame big = PacketBuilder().ipv4("10.9.0.2", "192.0.2.53").ipv4Id(4242).udp(4001, 53)
                  .payload(std::string(1200, 'o')).build();
  auto big_frags = test::fragmentIpv4(big, 16);
  Frame big6 = PacketBuilder().ipv6("2001:db8::1", "2001:db8::2").udp(4002, 53)
                   .payload(std::string(600, '6')).build();
  auto r = fragFlood(6000, [&](int i) -> std::vector<Frame> {
    switch (i % 4) {
      case 0:  // overlap: a random fragment of one datagram, again and again
        return {big_frags[rng() % big_frags.size()]};
      case 1: {  // tiny first fragment of a TCP datagram (8 bytes of the TCP header)
        Frame dg = PacketBuilder().ipv4(randomV4(rng), "192.0.2.80")
                       .ipv4Id(static_cast<uint16_t>(rng())).tcp(1234, 80, kTcpSyn)
                       .payload(std::string(40, 't')).build();
        return {test::fragmentIpv4(dg, 8)[0]};
      }
      case 2: {  // IPv6: random ids, a random slice, often overlapping or never completed
        auto f6 = test::fragmentIpv6(big6, 64, rng() % 32);
        return {f6[rng() % f6.size()]};
      }
      default: {  // a whole small datagram in two fragments, reversed (completes)
        Frame dg = PacketBuilder().ipv4("10.9.1.1", "192.0.2.53")
                       .ipv4Id(static_cast<uint16_t>(10000 + i)).udp(4003, 53)
                       .payload(std::string(40, 'c')).build();
        auto f = test::fragmentIpv4(dg, 24);
        return {f[1], f[0]};
      }
    }
  });
  expectBoundedAndAccounted(r);
  // The never-completed IPv6 datagrams keep the 64-slot tracker full most of the time, so
  // many fragments of every kind meet "table full"; what finds a slot is judged by kind.
  EXPECT_GT(drops(r.during, DropReason::kFragOverlap), 500u);
  EXPECT_GT(drops(r.during, DropReason::kFragTiny), 0u);
  EXPECT_GT(drops(r.during, DropReason::kFragTableFull), 1000u);
  EXPECT_GT(r.forwarded, 64u + 200u);  // complete reversed datagrams still got through
}

// --- TCP stream: out-of-order flood against DPI ---
// Thousands of TCP flows inspected by DPI, each leaving a hole in its byte stream that is
// never filled, with retransmits and overlapping copies of the bytes beyond it, some far
// beyond, and a small pool of comparison windows. What must hold: nothing beyond a hole is
// held or inspected (every such segment is dropped as tcp_out_of_order, counted), the windows
// bound what is kept (directions with unacknowledged bytes beyond the pool follow the DPI
// fail policy, counted), memory does not grow with the flood, every packet gets one verdict
// and every drop a reason, in-order inspection keeps working while the pool is exhausted,
// and once the flows end the windows are back (later flows get one each).
constexpr uint32_t kWindows = 64, kFarAhead = 4096;

std::unique_ptr<rules::Snapshot> dpiSnapshot(rules::Policy dpi_fail, uint32_t reorder_bytes = 0,
                                             uint32_t reorder_buffers = 0) {
  rules::DpiModel m;
  m.enabled = true;
  m.sources.push_back({"t", R"(
rule evil { meta: action = "drop" strings: $a = "EVILPAYLOAD" condition: $a }
rule noisy { strings: $a = "xyzzy" condition: $a }
)"});
  m.streams_per_worker = 1024;
  rules::ConfigErrorList errs;
  auto c = rules::compileDpi(m, errs);
  EXPECT_TRUE(c.ok()) << c.status();
  auto s = std::make_unique<rules::Snapshot>();
  s->dataplane.flow_capacity = 8192;
  s->dataplane.aging_slice = 8192;
  s->dataplane.tcp_established_s = 30;
  s->dataplane.tcp_syn_s = 30;
  s->dataplane.tcp_windows_per_worker = kWindows;
  s->dataplane.tcp_dpi_fail = dpi_fail;
  s->dataplane.tcp_reorder_bytes = reorder_bytes;  // 0: segments beyond a hole are dropped
  if (reorder_buffers) s->dataplane.tcp_reorder_buffers_per_worker = reorder_buffers;
  if (c.ok()) s->dpi = *c;
  s->dpi_settings = m;
  s->dpi_settings.sources.clear();
  return s;
}

// TCP clients of server 192.0.2.80:80 on side A (the server answers on side B).
struct TcpClients {
  TcpClients(Driver& d, uint64_t& t) : d(d), t(t) {}
  void handshake(const std::string& cli, uint16_t sport, uint32_t isn) {
    d.send(0, PacketBuilder().ipv4(cli, srv).tcp(sport, 80, kTcpSyn, isn).build(), ++t);
    d.send(1, PacketBuilder().ipv4(srv, cli).tcp(80, sport, kTcpSyn | kTcpAck, 7000, isn + 1)
                  .build(), ++t);
    d.send(0, PacketBuilder().ipv4(cli, srv).tcp(sport, 80, kTcpAck, isn + 1, 7001).build(), ++t);
    // The worker polls side A's ring before side B's: without this the SYN+ACK would be
    // judged after the data that follows.
    d.flush();
  }
  void data(const std::string& cli, uint16_t sport, uint32_t seq, const std::string& p) {
    d.send(0, PacketBuilder().ipv4(cli, srv).tcp(sport, 80, kTcpAck, seq, 7001).payload(p).build(),
           ++t);
  }
  Driver& d;
  uint64_t& t;
  const std::string srv = "192.0.2.80";
};

class TcpOooFlood : public ::testing::TestWithParam<rules::Policy> {};

// (Without reorder buffers, dataplane.tcp.reorder_bytes 0: segments beyond a hole dropped.)
TEST_P(TcpOooFlood, HolesThatNeverFillHoldNothingAndAreAccounted) {
  const bool fail_closed = GetParam() == rules::Policy::kDrop;
  Harness h(dpiSnapshot(GetParam()));
  Driver d(h);
  uint64_t t = 1000000;
  TcpClients cl(d, t);
  // A session opened before the flood: it sends the drop pattern in order during it (its
  // bytes are acknowledged by nobody: it holds a window from its first segment on).
  cl.handshake("10.7.0.1", 5000, 100);
  cl.data("10.7.0.1", 5000, 101, "hello ");
  d.flush();

  // The flood: kFlows flows; flow i uses isn 1000 * i (wrapping), three shapes by i % 3:
  //   0: a hole of 200 bytes, then 100 bytes, their retransmit and an overlapping copy
  //      (other bytes) shifted by 50: all three beyond the hole;
  //   1: like 0, but an in-order segment first (inspected, kept in a window while one is
  //      free: never acknowledged), then the hole;
  //   2: a segment far beyond (kFarAhead), twice.
  const int kFlows = 3000;
  uint64_t ooo_packets = 0, in_order = 0, no_window = 0;
  uint32_t windows_left = kWindows - 1;  // the session holds one
  size_t dpdk_mid = 0, c_mid = 0;
  for (int i = 0; i < kFlows; ++i) {
    const std::string cli = "10.8." + std::to_string(i / 250) + "." + std::to_string(1 + i % 250);
    const uint16_t sport = static_cast<uint16_t>(20000 + i);
    const uint32_t isn = 1000u * static_cast<uint32_t>(i) + 0xfffff000u;  // some wrap past 2^32
    cl.handshake(cli, sport, isn);
    const uint32_t s0 = isn + 1;
    switch (i % 3) {
      case 0:
      case 1: {
        uint32_t base = s0;
        if (i % 3 == 1) {
          cl.data(cli, sport, s0, "in order xyzz");  // "xyzzy" only when the 'y' arrives
          base += 13;
          ++in_order;
          if (windows_left) {
            --windows_left;
          } else {
            ++no_window;
            if (fail_closed) base = s0;  // the segment was dropped: the hole starts at s0
          }
        }
        const std::string held(100, 'h');
        cl.data(cli, sport, base + 200, held);
        cl.data(cli, sport, base + 200, held);                    // retransmit
        cl.data(cli, sport, base + 250, std::string(100, 'o'));   // overlap, other bytes
        ooo_packets += 3;
        break;
      }
      default:
        cl.data(cli, sport, s0 + kFarAhead, "beyond the buffer");
        cl.data(cli, sport, s0 + kFarAhead, "beyond the buffer");
        ooo_packets += 2;
    }
    if (i == 500) {  // mid-flood, the window pool long exhausted: in-order inspection works
      cl.data("10.7.0.1", 5000, 107, "GET /EVIL");
      cl.data("10.7.0.1", 5000, 116, "PAYLOAD HTTP/1.1\r\n");
    }
    if (i == kFlows / 4) {
      d.flush();
      dpdk_mid = dpdkHeapBytes();
      c_mid = cHeapBytes();
    }
  }
  d.flush();
  const size_t dpdk_end = dpdkHeapBytes(), c_end = cHeapBytes();
  const auto c1 = h.counters();
  EXPECT_EQ(c1.flows_active, static_cast<uint64_t>(kFlows + 1));
  EXPECT_EQ(drops(c1, DropReason::kTcpOutOfOrder), ooo_packets);
  EXPECT_EQ(c1.tcp_stream[kTcpOutOfOrderSegments], ooo_packets);
  EXPECT_EQ(c1.tcp_stream[kTcpNoWindow], no_window);
  EXPECT_GT(no_window, 0u);
  EXPECT_EQ(drops(c1, DropReason::kTcpStreamExhausted), fail_closed ? no_window : 0u);
  EXPECT_EQ(c1.dpi_gaps, 0u);  // nothing out of order reaches DPI
  EXPECT_EQ(c1.dpi_no_stream, 0u);
  EXPECT_EQ(c1.dpi_drops, 1u);  // the session's EVILPAYLOAD, split over two in-order segments
  EXPECT_EQ(drops(c1, DropReason::kDpiDrop), 1u);
  EXPECT_EQ(dpdk_end, dpdk_mid);
  EXPECT_LT(c_end, c_mid + 64 * 1024);

  // The flows end (aged out past the established timeout): their windows go back to the
  // pool; new flows each get one again, and a hole is inspected once filled.
  t += 31 * 1000000;
  for (int i = 0; i < 64; ++i) {  // traffic to drive the aging
    d.send(0, PacketBuilder().arp(1, "192.0.2.1", "192.0.2.2").build(), ++t);
    if (i % 8 == 7) d.flush();
  }
  const auto c2 = h.counters();
  EXPECT_EQ(c2.flows_active, 0u);
  EXPECT_EQ(c2.flows_expired, static_cast<uint64_t>(kFlows + 1));
  for (int k = 0; k < static_cast<int>(kWindows); ++k) {  // every window is free again
    const std::string cli = "10.9.0." + std::to_string(1 + k);
    cl.handshake(cli, 6000, 50);
    cl.data(cli, 6000, 51 + 4, "PAYLOAD");   // beyond the hole: dropped
    cl.data(cli, 6000, 51, "EVIL");          // fills it (takes a window)
    cl.data(cli, 6000, 51 + 4, "PAYLOAD");   // retransmitted in order: EVILPAYLOAD
  }
  d.flush();
  const auto c3 = h.counters();
  EXPECT_EQ(c3.tcp_stream[kTcpNoWindow], no_window);
  EXPECT_EQ(drops(c3, DropReason::kTcpOutOfOrder), ooo_packets + kWindows);
  EXPECT_EQ(c3.dpi_drops, 1u + kWindows);
  EXPECT_EQ(drops(c3, DropReason::kDpiDrop), 1u + kWindows);

  // Every packet judged once, every drop under a reason, nothing held.
  EXPECT_EQ(d.verdicts, d.sent);
  EXPECT_EQ(d.forwarded + d.dropped, d.sent);
  EXPECT_EQ(d.out[0] + d.out[1], d.forwarded);
  EXPECT_EQ(c3.totalDrops(), d.dropped);
  EXPECT_EQ(c3.rx_packets[0] + c3.rx_packets[1], d.sent);
  EXPECT_EQ(rte_mempool_in_use_count(h.pool()), 0u);
}

// A flood of holes that never fill, with reorder buffers (the default mode): at most the
// pool's buffers are held (one per direction with a hole), the directions beyond it follow
// the DPI fail policy (fail open: forwarded unread, counted and evented; fail closed:
// dropped), memory does not grow, in-order inspection keeps working, and once the flows end
// the buffers are back: later flows keep bytes beyond a hole and find a match in them.
constexpr uint32_t kReorderBuffers = 32;

TEST_P(TcpOooFlood, HolesThatNeverFillHoldAtMostTheReorderPool) {
  const bool fail_closed = GetParam() == rules::Policy::kDrop;
  Harness h(dpiSnapshot(GetParam(), 4096, kReorderBuffers));
  Driver d(h);
  uint64_t t = 1000000;
  TcpClients cl(d, t);
  cl.handshake("10.7.0.1", 5000, 100);
  const int kFlows = 600;
  size_t dpdk_mid = 0, c_mid = 0;
  for (int i = 0; i < kFlows; ++i) {
    const std::string cli = "10.8." + std::to_string(i / 250) + "." + std::to_string(1 + i % 250);
    const uint16_t sport = static_cast<uint16_t>(20000 + i);
    const uint32_t isn = 1000u * static_cast<uint32_t>(i) + 0xfffff000u;
    cl.handshake(cli, sport, isn);
    cl.data(cli, sport, isn + 1 + 100, std::string(200, 'k'));  // beyond a 100-byte hole
    if (i == 300) {  // the pool long exhausted: in-order inspection works
      cl.data("10.7.0.1", 5000, 101, "GET /EVIL");
      cl.data("10.7.0.1", 5000, 110, "PAYLOAD HTTP/1.1\r\n");
    }
    if (i == kFlows / 4) {
      d.flush();
      dpdk_mid = dpdkHeapBytes();
      c_mid = cHeapBytes();
    }
  }
  d.flush();
  const uint64_t beyond = kFlows - kReorderBuffers;
  const auto c1 = h.counters();
  EXPECT_EQ(c1.tcp_stream[kTcpOutOfOrderSegments], uint64_t(kFlows));
  EXPECT_EQ(c1.tcp_stream[kTcpReorderKept], uint64_t(kReorderBuffers));
  EXPECT_EQ(c1.tcp_stream[kTcpReorderFull], beyond);
  EXPECT_EQ(c1.tcp_stream[kTcpReorderUnkept], fail_closed ? 0u : beyond);
  EXPECT_EQ(drops(c1, DropReason::kTcpStreamExhausted), fail_closed ? beyond : 0u);
  EXPECT_EQ(drops(c1, DropReason::kTcpOutOfOrder), 0u);
  EXPECT_EQ(c1.dpi_drops, 1u);  // the session's EVILPAYLOAD, in order
  EXPECT_EQ(dpdkHeapBytes(), dpdk_mid);
  EXPECT_LT(cHeapBytes(), c_mid + 64 * 1024);

  // The flows age out: every buffer is back. New flows keep bytes beyond a hole and the
  // match completed by the filler with them drops the filler.
  t += 31 * 1000000;
  for (int i = 0; i < 64; ++i) {
    d.send(0, PacketBuilder().arp(1, "192.0.2.1", "192.0.2.2").build(), ++t);
    if (i % 8 == 7) d.flush();
  }
  EXPECT_EQ(h.counters().flows_active, 0u);
  for (uint32_t k = 0; k < kReorderBuffers; ++k) {
    const std::string cli = "10.9.0." + std::to_string(1 + k);
    cl.handshake(cli, 6000, 50);
    cl.data(cli, 6000, 51 + 4, "PAYLOAD");  // beyond the hole: forwarded, kept
    cl.data(cli, 6000, 51, "EVIL");         // fills it: EVILPAYLOAD, dropped
  }
  d.flush();
  const auto c2 = h.counters();
  EXPECT_EQ(c2.tcp_stream[kTcpReorderKept], 2u * kReorderBuffers);
  EXPECT_EQ(c2.tcp_stream[kTcpReorderFull], beyond);
  EXPECT_EQ(c2.tcp_stream[kTcpReorderFilled], uint64_t(kReorderBuffers));
  EXPECT_EQ(c2.dpi_drops, 1u + kReorderBuffers);
  EXPECT_EQ(drops(c2, DropReason::kDpiDrop), 1u + kReorderBuffers);
  EXPECT_EQ(d.verdicts, d.sent);
  EXPECT_EQ(d.forwarded + d.dropped, d.sent);
  EXPECT_EQ(c2.totalDrops(), d.dropped);
  EXPECT_EQ(rte_mempool_in_use_count(h.pool()), 0u);
}

INSTANTIATE_TEST_SUITE_P(FailPolicies, TcpOooFlood,
                         ::testing::Values(rules::Policy::kForward, rules::Policy::kDrop),
                         [](const auto& info) {
                           return std::string(info.param == rules::Policy::kDrop ? "FailClosed"
                                                                                 : "FailOpen");
                         });

}  // namespace
}  // namespace dpu::dp
