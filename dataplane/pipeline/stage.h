// The stage interface (docs/architecture.md): a feature of the packet path as one class,
// created once per worker with the start-time sizes, owning its per-flow state (indexed by
// flow position) and its per-worker pools. The worker calls it per burst segment (never per
// packet through a virtual call), per loop, and per flow end.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "dataplane/pipeline/counters.h"
#include "dataplane/pipeline/explain.h"
#include "dataplane/pipeline/path_context.h"
#include "rules/compiled/snapshot.h"

struct rte_mbuf;

namespace dpu::dp {

class PathStage {
 public:
  // `cycles`: the bucket of `dpuctl stats` its run() time is counted in. `per_segment`:
  // run() is called by the loop for every burst segment (false: another step calls it, e.g.
  // the firewall, which the flow step feeds).
  PathStage(PathContext& cx, const char* name, CycleBucket cycles, bool per_segment = true)
      : cx_(cx), name_(name), cycles_(cycles), per_segment_(per_segment) {}
  virtual ~PathStage() = default;
  PathStage(const PathStage&) = delete;
  PathStage& operator=(const PathStage&) = delete;

  const char* name() const { return name_; }
  CycleBucket cycles() const { return cycles_; }
  bool perSegment() const { return per_segment_; }

  // Once per loop, after the loop read the published state (cx.state, cx.snap,
  // cx.generation): the stage takes its view of it and may ask things of the loop
  // (cx.reassemble, cx.new_flow_flags, cx.prefetch_*). Returns whether run() is called in
  // this loop.
  virtual bool refresh() = 0;
  // Packets [from, to) of the current segment of cx.burst: the stage judges those whose
  // verdict is still forward (reading cx.burst->work[i], the packet or the datagram it
  // completed). Setting a drop / reject verdict (verdict, stage, reason, rule) hides the
  // packet from the stages after it.
  virtual void run(uint16_t from, uint16_t to) = 0;
  // Before every removal of flow `pos` (aging, stale, reused, shutdown; the flow is still
  // in the table, cx.flow_end_why says why): the stage releases its state of that flow.
  // Called in the reverse order of the list.
  virtual void flowEnded(int32_t pos) { (void)pos; }
  // A flow's verdict as the stage sees it, for its flow-end event and the flow dump: `ev`
  // holds the flow table's (verdict, stage, rule, generation; proto set); a stage that
  // blocked the flow overwrites them.
  virtual void flowVerdict(int32_t pos, Event& ev) const { (void)pos, (void)ev; }
  // The stage's fields of a flow dump record.
  virtual void describeFlow(int32_t pos, FlowDumpRecord& r) const { (void)pos, (void)r; }
  // A flow created by a stage as the twin of flow `from` (the LB's NAT reverse entry): the
  // stage copies what the twin inherits.
  virtual void flowCopied(int32_t from, int32_t to) { (void)from, (void)to; }
  // A later fragment (or a repeated first one) of datagram `slot`, given the verdict `v`
  // (forward) of the packet the stages judged for it: the stage applies what it did to that
  // packet. False: dropped (v set to the drop).
  virtual bool followFragment(rte_mbuf* m, const PacketMeta& pm, int32_t slot,
                              PacketVerdict& v) {
    (void)m, (void)pm, (void)slot, (void)v;
    return true;
  }
  // The holder (PathContext::holder) only. In the loop's finish, for packet i (judged on
  // itself, not a fragment): true when the stage took the packet (held: its verdict is
  // applied when it leaves the hold).
  virtual bool finishPacket(rte_mbuf* m, uint16_t i) { (void)m, (void)i; return false; }
  // The holder only: held packets past their deadline leave (at time `now`).
  virtual void expireHeld(uint64_t now) { (void)now; }

 protected:
  PathContext& cx_;

 private:
  const char* name_;
  CycleBucket cycles_;
  bool per_segment_;
};

// Makes one stage of a worker (at create, with the start-time settings).
using StageFactory = std::function<absl::StatusOr<std::unique_ptr<PathStage>>(
    PathContext& cx, const rules::DataplaneSettings& settings)>;

// An entry of the stage list: how to make the stage, and its part of explain (explain.h;
// nullptr: it adds no step).
struct StageSpec {
  StageFactory make;
  StageExplain explain = nullptr;
};

}  // namespace dpu::dp
