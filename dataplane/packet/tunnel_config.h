// dataplane.tunnels (rules::DataplaneSettings) in the parser's plain form.
#pragma once

#include <algorithm>

#include "dataplane/packet/parser.h"
#include "rules/model/dataplane_settings.h"

namespace dpu::dp {

static_assert(rules::kMaxTunnelDepthSetting == kMaxTunnelDepth, "max_depth range");
static_assert(rules::kMaxTunnelPortsSetting == kMaxTunnelPorts, "port list size");

// Settings are validated (rules::validateDataplane) before they reach a snapshot; the clamps
// only keep the arrays in bounds.
inline TunnelParseConfig toTunnelParseConfig(const rules::DataplaneSettings& s) {
  TunnelParseConfig c;
  c.inspect = s.tunnels_inspect;
  c.strict = s.tunnels_strict;
  c.max_depth = static_cast<uint8_t>(std::min<uint32_t>(s.tunnel_max_depth, kMaxTunnelDepth));
  c.n_vxlan = static_cast<uint8_t>(std::min<size_t>(s.vxlan_ports.size(), kMaxTunnelPorts));
  c.n_geneve = static_cast<uint8_t>(std::min<size_t>(s.geneve_ports.size(), kMaxTunnelPorts));
  for (uint32_t i = 0; i < c.n_vxlan; ++i) c.vxlan_ports[i] = static_cast<uint16_t>(s.vxlan_ports[i]);
  for (uint32_t i = 0; i < c.n_geneve; ++i) c.geneve_ports[i] = static_cast<uint16_t>(s.geneve_ports[i]);
  return c;
}

}  // namespace dpu::dp
