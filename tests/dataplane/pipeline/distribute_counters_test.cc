// Software distribution's hand-over counters under live traffic: worker 0 polling a net_ring
// port and handing the other worker's flows over its inbound ring, worker 1 on its own
// thread, while a reader thread takes counter snapshots all along (as GetStats, the metrics
// endpoint and the hitless integration test do). In every snapshot the packets handed in
// must not exceed the packets handed off: integration_hitless_2workers once saw "handed off
// 722940 vs handed in 723032", because a packet was counted off only after its enqueue (the
// target could dequeue and count it in first) and the snapshot read worker 0's counters
// before worker 1's (worker 1 went on counting in meanwhile). Once the traffic has drained,
// off equals in exactly (a packet the full ring refused is not counted off), and every packet
// fed has one verdict. Before the fix: 51, 67 and 92 such snapshots in three runs of 3 s.
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dataplane/api/dataplane.h"
#include "tests/util/packet_builder.h"

namespace dpu::dp {
namespace {

constexpr uint32_t kFlows = 512;
// How long the traffic runs (not a deadline: the checks are on counts).
constexpr auto kFeedFor = std::chrono::seconds(3);
constexpr unsigned kFeedBurst = 4;

test::Frame frameOf(uint32_t j) {
  return test::PacketBuilder()
      .ipv4(absl::StrCat("10.2.", j / 256, ".", j % 256), "192.0.2.9")
      .udp(static_cast<uint16_t>(7000 + j % 11), 53)
      .payload("handover")
      .build();
}

TEST(DistributeCounters, NoSnapshotShowsMoreHandedInThanHandedOff) {
  rte_ring* rx[2];
  rte_ring* tx[2];
  uint16_t port[2];
  for (int s = 0; s < 2; ++s) {
    std::string side = s == 0 ? "a" : "b";
    rx[s] = rte_ring_create(("dc_rx" + side).c_str(), 4096, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
    tx[s] = rte_ring_create(("dc_tx" + side).c_str(), 4096, 0, 0);
    ASSERT_NE(rx[s], nullptr);
    ASSERT_NE(tx[s], nullptr);
    int p = rte_eth_from_rings(("net_ring_dc" + side).c_str(), &rx[s], 1, &tx[s], 1, 0);
    ASSERT_GE(p, 0);
    port[s] = static_cast<uint16_t>(p);
  }
  rte_mempool* feed_pool = rte_pktmbuf_pool_create("dc_feed", 8191, 256, 0, 2048, 0);
  ASSERT_NE(feed_pool, nullptr);

  auto snap = std::make_unique<rules::Snapshot>();
  snap->dataplane.flow_capacity = 4096;
  DataplaneOptions o;
  o.port_a = port[0];
  o.port_b = port[1];
  o.workers = 2;  // net_ring has no RSS: software distribution
  o.clock = ClockMode::kTsc;
  o.mbufs = 4095;
  o.rx_desc = 64;
  o.tx_desc = 64;
  auto plane_or = Dataplane::create(o, std::move(snap));
  ASSERT_TRUE(plane_or.ok()) << plane_or.status();
  std::unique_ptr<Dataplane> plane = std::move(*plane_or);
  ASSERT_NE(plane->distributionSummary().find("software"), std::string::npos)
      << plane->distributionSummary();

  // Worker 1 on its own thread; worker 0 driven by the feeder (it polls the port and hands
  // worker 1's flows over); a reader thread takes snapshots all along. Three threads on this
  // VM's two cores: with a fourth spinning, each hand-over waited for a time slice.
  std::thread worker1([&plane] { plane->worker(1).run(); });

  std::vector<test::Frame> frames;
  for (uint32_t j = 0; j < kFlows; ++j) frames.push_back(frameOf(j));
  uint64_t fed = 0, out_b = 0;
  auto drainB = [&] {
    void* got[64];
    unsigned k = rte_ring_dequeue_burst(tx[1], got, 64, nullptr);
    rte_pktmbuf_free_bulk(reinterpret_cast<rte_mbuf**>(got), k);
    out_b += k;
    return k;
  };
  auto judged = [&] {
    auto t = plane->counters().total;
    uint64_t v = 0;
    for (uint64_t x : t.verdicts) v += x;
    return v;
  };

  std::atomic<bool> reading{true};
  uint64_t snapshots = 0, violations = 0, with_handover = 0;
  uint64_t first_in = 0, first_off = 0;
  std::thread reader([&] {
    while (reading.load(std::memory_order_relaxed)) {
      CountersSnapshot s = plane->counters();
      ++snapshots;
      if (s.total.dist_handed_in > 0) ++with_handover;
      if (s.total.dist_handed_in > s.total.dist_handed_off && violations++ == 0) {
        first_in = s.total.dist_handed_in;
        first_off = s.total.dist_handed_off;
      }
    }
  });

  std::thread feeder([&] {
    plane->attachCaller(0);
    rte_mbuf* m[kFeedBurst];
    const auto until = std::chrono::steady_clock::now() + kFeedFor;
    while (std::chrono::steady_clock::now() < until) {
      drainB();
      if (rte_pktmbuf_alloc_bulk(feed_pool, m, kFeedBurst) != 0) {
        plane->worker(0).pollOnce();  // what it still holds goes out
        continue;
      }
      for (unsigned i = 0; i < kFeedBurst; ++i) {
        const test::Frame& f = frames[(fed + i) % kFlows];
        std::memcpy(rte_pktmbuf_append(m[i], static_cast<uint16_t>(f.size())), f.data(),
                    f.size());
      }
      unsigned put = rte_ring_enqueue_burst(rx[0], reinterpret_cast<void**>(m), kFeedBurst, nullptr);
      rte_pktmbuf_free_bulk(m + put, kFeedBurst - put);
      fed += put;
      plane->worker(0).pollOnce();
    }
    // Everything fed judged (a verdict each: forwarded, or dropped with a reason); worker 0
    // keeps sending what worker 1 forwards.
    while (judged() < fed) {
      plane->worker(0).pollOnce();
      drainB();
    }
    for (int i = 0; i < 64; ++i) plane->worker(0).pollOnce();
    while (drainB() != 0) {
    }
    plane->detachCaller(0);
  });
  feeder.join();
  reading.store(false);
  reader.join();
  plane->stop();
  worker1.join();

  CountersSnapshot end = plane->counters();
  const uint64_t ring_full = end.total.drops[static_cast<int>(DropReason::kWorkerRingFull)];
  const uint64_t fwd = end.total.verdicts[static_cast<int>(Verdict::kForward)];
  std::printf("distribute_counters: %llu packets (%llu handed over, %llu found the ring full), "
              "%llu snapshots (%llu with hand-overs), %llu with more handed in than off\n",
              static_cast<unsigned long long>(fed),
              static_cast<unsigned long long>(end.total.dist_handed_in),
              static_cast<unsigned long long>(ring_full),
              static_cast<unsigned long long>(snapshots),
              static_cast<unsigned long long>(with_handover),
              static_cast<unsigned long long>(violations));
  EXPECT_EQ(violations, 0u) << "first: handed in " << first_in << " vs handed off " << first_off;
  EXPECT_GT(with_handover, 0u) << "no snapshot saw a packet handed over: the test tested nothing";

  EXPECT_EQ(judged(), fed);
  EXPECT_EQ(end.total.dist_handed_off, end.total.dist_handed_in);
  // Half the flows are worker 1's: handed over, or refused by its full ring (live mode drops).
  EXPECT_GT(end.total.dist_handed_in + ring_full, fed / 4) << "the flows should spread";
  ASSERT_EQ(end.per_worker.size(), 2u);
  EXPECT_EQ(end.per_worker[1].dist_handed_in, end.total.dist_handed_in);
  // A packet the inbound ring refused is counted as such, not as handed off.
  EXPECT_EQ(fwd + ring_full, fed);

  plane.reset();
  while (drainB() != 0) {
  }
  void* got[64];
  while (unsigned k = rte_ring_dequeue_burst(tx[0], got, 64, nullptr)) {
    rte_pktmbuf_free_bulk(reinterpret_cast<rte_mbuf**>(got), k);
  }
}

}  // namespace
}  // namespace dpu::dp
