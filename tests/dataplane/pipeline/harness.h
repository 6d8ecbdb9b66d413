// The packet-table harness: frames built in code are put on the rx ring of a net_ring port,
// the worker (one, driven by the test thread) polls, and the test reads verdicts, counters
// and the exact frames that come out of each side.
#pragma once

#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_ring.h>

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/api/dataplane.h"
#include "tests/util/packet_builder.h"

namespace dpu::dp {

using test::Frame;

class Recorder : public VerdictSink {
 public:
  void onVerdict(const PacketVerdict& v) override { verdicts.push_back(v); }
  std::vector<PacketVerdict> verdicts;
};

class Harness {
 public:
  // `extra`: stages the worker runs after the built-in ones (DataplaneOptions::extra_stages).
  explicit Harness(const rules::DataplaneSettings& settings, std::vector<StageSpec> extra = {})
      : Harness(
            [&] {
              auto s = std::make_unique<rules::Snapshot>();
              s->dataplane = settings;
              return s;
            }(),
            std::move(extra)) {}
  // With a whole snapshot (e.g. a firewall).
  explicit Harness(std::unique_ptr<rules::Snapshot> snap, std::vector<StageSpec> extra = {}) {
    static int instance = 0;
    ++instance;
    std::string tag = std::to_string(instance);
    for (int s = 0; s < 2; ++s) {
      std::string side = s == 0 ? "a" : "b";
      rx_[s] = rte_ring_create(("rx" + side + tag).c_str(), 4096, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
      tx_[s] = rte_ring_create(("tx" + side + tag).c_str(), 4096, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
      int p = rte_eth_from_rings(("net_ring_" + side + tag).c_str(), &rx_[s], 1, &tx_[s], 1, 0);
      EXPECT_GE(p, 0);
      port_[s] = static_cast<uint16_t>(p);
    }
    int off = -1;
    uint64_t flag = 0;
    EXPECT_EQ(rte_mbuf_dyn_rx_timestamp_register(&off, &flag), 0);
    ts_off_ = off;
    ts_flag_ = flag;
    pool_ = rte_pktmbuf_pool_create(("tpool" + tag).c_str(), 4095, 0, 0, 4096, 0);
    EXPECT_NE(pool_, nullptr);
    DataplaneOptions o;
    o.port_a = port_[0];
    o.port_b = port_[1];
    o.workers = 1;
    o.clock = ClockMode::kPacketTimestamp;
    o.mbufs = 1023;
    o.rx_desc = 64;
    o.tx_desc = 64;
    o.extra_stages = std::move(extra);
    auto d = Dataplane::create(o, std::move(snap));
    EXPECT_TRUE(d.ok()) << d.status();
    if (d.ok()) dp_ = std::move(*d);
    dp_->worker(0).setVerdictSink(&rec_);
    dp_->attachCaller(0);
  }
  ~Harness() {
    dp_->detachCaller(0);
    // Frames the worker made itself (rejects) come from the dataplane's pool: free them first.
    for (int s = 0; s < 2; ++s) drain(s);
    dp_.reset();
    for (int s = 0; s < 2; ++s) {
      drain(s);
      rte_ring_free(rx_[s]);
      rte_ring_free(tx_[s]);
    }
    rte_mempool_free(pool_);
  }

  // Queues `f` as received on side s at time ts_us (microseconds).
  void send(int s, const Frame& f, uint64_t ts_us = 1000000) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool_);
    ASSERT_NE(m, nullptr);
    char* p = rte_pktmbuf_append(m, static_cast<uint16_t>(f.size()));
    ASSERT_NE(p, nullptr);
    memcpy(p, f.data(), f.size());
    *RTE_MBUF_DYNFIELD(m, ts_off_, uint64_t*) = ts_us;
    m->ol_flags |= ts_flag_;
    ASSERT_EQ(rte_ring_sp_enqueue(rx_[s], m), 0);
  }
  void poll() {
    while (rte_ring_count(rx_[0]) || rte_ring_count(rx_[1])) dp_->worker(0).pollOnce();
  }
  // Frames that left side s, in order.
  std::vector<Frame> out(int s) { return drain(s); }
  CountersSnapshot::Flat counters() { return dp_->counters().total; }
  Dataplane& dp() { return *dp_; }
  // The pool send() takes frames from (held fragments stay allocated from it).
  rte_mempool* pool() { return pool_; }
  std::vector<PacketVerdict>& verdicts() { return rec_.verdicts; }

 private:
  std::vector<Frame> drain(int s) {
    std::vector<Frame> r;
    void* obj;
    while (rte_ring_sc_dequeue(tx_[s], &obj) == 0) {
      rte_mbuf* m = static_cast<rte_mbuf*>(obj);
      const uint8_t* d = rte_pktmbuf_mtod(m, const uint8_t*);
      r.emplace_back(d, d + m->data_len);
      rte_pktmbuf_free(m);
    }
    return r;
  }
  rte_ring* rx_[2];
  rte_ring* tx_[2];
  uint16_t port_[2];
  int ts_off_ = -1;
  uint64_t ts_flag_ = 0;
  rte_mempool* pool_ = nullptr;
  Recorder rec_;
  std::unique_ptr<Dataplane> dp_;
};

}  // namespace dpu::dp
