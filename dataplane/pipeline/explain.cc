// Explain (explain.h): the loop's part (parse, fragments, flow), then the stages' parts. It
// follows the same policies as Worker::processBurst (see pipeline.cc); the packet is taken as
// the first packet of a new flow, since flow tables belong to the workers.
#include <arpa/inet.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dataplane/api/control.h"
#include "dataplane/packet/parser.h"
#include "dataplane/packet/tunnel_config.h"
#include "dataplane/pipeline/explain.h"
#include "dataplane/pipeline/stage_list.h"
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>


namespace dpu::dp {
namespace {


std::string summarize(const PacketMeta& m) {
  std::string s;
  if (m.vlan_count) absl::StrAppend(&s, "vlan ", m.vlan_outer, m.vlan_count > 1 ? "/" : "",
                                    m.vlan_count > 1 ? absl::StrCat(m.vlan_inner) : "", " ");
  if (m.pppoe_offset != 0) absl::StrAppend(&s, "pppoe session ", m.pppoe_session, " ");
  if (m.l3 == L3Type::kNone) {
    return absl::StrCat(s, absl::StrFormat("ethertype 0x%04x, %u bytes", m.ether_type,
                                           m.frame_len));
  }
  bool ports = m.has_l4 && (m.l4_proto == 6 || m.l4_proto == 17);
  // IPv6 with a port reads [addr]:port (RFC 5952 section 6).
  auto endpoint = [&](const IpAddr& a, uint16_t port) {
    std::string text = explainAddr(a, m.l3);
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



// A tunnel header error that only dataplane.tunnels.strict makes a malformation.
const char* strictNote(ParseStatus ps, const TunnelParseConfig& tun) {
  const bool by_port = ps == ParseStatus::kTruncatedVxlan || ps == ParseStatus::kBadVxlan ||
                       ps == ParseStatus::kTruncatedGeneve || ps == ParseStatus::kBadGeneve ||
                       ps == ParseStatus::kTruncatedGre || ps == ParseStatus::kBadGre;
  return by_port && tun.strict ? " (dataplane.tunnels.strict = true)" : "";
}

}  // namespace

std::string explainAddr(const IpAddr& a, L3Type l3) {
  char buf[INET6_ADDRSTRLEN] = {0};
  inet_ntop(l3 == L3Type::kIpv4 ? AF_INET : AF_INET6, a.b, buf, sizeof(buf));
  return buf;
}

void explainStep(ExplainResult& r, Stage st, std::string decision, std::string detail) {
  r.steps.push_back({st, std::move(decision), std::move(detail)});
}

void explainDrop(ExplainResult& r, Stage st, Verdict verdict, DropReason reason, uint32_t rule,
                 std::string decision, std::string detail) {
  r.verdict.verdict = verdict;
  r.verdict.stage = st;
  r.verdict.reason = reason;
  r.verdict.rule = rule;
  explainStep(r, st, std::move(decision), std::move(detail));
}

// The payload the stages read (inside the frame).
bool explainPayload(const PacketMeta& m, uint32_t len, const uint8_t* frame, const uint8_t** p,
                    uint32_t* n) {
  if (uint32_t(m.payload_offset) > len) return false;
  *p = frame + m.payload_offset;
  *n = std::min<uint32_t>(m.payload_len, len - m.payload_offset);
  return true;
}

ExplainResult explainPacket(const rules::Snapshot& snap, const uint8_t* frame, uint32_t len,
                            uint8_t side, const CountryLookup* countries,
                            const std::vector<StageSpec>* extra) {
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
  const TunnelParseConfig tun = toTunnelParseConfig(d);
  ParseStatus ps = parsePacket(frame, len, m, &tun);
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
           absl::StrCat(parseStatusName(ps), strictNote(ps, tun),
                        "; policy dataplane.malformed = DROP"));
    } else {
      v.verdict = Verdict::kForward;
      step(Stage::kParse, "forward",
           absl::StrCat(parseStatusName(ps), strictNote(ps, tun),
                        "; policy dataplane.malformed = FORWARD (no flow)"));
    }
    return r;
  }
  if (m.tunnel_not_parsed != TunnelType::kNone) {
    // The classify step's story: a packet on a tunnel port or protocol that is not the tunnel.
    const char* t = tunnelTypeName(m.tunnel_not_parsed);
    const std::string where = m.tunnel_not_parsed == TunnelType::kGre
                                  ? std::string("IP protocol 47 (GRE)")
                                  : absl::StrCat("UDP to the ", t, " port ", m.dport);
    step(Stage::kParse, "pass",
         absl::StrCat(r.summary, "; ", where, " without a valid ", t,
                      " header: judged as the packet it is (dataplane.tunnels.strict = false; "
                      "counted ", t, "_not_parsed)"));
  } else {
    step(Stage::kParse, "pass", r.summary);
  }

  // An IPv6 atomic fragment is a whole datagram, judged like any packet (RFC 6946).
  if (m.is_fragment && m.frag_offset == 0 && !m.more_fragments) m.is_fragment = false;
  if (m.is_fragment && (snap.dns || snap.dpi)) {
    // docs/fragments.md: with DNS or DPI configured a datagram is judged once reassembled.
    step(Stage::kFragment, "hold",
         "fragment: held until its datagram is complete; the stages then judge the reassembled "
         "datagram and every fragment gets its verdict (explain the whole datagram instead)");
    v.verdict = Verdict::kForward;
    return r;
  }
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
  const bool fw_active = fw && fw->judges();
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
  // The stages, in the list's order (stage_list.cc), on the snapshot's compiled objects with
  // the stages' own code: a stage that drops or rejects ends the trace there.
  const bool tracked = !(is_tcp && !(m.tcp_flags & kTcpSyn) && (m.tcp_flags & kTcpRst));
  const ExplainInput in{snap, frame, len, m, side, tracked, countries};
  for (const StageSpec& spec : builtinStages()) {
    if (spec.explain != nullptr && spec.explain(in, r)) return r;
  }
  if (extra != nullptr) {
    for (const StageSpec& spec : *extra) {
      if (spec.explain != nullptr && spec.explain(in, r)) return r;
    }
  }
  v.verdict = Verdict::kForward;
  step(Stage::kNone, "forward", side == kSideA ? "out of side B" : "out of side A");
  return r;
}

}  // namespace dpu::dp

