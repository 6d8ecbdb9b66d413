// One worker: run-to-completion packet path for one rx queue on each side.
//
// Ownership: a Worker and everything in it (flow table, fragment tracker, tx buffers,
// counters) is touched only by the lcore running it, except the counters, which other
// lcores read (see counters.h). The current Snapshot is read through the Dataplane's
// published pointer (acquire load once per burst); the worker reports a quiescent state
// to rte_rcu_qsbr after every loop so the control side can free old snapshots.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "dataplane/api/events.h"
#include "dataplane/flow/flow_table.h"
#include "dataplane/frag/frag_tracker.h"
#include "dataplane/normalize/datagram.h"
#include "dataplane/normalize/http.h"  // --- http ---
#include "dataplane/pipeline/file_extract.h"
#include "dataplane/normalize/tcp_stream.h"
#include "dataplane/packet/packet_meta.h"
#include "dataplane/packet/tunnel_config.h"
#include "dataplane/pipeline/counters.h"
#include "dataplane/pipeline/mailbox.h"
#include "dataplane/pipeline/published_state.h"
#include "dataplane/pipeline/verdict.h"
#include "dataplane/stages/dpi_stage.h"
#include "dataplane/stages/dns_stage.h"  // DNS filtering
#include "rules/compiled/snapshot.h"

struct rte_mbuf;
struct rte_ring;
struct rte_mempool;
struct rte_rcu_qsbr;

namespace dpu::dp {

constexpr uint16_t kBurst = 32;
// Most workers software distribution serves (one staging array per target on the stack).
constexpr uint16_t kMaxDistributionWorkers = 64;

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
  FileExtractor* extract = nullptr;  // --- http --- replay --extract-files (file_extract.h)
};

