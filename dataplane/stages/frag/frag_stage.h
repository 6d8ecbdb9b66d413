// IP fragments, a normalization service of the loop (docs/fragments.md): the fragment
// tracker (dataplane/frag/frag_tracker.h) and, while a stage reads payloads
// (PathContext::reassemble: DNS, DPI), the reassembly of whole datagrams
// (dataplane/normalize/datagram.h). Without reassembly a datagram is judged by its first
// fragment and its other fragments follow that verdict (held until it comes); with it,
// every fragment is held until the datagram is covered and the fragment that completes it
// carries the reassembled datagram through the stages (Burst::work, Burst::judge), after
// which finishDatagram() gives the verdict to every fragment: all forwarded unchanged (a
// stage's followFragment applied to each: the LB's rewrite), or all dropped. Overlaps with
// different data, and running out of buffers or held handles, are policies
// (dataplane.fragments.overlapping / on_exhaustion), counted and evented.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "dataplane/frag/frag_tracker.h"
#include "dataplane/normalize/datagram.h"
#include "dataplane/pipeline/stage.h"

namespace dpu::dp {

class FragStage {
 public:
  // The stages' followFragment is called on the worker's list (cx.stages).
  static absl::StatusOr<std::unique_ptr<FragStage>> create(PathContext& cx,
                                                           const rules::DataplaneSettings& s);
  ~FragStage();  // forgets the datagrams (their held fragments freed, buffers given back)

  // Packet i of the burst is a fragment (classify): tracked, held or reassembled. True when
  // it is done with (verdict set, or held); false when it goes on to the flow step (a first
  // fragment to judge, or the datagram it completed in Burst::work).
  bool observe(rte_mbuf** pkts, uint16_t i);
  // finish() of a packet that completed a datagram (Burst::kJudgeDatagram).
  void finishDatagram(rte_mbuf* m, uint16_t i);
  // finish() of a first fragment judged (Burst::frag_slot): its verdict recorded for the
  // datagram / its held fragments released with it.
  void setVerdict(int32_t slot, const PacketVerdict& v) {
    FragVerdict fv{static_cast<uint8_t>(v.verdict), static_cast<uint8_t>(v.stage), v.rule,
                   static_cast<uint8_t>(v.reason), v.flow_id};
    frags_->setVerdict(slot, fv);
  }
  void releaseFragments(int32_t slot, const PacketVerdict& first, uint64_t now);
  // A segment that ended with a fragment: completed datagrams forgotten.
  void flushCompleted() { frags_->flushCompleted(); }
  // Datagrams idle past the timeout (`expire_at` decides what is stale), up to `budget`
  // slots: their held fragments dropped. Publishes the gauges.
  void age(uint64_t expire_at, uint32_t budget);
  void publishGauges() {
    cx_.c->frag_datagrams_active.set(frags_->size());
    if (dgram_) cx_.c->frag_buffers_in_use.set(dgram_->buffersInUse());
  }
  uint32_t size() const { return frags_->size(); }
  uint32_t capacity() const { return frags_->capacity(); }

 private:
  explicit FragStage(PathContext& cx) : cx_(cx) {}
  bool firstFragmentMode(FragAction a, int32_t slot, rte_mbuf* m, uint16_t i);
  bool reasmFragment(rte_mbuf** pkts, uint16_t i, int32_t slot);
  bool reasmJudge(rte_mbuf* m, uint16_t i, int32_t slot);
  bool reasmExhausted(rte_mbuf* m, uint16_t i, int32_t slot, DropReason why);
  void reasmDrop(uint16_t i, int32_t slot, DropReason why);
  void followFragment(rte_mbuf* hm, int32_t slot, const PacketVerdict& first, uint64_t now);
  // The stages' followFragment for fragment m given verdict v (forward). False: dropped.
  bool followStages(rte_mbuf* m, int32_t slot, PacketVerdict& v, uint64_t now);
  void dropHeld(void* pkt, uint64_t now, bool reassembled);

  PathContext& cx_;
  std::unique_ptr<DatagramReassembler> dgram_;  // before frags_: frags_ gives buffers back
  std::unique_ptr<FragTracker> frags_;
};

}  // namespace dpu::dp
