// What the stages of a worker share: the narrow context the loop hands them (docs/
// architecture.md). One per worker, touched only by its lcore (the counters are read by
// other lcores, see counters.h). It holds the burst being judged, the time, the snapshot of
// this loop, and the services every stage uses: events, verdicts, generated packets (rejects,
// answers), transmit. Stage state is not here: each stage owns its own (stage.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include <rte_mbuf_core.h>
#include <rte_mbuf_dyn.h>

#include "dataplane/api/events.h"
#include "dataplane/flow/flow_table.h"
#include "dataplane/packet/packet_meta.h"
#include "dataplane/packet/tunnel_config.h"
#include "dataplane/pipeline/burst.h"
#include "dataplane/pipeline/counters.h"
#include "dataplane/pipeline/mailbox.h"
#include "dataplane/pipeline/published_state.h"
#include "dataplane/pipeline/verdict.h"

struct rte_ring;
struct rte_mempool;
struct rte_rcu_qsbr;

namespace dpu::dp {

class FileExtractor;
class PathStage;

// Receives every packet's verdict (replay --verdicts, tests). Called on the worker lcore,
// possibly out of input order (fragments held for their first fragment are judged later).
class VerdictSink {
 public:
  virtual ~VerdictSink() = default;
  virtual void onVerdict(const PacketVerdict& v) = 0;
};

enum class ClockMode : uint8_t {
  kTsc,              // live: time from the TSC
  kPacketTimestamp,  // replay: time from the pcap timestamp of each packet (deterministic)
};

// Idle polling (WorkerOptions::idle_sleep_max_us): empty loops before the first sleep, and
// the first sleep.
constexpr uint32_t kIdleLoopsBeforeSleep = 64;
constexpr uint32_t kIdleFirstSleepUs = 16;

struct WorkerOptions {
  uint16_t id = 0;
  uint16_t port[2] = {0, 1};   // port id of side A and side B
  uint16_t queue = 0;          // rx and tx queue index on both ports
  ClockMode clock = ClockMode::kTsc;
  bool merge_by_timestamp = false;  // replay: interleave the two sides in timestamp order
  // Software distribution (distribute.h; set by the Dataplane, nworkers > 1): the worker
  // polls rx queue `queue` of side s only when poll_rx[s] (the port has that queue), hashes
  // what it receives and hands other workers' packets to their inbound ring; it sends on tx
  // queue `queue` of side s when tx_direct[s], else through the side's tx ring, which worker 0
  // sends on queue 0. `lossless` (replay): a full ring is waited on instead of dropping.
  uint16_t nworkers = 1;
  bool software_distribution = false;
  bool poll_rx[2] = {true, true};
  bool tx_direct[2] = {true, true};
  bool lossless = false;
  // Idle polling (run --poll idle): after kIdleLoopsBeforeSleep loops that found nothing, the
  // worker goes RCU-offline and sleeps, 16 us at first, doubling up to this many microseconds
  // while nothing comes; the first frame (or handed-in packet) ends it. 0 = busy polling (the
  // default: the lowest latency, one core per worker at 100%).
  uint32_t idle_sleep_max_us = 0;
};

// Shared, read-mostly context every worker gets from the Dataplane.
struct WorkerShared {
  const std::atomic<const PublishedState*>* state = nullptr;
  rte_rcu_qsbr* qsbr = nullptr;
  rte_mempool* event_pool = nullptr;
  rte_mempool* pkt_pool = nullptr;  // mbufs for packets the worker sends itself (rejects)
  int seq_dynfield = -1;        // mbuf dynfield offset holding the packet's input index
  int ts_dynfield = -1;         // rx timestamp dynfield (microseconds from net_pcap), or -1
  uint64_t ts_dynflag = 0;
  std::atomic<bool>* stop = nullptr;
  // Software distribution: each worker's inbound ring (nworkers entries; multi-producer,
  // single-consumer), and per side the tx ring of the workers without a tx queue of their
  // own (nullptr when every worker has one).
  rte_ring* const* inbound = nullptr;
  rte_ring* tx_ring[2] = {nullptr, nullptr};
  FileExtractor* extract = nullptr;  // replay --extract-files (stages/dpi/file_extract.h)
};

// Per flow position: stages that stopped reading a flow's stream (PathContext::closed).
enum FlowClosed : uint8_t {
  kClosedByDns = 1,  // DNS closed the connection (it answered a blocked query over TCP)
  kClosedByDpi = 2,  // DPI blocked the flow
};

class PathContext {
 public:
  // Fixed at create.
  WorkerOptions opts;
  WorkerShared shared;
  WorkerCounters* c = nullptr;
  rte_ring* events = nullptr;
  FlowTable* flows = nullptr;
  VerdictSink* sink = nullptr;
  WorkerMailbox* mbox = nullptr;
  uint64_t tsc_hz = 0;
  Burst* burst = nullptr;                 // the burst being judged (owned by the Worker)
  uint8_t* closed = nullptr;              // per flow position: FlowClosed bits
  uint32_t frag_slots = 0;                // datagrams the fragment tracker holds (slots)
  const std::vector<std::unique_ptr<PathStage>>* stages = nullptr;  // the worker's, in order
  // Per loop: the snapshot (Worker::refreshSnapshot), then what the stages' refresh
  // asks of the loop (reset before they run) ---
  const PublishedState* state = nullptr;
  const rules::Snapshot* snap = nullptr;
  uint32_t generation = 0;
  TunnelParseConfig tun;                  // dataplane.tunnels (parsePacket)
  bool cap_on = false;                    // a capture is armed
  bool reassemble = false;                // a stage reads payloads: datagrams reassembled
  uint8_t new_flow_flags = 0;             // OR-ed into the flags of every flow created
  bool follow_fragments = false;          // a stage's followFragment acts on fragments
  // A per-flow record a stage reads for every packet of a flow (one cache line at
  // base + pos * stride): prefetched by the flow step with the flow entry. Null: none.
  const uint8_t* prefetch_base = nullptr;
  uint32_t prefetch_stride = 0;
  // Time and loop bookkeeping.
  uint64_t now_ns = 0;
  uint64_t cy[kCyCount] = {};             // cycles by CycleBucket in the current loop
  uint64_t tx_queued = 0;                 // forwarded packets queued for tx so far
  uint32_t flow_seq = 0;                  // creation number of the last flow created
  // Why the flow being ended ends: set by the loop before the stages' flowEnded.
  FlowEndReason flow_end_why = FlowEndReason::kTimeout;
  // Packets held back with their verdict by a stage (the holder; at most one): how many it
  // holds and its earliest deadline (UINT64_MAX: none). The loop calls the holder's
  // finishPacket for a packet it flagged (Burst::kHoldWanted) or while it holds any, and
  // its expireHeld when the deadline passes.
  PathStage* holder = nullptr;
  uint32_t held = 0;
  uint64_t hold_deadline = UINT64_MAX;
  // The TCP holder (the stream stage in hold mode, dataplane.tcp.hold_out_of_order): the
  // loop calls its finishPacket for a packet it flagged (Burst::kHoldTcpKeep /
  // kHoldTcpAccepted) before the holder's, its expireHeld when its deadline passes.
  PathStage* tcp_holder = nullptr;
  uint32_t tcp_held = 0;
  uint64_t tcp_hold_deadline = UINT64_MAX;

