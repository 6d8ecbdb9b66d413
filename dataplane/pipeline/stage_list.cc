// The packet path's stages, in DESIGN.md order. Adding a stage is one line here (and its own
// files, config, proto and docs): docs/architecture.md "Adding a stage".
#include "dataplane/pipeline/stage_list.h"

#include "dataplane/stages/dns/dns_stage.h"
#include "dataplane/stages/dpi/dpi_stage.h"
#include "dataplane/stages/firewall/firewall_stage.h"
#include "dataplane/stages/lb/lb_stage.h"
#include "dataplane/stages/stream/stream_stage.h"

namespace dpu::dp {

const std::vector<StageFactory>& builtinStages() {
  static const std::vector<StageFactory> list = {
      FirewallStage::make,  // flow verdicts: fed by the flow step, one rte_acl call per segment
      StreamStage::make,    // TCP normalization: the bytes DNS and DPI read
      DnsStage::make,       // DNS filtering (UDP, and TCP from the stream)
      DpiStage::make,       // YARA rules on streams and HTTP files; the hold-back
      LbStage::make,        // load balancer: backends pinned per flow, rewrites
  };
  return list;
}

}  // namespace dpu::dp
