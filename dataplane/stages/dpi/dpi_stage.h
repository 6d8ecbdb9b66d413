// DPI as a stage (docs/dpi.md, docs/http.md): the TCP/UDP payload of each forwarded packet to
// the flow direction's Hyperscan stream (dpi_runtime.h), HTTP flows parsed by libhtp
// (dataplane/normalize/http.h) with their bodies scanned as files (dpi_http.cc), and the
// rules that fire acted upon: alert (event), drop (packet dropped, flow blocked), reset (TCP
// RST both ways, flow blocked). A blocked flow's later packets are dropped here too. TCP
// bytes of tracked flows come from the stream stage: in order, once, checksum-verified.
//
// The stage is the loop's holder (PathContext::holder): while a file is open and a drop /
// reset rule can only be decided at its end, the last packet that carried new bytes of the
// file's direction is held back (docs/http.md "Verdicts").
#pragma once

#include <cstdint>
#include <memory>

#include "dataplane/normalize/http.h"
#include "dataplane/pipeline/stage.h"
#include "dataplane/stages/dpi/dpi_runtime.h"

namespace dpu::dp {

struct HttpPathSink;

class DpiStage final : public PathStage {
 public:
  // `hold_slots`: dpi.http.hold_slots_per_worker of the configuration at start (a later
  // change of the size takes effect at the next start, like the other per-worker pools).
  DpiStage(PathContext& cx, uint32_t hold_slots);
  ~DpiStage() override;  // packets still held back are freed
  static absl::StatusOr<std::unique_ptr<PathStage>> make(PathContext& cx,
                                                         const rules::DataplaneSettings& s);

  static bool explain(const ExplainInput& in, ExplainResult& r);  // explain.h

  bool refresh() override;  // true while DPI has rules
  void run(uint16_t from, uint16_t to) override;
  void flowEnded(int32_t pos) override;
  void flowVerdict(int32_t pos, Event& ev) const override;
  bool finishPacket(rte_mbuf* m, uint16_t i) override;  // the hold-back
  void expireHeld(uint64_t now) override;

 private:
  friend struct HttpPathSink;
  // dpi_block_ of a flow blocked because no hold slot was free under dpi_fail DROP.
  static constexpr uint32_t kHoldBlock = 0xfffffffeu;
  // --- signatures --- blocked because no body buffer was free under dpi_fail DROP.
  static constexpr uint32_t kSigBodyBlock = 0xfffffffdu;
  static constexpr uint16_t kNoHold = 0xffff;

  void packet(rte_mbuf* m, Burst& b, uint16_t i);
  // Acts on what packet i made DPI find: counts, alert events, the strongest action.
  void dpiAct(const DpiOutcome& o, Burst& b, uint16_t i, int32_t pos,
              const HttpEventInfo* file = nullptr);  // file: alerts name it
  void dpiCount(const DpiOutcome& o);                       // scan counters
  // An event's identity from packet i (time, side, flow, addresses), type and rule unset.
  Event packetWho(const Burst& b, uint16_t i) const;
  void dpiCountRules(const DpiOutcome& o, uint64_t hit_ns);  // by action and per rule
  // One alert event per fired rule (plus one for a gap under gap_policy ALERT), each a copy
  // of `who` (time, side, flow, addresses) with the rule, stage dpi and `verdict`.
  void dpiAlertEvents(const DpiOutcome& o, bool gap_alert, Verdict verdict, const Event& who,
                      const HttpEventInfo* file = nullptr);
  // One alert event: a copy of `who` with `rule` (a YARA rule, kSigRuleBit | signature, or
  // kNoRule), `reason`, `verdict` and the file it matched in; false when the event ring is
  // full (counted as lost by the ring).
  bool postAlert(const Event& who, uint32_t rule, DropReason reason, Verdict verdict,
                 const HttpEventInfo* file = nullptr);
  // Rules a file made true when no packet carried its end (the flow ended): counted and
  // alerted about the flow (HTTP slot identity). `held`: the flow has a packet held back; a
  // drop or reset rule then drops it: returns 1 + that rule (alerts carry verdict drop),
  // else 0 (nothing left to drop).
  uint32_t dpiFileEndAlerts(const DpiOutcome& o, const HttpEventInfo& file, bool held);
  // A flow direction's identity for an event raised at the flow's end: its flow id, the side
  // its bytes came from, its sender as source.
  void dpiFlowDirection(const FlowEntry& e, const FlowKey& k, int dir, Event& who) const;
  // --- signatures --- Suricata-format rules on packet i's payload `p[0, n)` (TCP: its new
  // in-order stream bytes), after the YARA rules; acted upon like them (alert events, drop,
  // reject; pass: no more signature inspection of the flow).
  void sigInspect(Burst& b, uint16_t i, int32_t pos, const uint8_t* p, uint32_t n);
  // An inspection `in` (its stage and buffers set) of packet i: the packet's addresses, flow
  // and time added, evaluated, acted upon. HTTP transactions' header buffers come this way
  // (dpi_http.cc) when sigWantsHeaders().
  void sigRun(Burst& b, uint16_t i, int32_t pos, rules::SigInput& in);
  bool sigWantsHeaders() const;
  void block(int32_t pos, uint32_t how) {  // dpi_block_ and the stream stage's closed bit
    dpi_block_[pos] = how;
    cx_.closed[pos] |= kClosedByDpi;
  }
  // A TCP reset verdict (RST to both ends, sendReject): the connection is over at both ends, so
  // its tracked state is closed. Its late packets stay blocked; a new SYN on the same 5-tuple
  // is port reuse (a new flow, inspected afresh) and the entry ends after tcp_closed_s, instead
  // of the 5-tuple staying blocked for as long as retried SYNs keep the old flow alive.
  void resetBlock(int32_t pos, uint32_t how, Verdict verdict) {
    block(pos, how);
    if (verdict == Verdict::kReject) flows_->entry(pos).tcp_state = TcpState::kClosed;
  }

