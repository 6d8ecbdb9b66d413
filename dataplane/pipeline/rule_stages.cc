// The rule stages that run per packet after the flow stage and the firewall, in DESIGN.md
// order: DNS filter -> DPI -> load balancer. Each feature keeps its Worker members in its own
// block of worker.h and its code in dataplane/pipeline/<feature>_path.cc; this file only
// orders them and tells them when a flow ends.
#include <rte_cycles.h>
#include <rte_mbuf.h>

#include "dataplane/pipeline/burst.h"
#include "dataplane/pipeline/worker.h"

namespace dpu::dp {

void Worker::ruleStages(rte_mbuf** pkts, Burst& b, uint16_t from, uint16_t to) {
  // Stage by stage over the segment (each stage's code and tables stay hot for the whole
  // segment), in order: a packet reaches a stage only while it is still forwarded, so a
  // stage that drops or rejects (setting verdict, stage and reason) hides it from the later
  // ones, exactly as a per-packet chain would. Packets of one flow keep their order within
  // every stage.
  const rules::CompiledDns* dns = snap_ ? snap_->dns.get() : nullptr;  // DNS filtering
  uint64_t t = rte_rdtsc();
  if (dns || dpi_rt_ != nullptr) {  // --- tcp stream --- what DNS and DPI read of TCP
    for (uint16_t i = from; i < to; ++i) {
      b.st_read[i] = false;
      if (b.v[i].verdict == Verdict::kForward) streamStage(pkts[i], b, i, dns);
    }
    uint64_t t1 = rte_rdtsc();
    cy_[kCyStream] += t1 - t;
    t = t1;
  }
  if (dns) {
    dnsPrepare(pkts, b, from, to, *dns);  // the segment's UDP questions, looked up as a burst
    for (uint16_t i = from; i < to; ++i) {
      if (b.v[i].verdict == Verdict::kForward) dnsStage(pkts[i], i, b, *dns);
    }
    uint64_t t1 = rte_rdtsc();
    cy_[kCyDns] += t1 - t;
    t = t1;
  }
  if (dpi_rt_ != nullptr) {  // --- dpi ---
    for (uint16_t i = from; i < to; ++i) {
      if (b.v[i].verdict == Verdict::kForward) dpiStage(pkts[i], b, i);
    }
    uint64_t t1 = rte_rdtsc();
    cy_[kCyDpi] += t1 - t;
    t = t1;
  }
  if (lb_seen_) {  // --- lb ---
    for (uint16_t i = from; i < to; ++i) {
      if (b.v[i].verdict == Verdict::kForward) lbStage(pkts[i], b, i);
    }
    cy_[kCyLb] += rte_rdtsc() - t;
  }
}

void Worker::flowEnded(int32_t pos) {
  // per-flow state of the rule stages is released here
  flowEndedLb(pos);  // --- lb ---
  httpFlowEnded(pos);  // --- http --- (files end before the flow's DPI streams)
  dpiFlowEnded(pos);  // --- dpi ---
  dnsReleaseFlow(pos);  // DNS filtering
  streamFlowEnded(pos);  // --- tcp stream ---
}

}  // namespace dpu::dp
