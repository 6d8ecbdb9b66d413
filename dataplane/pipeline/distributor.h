// Software distribution, the worker side (distribute.h says which worker a packet belongs
// to): a service of the loop. A worker that polls an rx queue hashes each packet it receives
// to its worker, keeps its own and hands the others over through the target's inbound ring
// (rte_ring, multi-producer / single-consumer, bulk, no allocation); every worker judges
// what it is handed like what it receives. Per-flow order holds: one flow's packets of one
// direction come from one rx queue, are handed over in receive order to one ring, and leave
// through one tx queue or one tx ring.
#pragma once

#include <cstdint>
#include <memory>

#include "dataplane/pipeline/distribute.h"
#include "dataplane/pipeline/path_context.h"

namespace dpu::dp {

// Most workers software distribution serves (one staging array per target on the stack).
constexpr uint16_t kMaxDistributionWorkers = 64;

// Clock ticks (replay, packet-timestamp clock): an odd pointer value in an inbound ring
// carries the input's time (ns << 1 | 1; mbuf pointers are aligned).
inline rte_mbuf* clockTick(uint64_t ns) {
  return reinterpret_cast<rte_mbuf*>(static_cast<uintptr_t>((ns << 1) | 1));
}
inline bool isClockTick(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 1) != 0; }
inline uint64_t clockTickNs(const void* p) { return reinterpret_cast<uintptr_t>(p) >> 1; }

class Distributor {
 public:
  explicit Distributor(PathContext& cx);
  ~Distributor();  // frees the packets of an unfinished group
  void refresh() {
    dist_canon_ = cx_.state->dist_canon.empty() ? nullptr : &cx_.state->dist_canon;
  }
  // Stamps the input index of the n packets received (from *next_seq on), keeps this
  // worker's packets at the front of pkts (returns how many) and hands the others to their
  // worker's inbound ring (a full ring: dropped, reason worker_ring_full; lossless: waited
  // on, worker 0 sending the tx rings meanwhile).
  uint16_t handOff(rte_mbuf** pkts, uint16_t n, uint64_t* next_seq);
  // Worker 0: sends what the other workers put in the tx rings; returns the packets taken.
  uint32_t drainTxRings();
  // Replay (packet-timestamp clock): takes the inbound ring's packets group by group, a
  // group being what one burst of the distributor handed to this worker (ended by its
  // clock tick), and judges each group as one burst (judge(pkts, n)), so that this worker's
  // bursts are the distributor's bursts less the other workers' packets, whatever the
  // timing (burst composition decides e.g. how many packets of a new flow the firewall
  // classifies with its first). An unfinished group waits for its tick. Returns the
  // packets judged.
  template <class Judge>
  uint32_t pollInboundGroups(Judge&& judge);
  // The latest clock tick, which the worker's clock follows after the burst.
  uint64_t inputClock() const { return input_clock_; }

 private:
  void dropUndelivered(rte_mbuf* m);
  PathContext& cx_;
  rte_mbuf* group_[kBurst + 1];
  uint16_t group_n_ = 0;
  uint64_t input_clock_ = 0;
  // Per target worker: a burst's packets and a clock tick.
  static constexpr size_t kDistStride = kBurst + 1;
  std::unique_ptr<rte_mbuf*[]> dist_buf_;  // nworkers * kDistStride
  const DistributionCanon* dist_canon_ = nullptr;
  uint32_t dequeue(void** slot, unsigned n);
};

template <class Judge>
uint32_t Distributor::pollInboundGroups(Judge&& judge) {
  uint32_t total = 0;
  for (;;) {
    // A group holds at most kBurst packets and its tick: never dequeue past that.
    void** slot = reinterpret_cast<void**>(group_ + group_n_);
    unsigned got = dequeue(slot, kBurst + 1 - group_n_);
    if (got == 0) return total;
    const uint16_t end = static_cast<uint16_t>(group_n_ + got);
    uint16_t start = 0;
    for (uint16_t i = group_n_; i < end; ++i) {
      if (!isClockTick(group_[i])) continue;
      const uint16_t n = static_cast<uint16_t>(i - start);
      if (n) {
        cx_.c->dist_handed_in.addRelease(n);
        judge(group_ + start, n);
        total += n;
      }
      const uint64_t tick = clockTickNs(group_[i]);
      if (tick > input_clock_) input_clock_ = tick;
      start = static_cast<uint16_t>(i + 1);
    }
    // The unfinished group moves to the front and waits for the rest of it.
    group_n_ = static_cast<uint16_t>(end - start);
    for (uint16_t k = 0; k < group_n_; ++k) group_[k] = group_[start + k];
  }
}

}  // namespace dpu::dp