  // HTTP (dpi_http.cc): HTTP of TCP packet i's new stream bytes `p[0, n)`: parsed,
  // bodies scanned as files, verdicts applied. False when the packet got a drop verdict (the
  // stream scan is skipped).
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

  // Hold-back (dpi_http.cc): a pool of hold slots, each one packet held with its
  // verdict; per flow position and direction (pos * 2 + dir) the slot holding its packet
  // (kNoHold: none); the slots in use in a list, oldest first (the timeout).
  struct HoldSlot {
    rte_mbuf* m = nullptr;
    PacketVerdict v;
    uint64_t deadline = 0;
    uint32_t seq_lo = 0, seq_hi = 0;  // TCP sequence range of its payload
    uint32_t key = 0;                 // pos * 2 + dir
    uint16_t prev = 0, next = 0;
  };
  void holdInit(uint32_t slots);
  void holdUnlink(uint16_t h);
  void holdRelease(uint16_t h, int counter);  // forwarded, counted under `counter`
  // Dropped with the flow's block (dpi_block_), its drop event at time `at`.
  void holdDrop(uint16_t h, uint32_t block, uint64_t at);
  // The flow's held packets: dropped (block != 0) at time `at`, else released.
  void holdFlowEnded(int32_t pos, uint32_t block, uint64_t at);
  void holdPublish() {  // the loop's view: how many, the earliest deadline
    cx_.held = held_n_;
    cx_.hold_deadline = hold_head_ != kNoHold ? holds_[hold_head_].deadline : UINT64_MAX;
  }

  WorkerCounters* const c_;
  FlowTable* const flows_;
  // Per flow position and direction (pos * 2 + dir); per flow: 0, or 1 + rule that blocked
  // it (kNoRule: a gap; kHoldBlock).
  std::unique_ptr<DpiDir[]> dpi_dirs_;
  std::unique_ptr<uint32_t[]> dpi_block_;
  const DpiRuntime* dpi_rt_ = nullptr;  // the current state's (null: no DPI)
  DpiRuleHit* dpi_hits_ = nullptr;      // this worker's per-rule match counters
  std::unique_ptr<HttpFlow[]> http_flows_;  // per flow position
  std::unique_ptr<rules::SigFlowState[]> sig_flows_;  // per flow position: flowbits
  std::unique_ptr<uint8_t[]> sig_pass_;              // per flow position: a pass rule matched
  rules::SigHit sig_hits_[64];
  const HttpRuntime* http_rt_ = nullptr;    // null: no HTTP inspection
  const HttpFlowIdent* http_ident_ = nullptr;  // the flow whose end is being handled
  std::unique_ptr<HoldSlot[]> holds_;
  std::unique_ptr<uint16_t[]> hold_free_;
  std::unique_ptr<uint16_t[]> hold_of_;
  uint32_t hold_nfree_ = 0;
  uint32_t held_n_ = 0;
  uint16_t hold_head_ = kNoHold, hold_tail_ = kNoHold;
  uint32_t hold_end_block_ = 0;  // set by dpiFileEndAlerts while a flow's files end
};

}  // namespace dpu::dp