  // Services.
  Event* newEvent();          // from the event pool, zeroed; nullptr (counted) when empty
  void postEvent(Event* ev);  // to this worker's ring; lost (counted) when full
  void emitDrop(const PacketMeta* meta, const PacketVerdict& v, uint64_t now);
  // The packet's addresses, ports, protocol (when it has an IP layer) and outer VLAN, into `ev`.
  static void eventPacket(Event& ev, const PacketMeta& pm);
  // A new `uninspected` event for packet i of the burst (stage, reason, forward verdict, side,
  // seq, time, generation), or nullptr when the event ring is full; the caller adds the
  // packet's fields and posts it.
  Event* uninspectedEvent(uint16_t i, Stage stage, DropReason why);
  // Answers a rejected packet out of its ingress port: a TCP RST to the sender (and, for a
  // segment of a connection, one to the receiver out of the other port), else an ICMP /
  // ICMPv6 unreachable. `dpi`: its RSTs are counted in dpi_rst_sent, not fw_rst_sent.
  void sendReject(rte_mbuf* m, const PacketMeta& pm, uint8_t in_side, bool dpi = false);
  // Queues a packet the worker built (reject, answer, reset) for tx out of `out_side`,
  // stamped with `like`'s capture time so pcap outputs keep time order.
  void queueGenerated(rte_mbuf* r, uint8_t out_side, const rte_mbuf* like);
  // Forwards (queued for tx) or drops the packet, counts the verdict, reports it (capture,
  // verdict sink).
  void applyVerdict(rte_mbuf* m, const PacketVerdict& v, uint8_t in_side);
  void flushTx();
  uint8_t sideOf(const rte_mbuf* m) const {
    return m->port == opts.port[kSideB] && opts.port[kSideA] != opts.port[kSideB] ? kSideB
                                                                                  : kSideA;
  }
  // The packet's time: its capture time (replay's packet-timestamp clock), else now_ns.
  uint64_t packetTime(const rte_mbuf* m) const {
    if (opts.clock == ClockMode::kPacketTimestamp && shared.ts_dynfield >= 0 &&
        (m->ol_flags & shared.ts_dynflag)) {
      uint64_t us = *RTE_MBUF_DYNFIELD(m, shared.ts_dynfield, const uint64_t*);
      // Captures can carry absurd times (a negative tv_sec read as unsigned): clamp to 2^63
      // ns (year 2262) so times never wrap and "now = UINT64_MAX" drains still end everything.
      constexpr uint64_t kMaxUs = (1ull << 63) / 1000;
      return (us > kMaxUs ? kMaxUs : us) * 1000ull;
    }
    return now_ns;
  }
  // The input index stamped in the mbuf (0 without the dynfield).
  uint64_t seqOf(const rte_mbuf* m) const {
    return shared.seq_dynfield >= 0 ? *RTE_MBUF_DYNFIELD(m, shared.seq_dynfield, const uint64_t*)
                                    : 0;
  }
  // The flow id events and verdicts carry (worker + 1 in the high half, creation number).
  uint64_t flowId(const FlowEntry& e) const {
    return (static_cast<uint64_t>(opts.id + 1) << 32) | e.flow_seq;
  }

  static constexpr uint16_t kTxCap = 4 * kBurst;
  rte_mbuf* tx[2][kTxCap];
  uint16_t ntx[2] = {0, 0};

 private:
  void capturePacket(const rte_mbuf* m, const PacketVerdict& v, uint8_t in_side);
};

}  // namespace dpu::dp
