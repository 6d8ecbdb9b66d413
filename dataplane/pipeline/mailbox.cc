// The worker's side of the control mailbox (mailbox.h): flow dumps in bounded slices,
// packet capture into the slot ring.
#include <rte_mbuf.h>

#include <algorithm>
#include <cstring>

#include "dataplane/pipeline/worker.h"

namespace dpu::dp {

void Worker::serviceFlowDump() {
  FlowDumpRequest& r = mbox_->dump;
  uint32_t expect = kDumpPending;
  // The control side may have cancelled it meanwhile (CAS to kIdle): then nothing to do.
  if (!r.state.compare_exchange_strong(expect, kDumpActive, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
    return;
  }
  const FlowTable& ft = *flows_;
  uint32_t copied = 0;
  r.cursor = ft.visit(r.cursor, kDumpSlotsPerLoop, [&](int32_t p) {
    if (r.n >= r.cap) {
      ++r.missed;
      return true;
    }
    const FlowEntry& e = ft.entry(p);
    const FlowKey* k = ft.keyAt(p);
    if (k == nullptr) return true;
    FlowDumpRecord& o = r.out[r.n++];
    o.key = *k;
    o.first_seen_ns = ft.cold(p).first_seen_ns;
    o.last_seen_ns = e.last_seen_ns;
    for (int d = 0; d < 2; ++d) {
      o.packets[d] = e.packets[d];
      o.bytes[d] = e.bytes[d];
    }
    o.generation = e.generation;
    o.rule = e.rule;
    o.flow_seq = e.flow_seq;
    o.verdict = e.verdict;
    o.stage = e.stage;
    o.tcp_state = static_cast<uint8_t>(e.tcp_state);
    o.flags = e.flags;
    o.lb_service = o.lb_backend = 0;
    const LbFlow& lf = lb_flow_[p];
    if (lf.kind == LbFlow::kBalanced || lf.kind == LbFlow::kReverse) {
      o.lb_service = lf.svc;
      o.lb_backend = lf.backend;
    }
    if (dpi_block_ != nullptr && dpi_block_[p] != 0) {  // --- dpi --- blocked by a YARA rule
      Event ev{};
      ev.proto = k->proto;
      dpiFlowEndVerdict(p, ev);
      o.verdict = static_cast<uint8_t>(ev.verdict);
      o.stage = static_cast<uint8_t>(ev.stage);
      o.rule = ev.rule;
      o.generation = ev.generation;
    }
    return ++copied < kDumpFlowsPerLoop;
  });
  if (r.cursor >= ft.capacity()) {
    r.now_ns = now_ns_;
    r.state.store(kDumpDone, std::memory_order_release);
  } else {
    r.state.store(kDumpPending, std::memory_order_release);
  }
}

void Worker::capturePacket(const rte_mbuf* m, const PacketVerdict& v, uint8_t in_side) {
  CaptureRing& c = mbox_->capture;
  if (c.rule_uid != 0) {
    if (v.stage != Stage::kFirewall || v.generation != generation_ ||
        v.rule >= state_->rule_uid.size() || state_->rule_uid[v.rule] != c.rule_uid) {
      return;
    }
  } else if (c.drops) {
    if (v.verdict != Verdict::kDrop && v.verdict != Verdict::kReject) return;
    if (!c.any_reason && static_cast<uint8_t>(v.reason) != c.reason) return;
  } else {
    return;
  }
  const uint32_t head = c.head.load(std::memory_order_relaxed);
  if (head - c.tail.load(std::memory_order_acquire) >= kCaptureSlots) {
    c.lost.store(c.lost.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return;
  }
  CaptureSlot& s = c.slots[head & (kCaptureSlots - 1)];
  s.ts_ns = packetTime(const_cast<rte_mbuf*>(m));
  s.orig_len = m->pkt_len;
  const uint32_t len = std::min<uint32_t>(m->pkt_len, kCaptureSnap);
  const void* d = rte_pktmbuf_read(m, 0, len, s.data);
  if (d != s.data) std::memcpy(s.data, d, len);
  s.cap_len = static_cast<uint16_t>(len);
  s.in_side = in_side;
  s.verdict = static_cast<uint8_t>(v.verdict);
  s.stage = static_cast<uint8_t>(v.stage);
  s.reason = static_cast<uint8_t>(v.reason);
  c.head.store(head + 1, std::memory_order_release);
}

}  // namespace dpu::dp
