// The rule stages that run per packet after the flow stage and the firewall, in DESIGN.md
// order: DNS filter -> DPI -> load balancer. Each feature keeps its Worker members in its own
// block of worker.h and its code in dataplane/pipeline/<feature>_path.cc; this file only
// orders them and tells them when a flow ends.
#include <rte_mbuf.h>

#include "dataplane/pipeline/burst.h"
#include "dataplane/pipeline/worker.h"

namespace dpu::dp {

void Worker::ruleStages(rte_mbuf** pkts, Burst& b, uint16_t from, uint16_t to) {
  const rules::CompiledDns* dns = snap_ ? snap_->dns.get() : nullptr;  // DNS filtering
  for (uint16_t i = from; i < to; ++i) {
    if (b.v[i].verdict != Verdict::kForward) continue;
    if (dns) dnsStage(pkts[i], i, b, *dns);
    if (b.v[i].verdict != Verdict::kForward) continue;
    // Stages join here in order (dns, dpi, lb); a stage that drops or rejects sets the
    // verdict, stage and reason, and the later stages skip the packet.
    if (dpi_rt_ != nullptr) {  // --- dpi ---
      dpiStage(pkts[i], b, i);
      if (b.v[i].verdict != Verdict::kForward) continue;
    }
    lbStage(pkts[i], b, i);  // --- lb ---
  }
}

void Worker::flowEnded(int32_t pos) {
  // per-flow state of the rule stages is released here
  flowEndedLb(pos);  // --- lb ---
  dpiFlowEnded(pos);  // --- dpi ---
  dnsReleaseFlow(pos);  // DNS filtering
}

}  // namespace dpu::dp
