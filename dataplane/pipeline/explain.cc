// Explain: the worker's decisions for one packet, step by step, on a given snapshot. It
// follows the same policies as Worker::processBurst (see pipeline.cc); the packet is taken as
// the first packet of a new flow, since flow tables belong to the workers.
#include <arpa/inet.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dataplane/api/control.h"
#include "dataplane/packet/parser.h"
#include "dataplane/stages/firewall_stage.h"

namespace dpu::dp {
namespace {

std::string addr(const IpAddr& a, L3Type l3) {
  char buf[INET6_ADDRSTRLEN] = {0};
  inet_ntop(l3 == L3Type::kIpv4 ? AF_INET : AF_INET6, a.b, buf, sizeof(buf));
  return buf;
}

std::string summarize(const PacketMeta& m) {
  std::string s;
  if (m.vlan_count) absl::StrAppend(&s, "vlan ", m.vlan_outer, m.vlan_count > 1 ? "/" : "",
                                    m.vlan_count > 1 ? absl::StrCat(m.vlan_inner) : "", " ");
  if (m.l3 == L3Type::kNone) {
    return absl::StrCat(s, absl::StrFormat("ethertype 0x%04x, %u bytes", m.ether_type,
                                           m.frame_len));
  }
  bool ports = m.has_l4 && (m.l4_proto == 6 || m.l4_proto == 17);
  // IPv6 with a port reads [addr]:port (RFC 5952 section 6).
  auto endpoint = [&](const IpAddr& a, uint16_t port) {
    std::string text = addr(a, m.l3);
    if (!ports) return text;
    if (m.l3 == L3Type::kIpv6) text = absl::StrCat("[", text, "]");
    return absl::StrCat(text, ":", port);
  };
  absl::StrAppend(&s, m.l3 == L3Type::kIpv4 ? "IPv4 " : "IPv6 ", endpoint(m.src, m.sport), " -> ",
                  endpoint(m.dst, m.dport));
  switch (m.l4_proto) {
    case 6: absl::StrAppend(&s, " TCP flags 0x", absl::Hex(m.tcp_flags)); break;
    case 17: absl::StrAppend(&s, " UDP"); break;
    case 1: case 58:
      absl::StrAppend(&s, m.l4_proto == 1 ? " ICMP" : " ICMPv6", " type ", m.icmp_type,
                      " code ", m.icmp_code);
      break;
    default: absl::StrAppend(&s, " proto ", m.l4_proto);
  }
  if (m.is_fragment) {
    absl::StrAppend(&s, " fragment id ", m.frag_id, " offset ", m.frag_offset,
                    m.more_fragments ? " MF" : "");
  }
  absl::StrAppend(&s, ", payload ", m.payload_len, " bytes");
  return s;
}

const char* actionName(rules::FwAction a) {
  switch (a) {
    case rules::FwAction::kAllow: return "allow";
    case rules::FwAction::kDeny: return "deny";
    case rules::FwAction::kReject: return "reject";
  }
  return "unknown";
}

std::string countryText(const char cc[2]) {
  return cc[0] ? std::string(cc, 2) : std::string("unknown");
}

}  // namespace

ExplainResult explainPacket(const rules::Snapshot& snap, const uint8_t* frame, uint32_t len,
                            uint8_t side, const CountryLookup* countries) {
  ExplainResult r;
  PacketVerdict& v = r.verdict;
  v.generation = snap.generation;
  v.in_side = side;
  const auto& d = snap.dataplane;
  auto step = [&](Stage st, std::string decision, std::string detail) {
    r.steps.push_back({st, std::move(decision), std::move(detail)});
  };
  auto drop = [&](Stage st, DropReason reason, std::string detail) {
    v.verdict = Verdict::kDrop;
    v.stage = st;
    v.reason = reason;
    step(st, "drop", std::move(detail));
  };

  PacketMeta m;
  ParseStatus ps = parsePacket(frame, len, m);
  r.summary = ps == ParseStatus::kOk || ps == ParseStatus::kNonIp
                  ? summarize(m)
                  : absl::StrCat("malformed: ", parseStatusName(ps), ", ", len, " bytes");
  if (ps == ParseStatus::kNonIp) {
    if (d.non_ip == rules::Policy::kDrop) {
      drop(Stage::kParse, DropReason::kNonIp, "non-IP frame; policy dataplane.non_ip = DROP");
    } else {
      v.verdict = Verdict::kForward;
      step(Stage::kParse, "forward", "non-IP frame; policy dataplane.non_ip = FORWARD (no flow)");
    }
    return r;
  }
  if (ps != ParseStatus::kOk) {
    if (d.malformed == rules::Policy::kDrop) {
      drop(Stage::kParse, dropReasonFromParse(ps),
           absl::StrCat(parseStatusName(ps), "; policy dataplane.malformed = DROP"));
    } else {
      v.verdict = Verdict::kForward;
      step(Stage::kParse, "forward",
           absl::StrCat(parseStatusName(ps), "; policy dataplane.malformed = FORWARD (no flow)"));
    }
    return r;
  }
  step(Stage::kParse, "pass", r.summary);

  if (m.is_fragment) {
    if (m.isLaterFragment()) {
      step(Stage::kFragment, "follow",
           "later fragment: takes the verdict of its datagram's first fragment (held until it "
           "arrives, dropped if it never does)");
      v.verdict = Verdict::kForward;
      return r;
    }
    bool l4_needed = m.l4_proto == 6 || m.l4_proto == 17 || m.l4_proto == 1 || m.l4_proto == 58;
    if (!m.has_l4 && l4_needed && d.frag_tiny == rules::Policy::kDrop) {
      drop(Stage::kFragment, DropReason::kFragTiny,
           "first fragment too short for the transport header; policy "
           "dataplane.fragments.tiny = DROP (the whole datagram is dropped)");
      return r;
    }
    step(Stage::kFragment, "pass", "first fragment: its verdict applies to the whole datagram");
  }

  const rules::CompiledFirewall* fw = snap.firewall.get();
  bool fw_active = fw && (!fw->rules.empty() || fw->default_action[0] != rules::FwAction::kAllow ||
                          fw->default_action[1] != rules::FwAction::kAllow);
  bool is_tcp = m.l4_proto == 6 && m.has_l4;
  if (is_tcp && !(m.tcp_flags & kTcpSyn)) {
    if (m.tcp_flags & kTcpRst) {
      if (!fw_active) {
        v.verdict = Verdict::kForward;
        step(Stage::kFlow, "forward", "TCP reset for an unknown flow: passed on, not tracked");
        return r;
      }
      step(Stage::kFlow, "untracked",
           "TCP reset for an unknown flow: not tracked, judged by the firewall on its own");
    } else if (d.tcp_midstream == rules::Policy::kDrop) {
      drop(Stage::kFlow, DropReason::kTcpMidstream,
           "TCP without SYN for an unknown flow; policy dataplane.tcp.midstream = DROP");
      return r;
    } else {
      step(Stage::kFlow, "new", "new flow picked up mid-stream (TCP without SYN), as established");
    }
  } else {
    step(Stage::kFlow, "new", "new flow (a packet of a tracked flow reuses its cached verdict)");
  }
  if (fw_active) {
    // The packet is the flow's first: the initiator is its source, the side its side.
    rules::FwQuery q;
    fwQueryForPacket(m, side, q);
    std::string where;
    if (fw->uses_countries) {
      char scc[2] = {0, 0}, dcc[2] = {0, 0};
      if (countries) {
        countries->country(m.src, m.l3 == L3Type::kIpv6, scc);
        countries->country(m.dst, m.l3 == L3Type::kIpv6, dcc);
      }
      q.src_cc = fw->countryIndex(scc);
      q.dst_cc = fw->countryIndex(dcc);
      where = absl::StrCat(" (source country ", countryText(scc), ", destination country ",
                           countryText(dcc), countries ? "" : ": no GeoIP database here", ")");
    }
    int64_t rule = rules::referenceMatch(*fw, q);
    rules::FwAction a;
    std::string detail;
    if (rule >= 0) {
      const rules::FwRuleInfo& ri = fw->rules[rule];
      a = ri.action;
      detail = absl::StrCat("rule '", ri.id, "' (priority ", ri.priority, ", #", rule, "): ",
                            actionName(a), where);
      v.rule = static_cast<uint32_t>(rule);
    } else {
      a = fw->default_action[side == kSideB ? 1 : 0];
      detail = absl::StrCat("no rule matches: default action for flows from side ",
                            sideName(side), ": ", actionName(a), where);
    }
    if (a == rules::FwAction::kAllow) {
      if (rule >= 0) v.stage = Stage::kFirewall;
      step(Stage::kFirewall, "allow", detail);
    } else {
      v.verdict = a == rules::FwAction::kDeny ? Verdict::kDrop : Verdict::kReject;
      v.stage = Stage::kFirewall;
      v.reason = a == rules::FwAction::kDeny ? DropReason::kFirewallDeny
                                             : DropReason::kFirewallReject;
      if (a == rules::FwAction::kDeny) {
        absl::StrAppend(&detail, "; dropped");
      } else if (is_tcp) {
        absl::StrAppend(&detail, (m.tcp_flags & kTcpRst) ? "; dropped (a reset is not answered)"
                                                         : "; dropped, TCP RST sent back out of side ",
                        (m.tcp_flags & kTcpRst) ? "" : sideName(side));
      } else {
        absl::StrAppend(&detail, "; dropped, ICMP", m.l3 == L3Type::kIpv6 ? "v6" : "",
                        " destination unreachable (administratively prohibited) sent back out "
                        "of side ", sideName(side));
      }
      step(Stage::kFirewall, a == rules::FwAction::kDeny ? "deny" : "reject", detail);
      return r;
    }
  }
  // Later rule stages join here as features land.
  v.verdict = Verdict::kForward;
  step(Stage::kNone, "forward", side == kSideA ? "out of side B" : "out of side A");
  return r;
}

}  // namespace dpu::dp