class Worker {
 public:
  // Creates the per-worker tables sized from `settings` (start-time sizes).
  static absl::StatusOr<std::unique_ptr<Worker>> create(const WorkerOptions& opts,
                                                        const WorkerShared& shared,
                                                        const rules::DataplaneSettings& settings,
                                                        WorkerCounters* counters,
                                                        rte_ring* events);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // The lcore main loop: polls until *shared.stop. Returns 0.
  int run();
  // One iteration: rx from both sides, process, tx, aging. Returns packets received. In
  // merge_by_timestamp mode, returns 0 only when both inputs are exhausted.
  uint32_t pollOnce();
  // Judges a burst of received packets (mbuf->port says the side) at time now_ns (kTsc)
  // or at each packet's timestamp (kPacketTimestamp), queueing the output for tx.
  void processBurst(rte_mbuf** pkts, uint16_t n);
  // Sends what processBurst queued.
  void flushTx();
  // Software distribution, worker 0: sends what the other workers put in the tx rings.
  // Returns the packets taken from the rings.
  uint32_t drainTxRings();
  // Software distribution: packets waiting in this worker's inbound ring.
  uint32_t inboundCount() const;
  // Clock ticks (replay, packet-timestamp clock): an odd pointer value in an inbound ring
  // carries the input's time (ns << 1 | 1; mbuf pointers are aligned).
  static rte_mbuf* clockTick(uint64_t ns) {
    return reinterpret_cast<rte_mbuf*>(static_cast<uintptr_t>((ns << 1) | 1));
  }
  static bool isClockTick(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 1) != 0; }
  static uint64_t clockTickNs(const void* p) { return reinterpret_cast<uintptr_t>(p) >> 1; }
  // End of input: forgets fragment datagrams, examining up to `budget` slots; fragments
  // still waiting for their first fragment are dropped (reason fragment_first_missing).
  // Returns true when none is left. Call repeatedly, draining events in between.
  bool drainFragments(uint32_t budget);
  // Shutdown: ends flows (flow-end events, reason shutdown), examining up to `budget`
  // slots. Returns true when none is left. The flows_active counter keeps its value.
  bool endFlows(uint32_t budget);

  void setVerdictSink(VerdictSink* s) { sink_ = s; }
  // Control requests (flow dumps, captures; mailbox.h), serviced between bursts. Set once
  // before the worker runs; the Dataplane owns the mailbox.
  void attachMailbox(WorkerMailbox* m) { mbox_ = m; }
  // Replay (merge_by_timestamp): pollOnce takes no input packet whose index (seq) is
  // `seq` or more; it returns 0 once it reaches it. UINT64_MAX = no limit.
  void setInputLimit(uint64_t seq) { input_limit_ = seq; }
  uint16_t id() const { return opts_.id; }
  const FlowTable& flows() const { return *flows_; }
  uint64_t nowNs() const { return now_ns_; }

 private:
  Worker() = default;
  struct Burst;
  bool classify(rte_mbuf** pkts, uint16_t i, Burst& b);
  void flowStage(rte_mbuf** pkts, Burst& b);
  void finish(rte_mbuf* m, uint16_t i, Burst& b);
  void dropHeldFragment(void* pkt, uint64_t now, bool reassembled = false);
  // Fragments (pipeline.cc: judged by their first fragment; frag_path.cc: reassembled for
  // inspection, dataplane/normalize/datagram.h). True when packet i is done with in
  // classify (verdict set or held), false when it goes on to the flow stage.
  bool firstFragmentMode(FragAction a, int32_t slot, rte_mbuf* m, uint16_t i, Burst& b);
  bool reasmFragment(rte_mbuf** pkts, uint16_t i, Burst& b, int32_t slot);
  bool reasmJudge(rte_mbuf* m, uint16_t i, Burst& b, int32_t slot);
  bool reasmExhausted(rte_mbuf* m, uint16_t i, Burst& b, int32_t slot, DropReason why);
  void reasmDrop(uint16_t i, Burst& b, int32_t slot, DropReason why);
  void finishDatagram(rte_mbuf* m, uint16_t i, Burst& b);
  void followFragment(rte_mbuf* hm, int32_t slot, const PacketVerdict& first, uint64_t now);
  uint8_t sideOf(const rte_mbuf* m) const;
  void refreshSnapshot();
  // --- flows view / capture --- (mailbox.cc) one bounded slice of a pending flow dump;
  // the copy of a judged packet into the capture ring when it matches the armed filter.
  void serviceFlowDump();
  void capturePacket(const rte_mbuf* m, const PacketVerdict& v, uint8_t in_side);
  WorkerMailbox* mbox_ = nullptr;
  bool cap_on_ = false;  // a capture is armed (read once per loop)
  // Firewall (pipeline.cc): queue a flow / an untracked packet for classification in this
  // segment, classify the queue and apply the verdicts, keep a cached verdict across a
  // generation change, count a rule hit, send the reject responses.
  void fwQueueFlow(uint8_t i, int32_t pos, const FlowEntry& e, const Burst& b);
  void fwQueueUntracked(uint8_t i, const Burst& b);
  void fwForget(int32_t pos);
  void fwClassify(rte_mbuf** pkts, Burst& b);
  void fwRestamp(int32_t pos, FlowEntry& e);
  void fwLookupCountries(const rules::FwQuery& q, char src[2], char dst[2]);
  void countRuleHit(uint32_t rule, uint8_t stage, uint32_t bytes, uint64_t t) {
    if (stage != static_cast<uint8_t>(Stage::kFirewall) || rule >= fw_nrules_) return;
    RuleHit& h = hits_[rule];
    h.packets.add();
    h.bytes.add(bytes);
    if (t > h.last_hit_ns.load()) h.last_hit_ns.set(t);
  }
  // `dpi`: the reject is a DPI reset (its RSTs are counted in dpi_rst_sent, not fw_rst_sent).
  void sendReject(rte_mbuf* m, const PacketMeta& pm, uint8_t in_side, bool dpi = false);
  // Rule stages after the firewall (rule_stages.cc), per packet still forwarded, in
  // DESIGN.md order: DNS -> DPI -> LB. Packets [from, to) of the current segment.
  void ruleStages(rte_mbuf** pkts, Burst& b, uint16_t from, uint16_t to);
  // Called before every flow removal (aging, stale, reused, shutdown): the rule stages
  // release their per-flow state of flow position `pos`.
  void flowEnded(int32_t pos);
  // --- dpi --- (dpi_path.cc) the DPI stage for packet i; a flow's streams at its end.
  void dpiStage(rte_mbuf* m, Burst& b, uint16_t i);
  void dpiFlowEnded(int32_t pos);
  // Acts on what packet i made DPI find: counts, alert events, the strongest action.
  void dpiAct(const DpiOutcome& o, Burst& b, uint16_t i, int32_t pos,
              const HttpEventInfo* file = nullptr);  // --- http --- file: alerts name it
  void dpiCount(const DpiOutcome& o);                       // scan counters
  void dpiCountRules(const DpiOutcome& o, uint64_t hit_ns);  // by action and per rule
  // One alert event per fired rule (plus one for a gap under gap_policy ALERT), each a copy
  // of `who` (time, side, flow, addresses) with the rule, stage dpi and `verdict`.
  void dpiAlertEvents(const DpiOutcome& o, bool gap_alert, Verdict verdict, const Event& who,
                      const HttpEventInfo* file = nullptr);
  // --- http --- rules a file made true when no packet carried its end (the flow ended):
  // counted and alerted about the flow (HTTP slot identity). `held`: the flow has a packet
  // held back; a drop or reset rule then drops it: returns 1 + that rule (alerts carry
  // verdict drop), else 0 (nothing left to drop).
  uint32_t dpiFileEndAlerts(const DpiOutcome& o, const HttpEventInfo& file, bool held);
  // A flow direction's identity for an event raised at the flow's end: its flow id, the side
  // its bytes came from, its sender as source.
  void dpiFlowDirection(const FlowEntry& e, const FlowKey& k, int dir, Event& who) const;
  // The flow-end event of a flow DPI blocked: its verdict (drop, or reject for a reset rule),
  // stage dpi and the rule (none for a gap under gap_policy DROP).
  void dpiFlowEndVerdict(int32_t pos, Event& ev) const;
  // --- http --- (http_path.cc) HTTP of TCP packet i's new stream bytes `p[0, n)` (stream
  // direction `sd`): parsed, bodies scanned as files, verdicts applied. False when the packet
  // got a drop verdict (the stream scan is skipped).
  bool httpStage(rte_mbuf* m, Burst& b, uint16_t i, int32_t pos, const uint8_t* p, uint32_t n);
  void httpFlowEnded(int32_t pos);
  // The server's in-order FIN of packet i (HttpInspector::fin): a response delimited by the
  // close ends there, its verdict acts on this packet.
  void httpFin(rte_mbuf* m, Burst& b, uint16_t i, int32_t pos);
  void httpEvent(EventType type, const HttpEventInfo& info, const HttpFlowIdent& id, uint64_t ts);
  void httpCounters();
  // A fail-open pass (dpi_fail FORWARD) of packet i of an HTTP flow: an `uninspected`
  // event with reason `why` (no HTTP slot, no hold slot).
  void httpUninspected(const Burst& b, uint16_t i, DropReason why);
  // An alert on a file: the file, and the flow's identity when no packet gave it (flow end).
  void httpAlertInfo(Event& ev, const HttpEventInfo& file) const;
  friend struct HttpPathSink;
  // --- http --- hold-back (http_path.cc; docs/http.md "Verdicts"). A pool of hold slots per
  // worker (dpi.http.hold_slots_per_worker of the configuration at start), each one packet
  // held with its verdict; per flow position and direction (pos * 2 + dir) the slot holding
  // its packet (kNoHold: none); the slots in use in a list, oldest first (the timeout).
  struct HoldSlot {
    rte_mbuf* m = nullptr;
    PacketVerdict v;
    uint64_t deadline = 0;
    uint32_t seq_lo = 0, seq_hi = 0;  // TCP sequence range of its payload
    uint32_t key = 0;                 // pos * 2 + dir
    uint16_t prev = 0, next = 0;
  };
  static constexpr uint16_t kNoHold = 0xffff;
  // dpi_block_ of a flow blocked because no hold slot was free under dpi_fail DROP.
  static constexpr uint32_t kHoldBlock = 0xfffffffeu;
  void holdInit(uint32_t slots);
  // In finish(), for a TCP packet of a tracked flow: releases or drops the direction's held
  // packet as packet i decides, holds packet i when the HTTP stage asked for it. True when
  // packet i was taken (held: its verdict is applied when it leaves the hold).
  bool holdFinish(rte_mbuf* m, uint16_t i, Burst& b);
  void holdUnlink(uint16_t h);
  void holdRelease(uint16_t h, int counter);  // forwarded, counted under `counter`
  // Dropped with the flow's block (dpi_block_), its drop event at time `at`.
  void holdDrop(uint16_t h, uint32_t block, uint64_t at);
  void holdExpire(uint64_t now);              // held past their deadline: released
  // The flow's held packets: dropped (block != 0) at time `at`, else released.
  void holdFlowEnded(int32_t pos, uint32_t block, uint64_t at);
  std::unique_ptr<HoldSlot[]> holds_;
  std::unique_ptr<uint16_t[]> hold_free_;
  std::unique_ptr<uint16_t[]> hold_of_;
  uint32_t hold_nfree_ = 0;
  uint32_t held_n_ = 0;
  uint16_t hold_head_ = kNoHold, hold_tail_ = kNoHold;
  uint32_t hold_end_block_ = 0;  // set by dpiFileEndAlerts while a flow's files end
  // Queues a packet the worker built (reject, answer, reset) for tx out of `out_side`,
  // stamped with `like`'s capture time so pcap outputs keep time order.
  void queueGenerated(rte_mbuf* r, uint8_t out_side, const rte_mbuf* like);
  void applyVerdict(rte_mbuf* m, const PacketVerdict& v, uint8_t in_side);
  // --- tcp stream --- (stream_path.cc) TCP normalization read by the inspecting stages
  // (DNS over TCP, DPI): per flow position and direction (pos * 2 + dir) a TcpStreamDir, per
  // worker the pool of comparison windows. For each TCP segment of a flow a stage inspects,
  // streamStage verifies the checksum and runs the engine before any stage: a segment the
  // engine refuses is dropped (stage flow, reason tcp_*); one it accepts carries its new
  // in-order bytes in Burst::st_* - the only bytes the stages read of it.
  void streamInit(const rules::DataplaneSettings& s);
  void streamStage(rte_mbuf* m, Burst& b, uint16_t i, const rules::CompiledDns* dns);
  void streamFlowEnded(int32_t pos);
  // A fail_open pass of a stream that could not be checked: an event (verdict forward).
  void streamEvent(const Burst& b, uint16_t i, DropReason why);
  std::unique_ptr<TcpStreamDir[]> tcp_dirs_;
  std::unique_ptr<TcpStreamPool> tcp_pool_;
  // --- DNS filtering (dns_path.cc) ---
  // Allocates the per-flow TCP stream state (sized to the flow table, once at create).
  void dnsInit();
  // The UDP DNS messages of packets [from, to): questions parsed and names looked up as one
  // burst (dns_burst_), read back by dnsUdp.
  void dnsPrepare(rte_mbuf** pkts, Burst& b, uint16_t from, uint16_t to,
                  const rules::CompiledDns& dns);
  // Judges packet i (UDP / TCP to or from a DNS port) and sets its verdict when it blocks.
  void dnsStage(rte_mbuf* m, uint16_t i, Burst& b, const rules::CompiledDns& dns);
  void dnsUdp(rte_mbuf* m, uint16_t i, Burst& b, const rules::CompiledDns& dns);
  void dnsTcp(rte_mbuf* m, uint16_t i, Burst& b, const rules::CompiledDns& dns);
  // Counts a decision, emits its block event; true when the message is blocked.
  bool dnsAccount(const DnsDecision& d, const rules::CompiledDns& dns,
                  const PacketMeta& pm, uint8_t in_side, uint64_t t);
  // Sends `payload` (a DNS message over UDP, stream bytes over TCP) as a frame built from
  // packet `m` as described by `pm` (its sequence numbers may be adjusted); `syn`: a TCP
  // SYN-ACK instead of PSH|ACK. False (counted) when no mbuf or no room.
  bool dnsSend(rte_mbuf* m, const PacketMeta& pm, uint8_t in_side, bool onward,
               const uint8_t* payload, uint32_t len, bool fin, bool syn = false);
  void dnsReleaseFlow(int32_t pos);
  Event* newEvent();         // from the event pool, zeroed; nullptr (counted) when empty
  void postEvent(Event* ev);  // to this worker's ring; lost (counted) when full
  void emitDrop(const PacketMeta* meta, const PacketVerdict& v, uint64_t now);
  // The packet's addresses, ports, protocol (when it has an IP layer) and outer VLAN, into `ev`.
  static void eventPacket(Event& ev, const PacketMeta& pm);
  // A new `uninspected` event for packet i of b (stage, reason, forward verdict, side, seq,
  // time, generation), or nullptr when the event ring is full; the caller adds the packet's
  // fields and posts it.
  Event* uninspectedEvent(const Burst& b, uint16_t i, Stage stage, DropReason why);
  void emitFlowEnd(int32_t pos, const FlowEntry& e, const FlowKey& k, uint64_t now,
                   FlowEndReason why);
  // Why the flow being ended ends: set by emitFlowEnd, which every flow removal calls just
  // before flowEnded (DPI's alerts at a stream's end carry it).
  FlowEndReason flow_end_why_ = FlowEndReason::kTimeout;
  void releaseFragments(int32_t slot, const PacketVerdict& first, uint64_t now);
  uint64_t packetTime(rte_mbuf* m) const;
  // The flow id events and verdicts carry (worker + 1 in the high half, creation number).
  uint64_t flowId(const FlowEntry& e) const {
    return (static_cast<uint64_t>(opts_.id + 1) << 32) | e.flow_seq;
  }
  void age();
  struct AgingClock {
    uint64_t last_ns = 0;
    uint64_t credit = 0;
  };
  uint32_t agingBudget(AgingClock& c, uint32_t capacity);
  void ageFragments(uint64_t expire_at, uint32_t budget);
  uint32_t pollMerged(rte_mbuf** out);
  // Software distribution (distribute.cc): stamps the input index of the n packets received,
  // keeps this worker's packets at the front of pkts (returns how many) and hands the others
  // to their worker's inbound ring (a full ring: dropped, reason worker_ring_full; lossless:
  // waited on).
  uint16_t handOff(rte_mbuf** pkts, uint16_t n);
  void dropUndelivered(rte_mbuf* m);
  // Clock ticks: see isClockTick; input_clock_ is the latest tick, which the worker's clock
  // follows after the burst.
  // Replay (packet-timestamp clock): takes the inbound ring's packets group by group, a
  // group being what one burst of the distributor handed to this worker (ended by its
  // clock tick), and judges each group as one burst, so that this worker's bursts are
  // the distributor's bursts less the other workers' packets, whatever the timing (burst
  // composition decides e.g. how many packets of a new flow the firewall classifies with
  // its first). An unfinished group waits in group_ for its tick. Returns the packets judged.
  uint32_t pollInboundGroups();
  rte_mbuf* group_[kBurst + 1];
  uint16_t group_n_ = 0;
  uint64_t input_clock_ = 0;
  // Per target worker: a burst's packets and a clock tick.
  static constexpr size_t kDistStride = kBurst + 1;
  std::unique_ptr<rte_mbuf*[]> dist_buf_;  // nworkers * kDistStride
  const DistributionCanon* dist_canon_ = nullptr;  // state_'s (refreshSnapshot)
  bool seq_given_ = false;  // the packets being judged carry their input index already

  WorkerOptions opts_;
  WorkerShared shared_;
  WorkerCounters* c_ = nullptr;
  rte_ring* events_ = nullptr;
  VerdictSink* sink_ = nullptr;
  std::unique_ptr<Burst> burst_;  // per-burst scratch, allocated once (not zeroed per burst)
  std::unique_ptr<FlowTable> flows_;
  std::unique_ptr<DatagramReassembler> dgram_;  // before frags_: frags_ gives buffers back
  std::unique_ptr<FragTracker> frags_;
  bool reasm_on_ = false;  // DNS or DPI configured: fragmented datagrams are reassembled
  bool lb_quiet_ = false;  // the LB stage runs on a reassembled datagram: fragments count

  const PublishedState* state_ = nullptr;
  const rules::Snapshot* snap_ = nullptr;
  uint32_t generation_ = 0;
  // Firewall view of state_ (refreshed with it).
  const FirewallTables* fw_ = nullptr;
  const rules::CompiledFirewall* fwc_ = nullptr;
  const GeoIpDb* geo_ = nullptr;
  RuleHit* hits_ = nullptr;
  uint32_t fw_nrules_ = 0;
  uint32_t fw_since_ = 0;
  bool fw_active_ = false;
  bool fw_reevaluate_ = true;
  bool fw_countries_ = false;
  // Uid (PublishedState::rule_uid) of the rule behind each flow's cached firewall verdict,
  // by flow position: finds the rule again in a new rule set for flows that keep their
  // verdict (keep established). Touched only when a flow is (re)classified.
  std::unique_ptr<uint32_t[]> flow_uid_;
  // Firewall scratch for one burst segment (a member, so bursts without firewall work do
  // not pay for initializing it).
  struct FwBurst {
    rules::FwQuery q[kBurst];
    const rules::FwQuery* qp[kBurst];
    int64_t rule[kBurst];
    int32_t pos[kBurst];      // flow position; -1: untracked packet or flow gone meanwhile
    bool is_flow[kBurst];
    uint8_t pkt[kBurst];      // packets judged by the queue, and their query
    uint8_t pkt_q[kBurst];
    uint32_t n = 0, npkt = 0;
  } fwb_;
  // --- dpi --- per flow position and direction (pos * 2 + dir), allocated at create; the
  // runtime of the current state (null: no DPI).
  std::unique_ptr<DpiDir[]> dpi_dirs_;
  std::unique_ptr<uint32_t[]> dpi_block_;  // per flow: 0, or 1 + rule that blocked it
  const DpiRuntime* dpi_rt_ = nullptr;
  DpiRuleHit* dpi_hits_ = nullptr;  // this worker's per-rule match counters (rule index)
  // --- http --- per flow position (allocated at create); the runtime of the current state
  // (null: no HTTP inspection).
  std::unique_ptr<HttpFlow[]> http_flows_;
  const HttpRuntime* http_rt_ = nullptr;
  const HttpFlowIdent* http_ident_ = nullptr;  // the flow whose end is being handled
  // --- DNS filtering ---
  // Per-flow DNS-over-TCP stream state, by flow position: [2 * pos] client -> server bytes
  // (its state 3 = the connection closed by us), [2 * pos + 1] server -> client (cloaking);
  // and per-worker pools (allocated at create) of buffers for messages split across
  // segments: query heads (kDnsHeadBytes) and whole responses (kDnsRespBytes).
  // The bytes come in order, once, from the TCP stream engine (tcp_dirs_).
  struct DnsTcpFlow {
    uint16_t msg_left;   // bytes of the current message still to pass (head judged)
    uint16_t head_have;  // bytes of length prefix + message buffered in head_slot
    uint8_t state;       // 0 none, 1 read, 2 not read (mid-stream / no buffer), 3 closed by us
    uint8_t head_slot;   // 1 + index into dns_heads_ (client -> server) or dns_resps_
                         // (server -> client), 0 = none
  };
  void dnsTcpRelease(DnsTcpFlow& f, bool resp);  // gives its buffer back
  // A response of msg_len bytes that cannot be reassembled (`why`): the malformed policy;
  // forward skips it (false), drop sets malformed_drop (true: stop reading the segment).
  bool dnsTcpUnread(DnsTcpFlow& f, uint32_t msg_len, DnsCounter why,
                    const rules::CompiledDns& dns, bool& malformed_drop);
  static constexpr uint32_t kDnsHeadBytes = 2 + 300;  // length + header + question (<= 271)
  static constexpr uint32_t kDnsHeadSlots = 255;  // none free: dataplane.tcp.dns_fail
  // A response split across segments is reassembled whole (length + message) to be read for
  // CNAME cloaking; a longer one (dns_tcp_response_overflow) or one that finds no free
  // buffer (dns_tcp_no_buffer) is handled by the dns.malformed policy.
  static constexpr uint32_t kDnsRespBytes = 2 + 4094;
  static constexpr uint32_t kDnsRespSlots = 64;
  std::unique_ptr<DnsTcpFlow[]> dns_tcp_;
  std::unique_ptr<uint8_t[]> dns_heads_;      // kDnsHeadSlots * kDnsHeadBytes
  uint8_t dns_free_heads_[kDnsHeadSlots];
  uint32_t dns_nfree_heads_ = 0;
  std::unique_ptr<uint8_t[]> dns_resps_;      // kDnsRespSlots * kDnsRespBytes
  uint8_t dns_free_resps_[kDnsRespSlots];
  uint32_t dns_nfree_resps_ = 0;
  std::unique_ptr<DnsBurstScratch<kBurst>> dns_burst_;
  std::unique_ptr<DnsScratch> dns_scratch_;
  std::unique_ptr<uint8_t[]> dns_buf_;        // answers and TCP stream payloads (8 KB)
  FlowTimeouts timeouts_;
  uint64_t min_timeout_ns_ = 0;  // the shortest of timeouts_ (flowStage's stale check)
  TunnelParseConfig tun_;  // dataplane.tunnels of the current snapshot (parsePacket)
  uint32_t aging_slice_ = 64;

  AgingClock flow_aging_;
  AgingClock frag_aging_;
  // --- perf --- cycles by CycleBucket in the current loop (published once per loop), and
  // forwarded packets queued for tx so far (latency samples per rx burst).
  uint64_t cy_[kCyCount] = {};
  uint64_t tx_queued_ = 0;
  void publishLoopCycles(uint64_t loop_start, uint64_t loop_end, bool busy);
  void recordLatency(uint64_t cycles, uint64_t packets);
  uint64_t tsc_hz_ = 0;
  uint64_t now_ns_ = 0;
  uint64_t next_seq_ = 0;
  uint64_t input_limit_ = UINT64_MAX;
  uint32_t flow_seq_ = 0;

  static constexpr uint16_t kTxCap = 4 * kBurst;
  rte_mbuf* tx_[2][kTxCap];
  uint16_t ntx_[2] = {0, 0};

  // --- lb --- (lb_path.cc) Load balancer: per-flow pinned backend (by flow position),
  // per-backend counters in a fixed open-addressing table keyed by backend identity (one
  // writer: this worker; other lcores read), the compiled LB of the current snapshot.
 public:
  static constexpr uint32_t kLbCounterSlots = 8192;  // power of two
  static constexpr uint16_t kLbNoCounter = 0xffff;
  struct LbBackendCounters {
    Counter identity;  // 0 = free slot
    Counter packets, bytes, flows_active, flows_total;
  };
  // Counters of this worker (kLbCounterSlots entries); read by other lcores.
  const LbBackendCounters* lbCounters() const { return lb_ctr_.get(); }

 private:
  // One cache line per flow (48 bytes of fields, aligned to 64): a 48-byte stride put half
  // the records across two lines, and flowStage prefetched both for every packet.
  struct alignas(64) LbFlow {
    enum Kind : uint8_t { kNone = 0, kBalanced, kReverse, kNotBalanced, kReset };
    uint64_t svc = 0;       // service identity
    uint64_t backend = 0;   // backend identity
    uint16_t svc_idx = 0;   // hints: positions in the current snapshot
    uint16_t be_idx = 0;
    uint16_t ctr = kLbNoCounter;
    uint8_t kind = kNone;
    uint16_t vport = 0;     // NAT: the VIP's port (host order)
    uint8_t answer_dir = 1; // NAT reverse entry: direction of the backend's answers
    int32_t peer = -1;      // NAT: the other entry of the pair
    uint8_t vip[16] = {0};  // NAT: the VIP's address
  };
  static_assert(sizeof(LbFlow) == 64, "LbFlow is one cache line");
  void lbInit();
  void lbRefresh(const rules::Snapshot* s);
  void lbStage(rte_mbuf* m, Burst& b, uint16_t i);
  void flowEndedLb(int32_t pos);
  uint16_t lbCounterSlot(uint64_t identity);
  void lbPin(LbFlow& f, const rules::CompiledLbService& svc, uint32_t svc_idx, uint32_t be);
  void lbUnpin(LbFlow& f);
  void lbDrop(Burst& b, uint16_t i, DropReason r);
  int lbChoose(const rules::CompiledLbService& svc, const rules::LbPacket& p, Burst& b,
               uint16_t i);
  void lbCount(uint16_t ctr, uint32_t bytes);
  bool lbForward(rte_mbuf* m, Burst& b, uint16_t i, const rules::CompiledLbService& svc,
                 const rules::CompiledLbBackend& be);
  bool lbForwardRewrite(rte_mbuf* m, Burst& b, uint16_t i, const rules::CompiledLbService& svc,
                        const rules::CompiledLbBackend& be);
  void lbReverseEntry(int32_t pos, Burst& b, uint16_t i, const rules::CompiledLbBackend& be);
  // IP fragments: what a datagram's first fragment got, by fragment-tracker slot, so that
  // its later fragments (judged in the burst or released from the hold) go to the same
  // backend with the same rewrite. A copy of the rewrite, not a reference into the
  // snapshot: a config change in mid-datagram does not split the datagram.
  struct LbFragRewrite {
    enum Kind : uint8_t { kNone = 0, kForward, kReverse };
    uint8_t kind = kNone;
    uint8_t mode = 0;        // rules::LbMode (kForward)
    bool has_mac = false;
    uint8_t mac[6] = {0};
    uint16_t port = 0;       // NAT: backend port (kForward) / VIP port (kReverse); 0 = keep
    uint16_t ctr = kLbNoCounter;
    uint16_t be_idx = kNoBackend;
    uint16_t svc_idx = kNoLbService;  // the verdict's lb_service
    uint8_t addr[16] = {0};  // NAT: backend address / VIP (kReverse); IPIP: outer dst
    uint8_t tun[16] = {0};   // IPIP: outer src
  };
  DropReason lbMakeRewrite(const rules::CompiledLbService& svc,
                           const rules::CompiledLbBackend& be, bool v4, LbFragRewrite& r);
  DropReason lbApply(rte_mbuf* m, const PacketMeta& pm, const LbFragRewrite& r);
  // A later fragment (or a repeated first one) of datagram `slot` whose verdict is forward:
  // the first fragment's rewrite. False: dropped (v set to the drop).
  bool lbFollowFragment(rte_mbuf* m, const PacketMeta& pm, int32_t slot, PacketVerdict& v);
  std::unique_ptr<LbFragRewrite[]> lb_frag_;  // frags_->capacity() entries
  const rules::CompiledLb* lbc_ = nullptr;
  // Set once a snapshot with a service was seen: until then no flow has LB state and the
  // stage is skipped (its per-flow array is not touched).
  bool lb_seen_ = false;
  // The current snapshot has a service. A flow created while it has none is flagged
  // kFlowNoLb by the flow stage (its entry is written then anyway): its packets went out
  // unbalanced, so a service added later must not take it over mid-connection.
  bool lb_active_ = false;
  std::unique_ptr<LbFlow[]> lb_flow_;
  std::unique_ptr<LbBackendCounters[]> lb_ctr_;
  // --- end lb ---

  // Replay merge: packets read ahead from each side.
  rte_mbuf* ahead_[2][kBurst];
  uint16_t ahead_head_[2] = {0, 0};
  uint16_t ahead_n_[2] = {0, 0};
  bool exhausted_[2] = {false, false};
};

}  // namespace dpu::dp
