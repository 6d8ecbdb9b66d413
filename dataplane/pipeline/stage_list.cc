// The packet path's stages, in DESIGN.md order. Adding a stage is one line here (and its own
// files, config, proto and docs): docs/architecture.md "Adding a stage".
#include "dataplane/pipeline/stage_list.h"

#include "dataplane/stages/dns/dns_stage.h"
#include "dataplane/stages/dpi/dpi_stage.h"
#include "dataplane/stages/firewall/firewall_stage.h"
#include "dataplane/stages/lb/lb_stage.h"
#include "dataplane/stages/stream/stream_stage.h"

namespace dpu::dp {

const std::vector<StageSpec>& builtinStages() {
  static const std::vector<StageSpec> list = {
      // flow verdicts: fed by the flow step, one rte_acl call per segment
      {FirewallStage::make, FirewallStage::explain},
      {StreamStage::make, nullptr},         // TCP normalization: the bytes DNS and DPI read
      {DnsStage::make, DnsStage::explain},  // DNS filtering (UDP, and TCP from the stream)
      {DpiStage::make, DpiStage::explain},  // YARA rules on streams and HTTP files; hold-back
      {LbStage::make, LbStage::explain},    // load balancer: backends pinned per flow, rewrites
  };
  return list;
}

}  // namespace dpu::dp
