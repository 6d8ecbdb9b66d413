// Cold side of the parser: names of parse statuses (used as drop counter names).
#include "dataplane/packet/parser.h"

namespace dpu::dp {

const char* parseStatusName(ParseStatus s) {
  switch (s) {
    case ParseStatus::kOk: return "ok";
    case ParseStatus::kNonIp: return "non_ip";
    case ParseStatus::kTruncatedL2: return "truncated_l2";
    case ParseStatus::kTruncatedVlan: return "truncated_vlan";
    case ParseStatus::kTooManyVlans: return "too_many_vlans";
    case ParseStatus::kTruncatedIpv4: return "truncated_ipv4";
    case ParseStatus::kBadIpv4Version: return "bad_ipv4_version";
    case ParseStatus::kBadIpv4Ihl: return "bad_ipv4_ihl";
    case ParseStatus::kBadIpv4TotalLength: return "bad_ipv4_total_length";
    case ParseStatus::kTruncatedIpv6: return "truncated_ipv6";
    case ParseStatus::kBadIpv6Version: return "bad_ipv6_version";
    case ParseStatus::kBadIpv6PayloadLength: return "bad_ipv6_payload_length";
    case ParseStatus::kBadIpv6ExtHeader: return "bad_ipv6_ext_header";
    case ParseStatus::kTruncatedTcp: return "truncated_tcp";
    case ParseStatus::kBadTcpDataOffset: return "bad_tcp_data_offset";
    case ParseStatus::kTruncatedUdp: return "truncated_udp";
    case ParseStatus::kBadUdpLength: return "bad_udp_length";
    case ParseStatus::kTruncatedIcmp: return "truncated_icmp";
    case ParseStatus::kBadFragment: return "bad_fragment";
    case ParseStatus::kTruncatedPppoe: return "truncated_pppoe";
    case ParseStatus::kBadPppoeLength: return "bad_pppoe_length";
    case ParseStatus::kTruncatedVxlan: return "truncated_vxlan";
    case ParseStatus::kBadVxlan: return "bad_vxlan";
    case ParseStatus::kTruncatedGeneve: return "truncated_geneve";
    case ParseStatus::kBadGeneve: return "bad_geneve";
    case ParseStatus::kTruncatedGre: return "truncated_gre";
    case ParseStatus::kBadGre: return "bad_gre";
    case ParseStatus::kTruncatedMpls: return "truncated_mpls";
    case ParseStatus::kBadMpls: return "bad_mpls";
    case ParseStatus::kTunnelTooDeep: return "tunnel_too_deep";
    case ParseStatus::kCount: break;
  }
  return "unknown";
}

const char* tunnelTypeName(TunnelType t) {
  switch (t) {
    case TunnelType::kNone: return "none";
    case TunnelType::kVxlan: return "vxlan";
    case TunnelType::kGeneve: return "geneve";
    case TunnelType::kGre: return "gre";
    case TunnelType::kIpip: return "ipip";
    case TunnelType::kMpls: return "mpls";
  }
  return "unknown";
}

}  // namespace dpu::dp
