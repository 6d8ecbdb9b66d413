// One worker: run-to-completion packet path for one rx queue on each side, as a loop over a
// list of stages (docs/architecture.md): receive -> parse (+ fragments) -> flow (+ the
// firewall's verdicts) -> the stages in order (stream, DNS, DPI, LB, ...) -> verdict ->
// transmit. The loop owns the flow table and the per-burst scratch; every feature's state
// is in its stage (dataplane/stages/), what they share is the PathContext.
//
// Ownership: a Worker and everything in it is touched only by the lcore running it, except
// the counters, which other lcores read (see counters.h). The current Snapshot is read
// through the Dataplane's published pointer (acquire load once per loop); the worker reports
// a quiescent state to rte_rcu_qsbr after every loop so the control side can free old
// snapshots.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "dataplane/flow/flow_table.h"
#include "dataplane/pipeline/path_context.h"
#include "dataplane/pipeline/stage.h"

namespace dpu::dp {

class Distributor;
class FirewallStage;
class FragStage;

// Most stages a worker runs (the built-in ones and the extra ones of DataplaneOptions).
constexpr uint16_t kMaxStages = 16;

class Worker {
 public:
  // Creates the flow table and the stages sized from `settings` (start-time sizes); `extra`
  // stages (tests, extensions) run after the built-in ones, in their order.
  static absl::StatusOr<std::unique_ptr<Worker>> create(
      const WorkerOptions& opts, const WorkerShared& shared,
      const rules::DataplaneSettings& settings, WorkerCounters* counters, rte_ring* events,
      const std::vector<StageSpec>* extra = nullptr);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // The lcore main loop: polls until *shared.stop. Returns 0.
  int run();
  // One iteration: rx from both sides, process, tx, aging. Returns packets received. In
  // merge_by_timestamp mode, returns 0 only when both inputs are exhausted.
  uint32_t pollOnce();
  // Judges a burst of received packets (mbuf->port says the side) at time now (kTsc) or at
  // each packet's timestamp (kPacketTimestamp), queueing the output for tx.
  void processBurst(rte_mbuf** pkts, uint16_t n);
  // Sends what processBurst queued.
  void flushTx() { cx_.flushTx(); }
  // Software distribution, worker 0: sends what the other workers put in the tx rings.
  // Returns the packets taken from the rings.
  uint32_t drainTxRings();
  // Software distribution: packets waiting in this worker's inbound ring.
  uint32_t inboundCount() const;
  // End of input: forgets fragment datagrams, examining up to `budget` slots; fragments
  // still waiting for their first fragment are dropped (reason fragment_first_missing).
  // Returns true when none is left. Call repeatedly, draining events in between.
  bool drainFragments(uint32_t budget);
  // Shutdown: ends flows (flow-end events, reason shutdown), examining up to `budget`
  // slots. Returns true when none is left. The flows_active counter keeps its value.
  bool endFlows(uint32_t budget);

  void setVerdictSink(VerdictSink* s) { cx_.sink = s; }
  // Control requests (flow dumps, captures; mailbox.h), serviced between bursts. Set once
  // before the worker runs; the Dataplane owns the mailbox.
  void attachMailbox(WorkerMailbox* m) { cx_.mbox = m; }
  // Replay (merge_by_timestamp): pollOnce takes no input packet whose index (seq) is
  // `seq` or more; it returns 0 once it reaches it. UINT64_MAX = no limit.
  void setInputLimit(uint64_t seq) { input_limit_ = seq; }
  uint16_t id() const { return cx_.opts.id; }
  const FlowTable& flows() const { return *flows_; }
  uint64_t nowNs() const { return cx_.now_ns; }
  // The stage of that name (PathStage::name), or nullptr.
  const PathStage* stage(std::string_view name) const;

 private:
  Worker();
  void refreshSnapshot();
  // Parse, non-IP / malformed policies, fragments (FragStage). Queues packet i for the
  // flow step when it needs one. True when the packet ends the segment (a fragment).
  bool classify(rte_mbuf** pkts, uint16_t i);
  // The flow table for the packets classify() queued (one bulk lookup), the firewall for
  // the flows that need a verdict (one classification for the segment).
  void flowStep(rte_mbuf** pkts);
  // The verdict of packet i acted on (fragments, the holder, reject, tx or drop).
  void finish(rte_mbuf* m, uint16_t i);
  // Every flow removal: the flow-end event (with the stages' verdicts), then the stages'
  // flowEnded in reverse order.
  void endFlow(int32_t pos, const FlowEntry& e, const FlowKey& k, uint64_t now,
               FlowEndReason why);
  void serviceFlowDump();  // one bounded slice of a pending flow dump (mailbox.cc)
  void age();
  struct AgingClock {
    uint64_t last_ns = 0;
    uint64_t credit = 0;
  };
  uint32_t agingBudget(AgingClock& c, uint32_t capacity);
  uint32_t pollMerged(rte_mbuf** out);
  void publishLoopCycles(uint64_t loop_start, uint64_t loop_end, bool busy);
  void recordLatency(uint64_t cycles, uint64_t packets);

  PathContext cx_;
  std::unique_ptr<Burst> burst_;  // per-burst scratch, allocated once (not zeroed per burst)
  std::unique_ptr<FlowTable> flows_;
  std::unique_ptr<uint8_t[]> closed_;  // cx_.closed
  // The stages in order; the firewall and the fragments are called by the loop's own steps.
  std::vector<std::unique_ptr<PathStage>> stages_;
  FirewallStage* fw_ = nullptr;
  std::unique_ptr<FragStage> frag_;
  std::unique_ptr<Distributor> dist_;
  PathStage* active_[kMaxStages];  // this loop's per-segment stages (refresh() true), in order
  uint16_t nactive_ = 0;

  FlowTimeouts timeouts_;
  uint64_t min_timeout_ns_ = 0;  // the shortest of timeouts_ (flowStep's stale check)
  uint32_t aging_slice_ = 64;
  AgingClock flow_aging_;
  AgingClock frag_aging_;
  uint64_t next_seq_ = 0;
  uint64_t input_limit_ = UINT64_MAX;
  bool seq_given_ = false;  // the packets being judged carry their input index already
  // Replay merge: packets read ahead from each side.
  rte_mbuf* ahead_[2][kBurst];
  uint16_t ahead_head_[2] = {0, 0};
  uint16_t ahead_n_[2] = {0, 0};
  bool exhausted_[2] = {false, false};
};

}  // namespace dpu::dp
