// The worker's side of the control mailbox (mailbox.h): flow dumps in bounded slices,
// the capture itself is PathContext::applyVerdict's (path_context.cc).
#include <rte_mbuf.h>

#include <algorithm>
#include <cstring>

#include "dataplane/pipeline/worker.h"

namespace dpu::dp {

void Worker::serviceFlowDump() {
  FlowDumpRequest& r = cx_.mbox->dump;
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
    // The stages' part: their fields, and the verdict of a stage that blocked the flow.
    Event ev{};
    ev.proto = k->proto;
    ev.verdict = static_cast<Verdict>(e.verdict);
    ev.stage = static_cast<Stage>(e.stage);
    ev.rule = e.rule;
    ev.generation = e.generation;
    for (const auto& s : stages_) {
      s->describeFlow(p, o);
      s->flowVerdict(p, ev);
    }
    o.verdict = static_cast<uint8_t>(ev.verdict);
    o.stage = static_cast<uint8_t>(ev.stage);
    o.rule = ev.rule;
    o.generation = ev.generation;
    return ++copied < kDumpFlowsPerLoop;
  });
  if (r.cursor >= ft.capacity()) {
    r.now_ns = cx_.now_ns;
    r.state.store(kDumpDone, std::memory_order_release);
  } else {
    r.state.store(kDumpPending, std::memory_order_release);
  }
}


}  // namespace dpu::dp
