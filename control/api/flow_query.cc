// --- flows view --- see flow_query.h.
#include "control/api/flow_query.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "control/app/summary.h"
#include "rules/compile/firewall_parsers.h"

namespace dpu::ctl {

namespace {

absl::Status bad(const std::string& field, const std::string& value, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": '", value, "' ", why));
}

absl::StatusOr<std::optional<rules::IpPrefix>> prefixField(const std::string& field,
                                                          const std::string& v) {
  if (v.empty()) return std::optional<rules::IpPrefix>();
  auto p = v.find('/') == std::string::npos ? rules::parseAddress(v) : rules::parsePrefix(v);
  if (!p.ok()) return bad(field, v, absl::StrCat("is not an IP address or prefix (", p.status().message(), ")"));
  if (v.find('/') == std::string::npos) p->len = p->v6 ? 128 : 32;
  return std::optional<rules::IpPrefix>(*p);
}

absl::Status portField(const std::string& field, uint32_t v, uint16_t* out) {
  if (v > 65535) return bad(field, std::to_string(v), "is out of range [1, 65535]");
  *out = static_cast<uint16_t>(v);
  return absl::OkStatus();
}

bool inPrefix(const rules::IpPrefix& p, const dp::IpAddr& a, uint8_t ip_ver) {
  if (p.v6 != (ip_ver == 6)) return false;
  const uint8_t full = p.len / 8, rest = p.len % 8;
  for (uint8_t i = 0; i < full; ++i) {
    if (p.addr[i] != a.b[i]) return false;
  }
  if (rest == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xff00 >> rest);
  return (p.addr[full] & mask) == (a.b[full] & mask);
}

uint64_t total(const uint64_t v[2]) { return v[0] + v[1]; }

struct Row {
  const dp::FlowInfo* f;
  uint64_t win_packets = 0, win_bytes = 0;
  double seconds = 0;  // window length (worker clock)
};

}  // namespace

absl::StatusOr<dp::DropReason> parseDropReason(const std::string& name) {
  std::vector<std::string> names;
  for (int r = 1; r < static_cast<int>(dp::DropReason::kCount); ++r) {
    const char* n = dp::dropReasonName(static_cast<dp::DropReason>(r));
    if (name == n) return static_cast<dp::DropReason>(r);
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  }
  return bad("reason", name, absl::StrCat("is not a drop reason (one of: ", absl::StrJoin(names, ", "), ")"));
}

absl::StatusOr<FlowQuery> parseFlowQuery(const v1::ListFlowsRequest& req) {
  FlowQuery q;
  const v1::FlowFilter& f = req.filter();
  auto a = prefixField("filter.address", f.address());
  if (!a.ok()) return a.status();
  q.address = *a;
  auto s = prefixField("filter.src", f.src());
  if (!s.ok()) return s.status();
  q.src = *s;
  auto d = prefixField("filter.dst", f.dst());
  if (!d.ok()) return d.status();
  q.dst = *d;
  if (auto st = portField("filter.port", f.port(), &q.port); !st.ok()) return st;
  if (auto st = portField("filter.src_port", f.src_port(), &q.src_port); !st.ok()) return st;
  if (auto st = portField("filter.dst_port", f.dst_port(), &q.dst_port); !st.ok()) return st;
  if (!f.proto().empty()) {
    const std::string p = absl::AsciiStrToLower(f.proto());
    uint32_t n = 0;
    if (p == "tcp") q.proto = 6;
    else if (p == "udp") q.proto = 17;
    else if (p == "icmp") q.proto = 1;
    else if (p == "icmpv6" || p == "ipv6-icmp") q.proto = 58;
    else if (p == "sctp") q.proto = 132;
    else if (p == "gre") q.proto = 47;
    else if (absl::SimpleAtoi(p, &n) && n <= 255) q.proto = static_cast<uint8_t>(n);
    else return bad("filter.proto", f.proto(), "is not tcp, udp, icmp, icmpv6, sctp, gre or 0..255");
  }
  if (!f.state().empty()) {
    const std::string st = absl::AsciiStrToLower(f.state());
    std::vector<std::string> names;
    for (int i = 1; i < static_cast<int>(dp::TcpState::kCount); ++i) {
      const char* n = dp::tcpStateName(static_cast<dp::TcpState>(i));
      if (st == n) q.state = static_cast<dp::TcpState>(i);
      names.push_back(n);
    }
    if (!q.state) {
      return bad("filter.state", f.state(), absl::StrCat("is not a TCP state (one of: ", absl::StrJoin(names, ", "), ")"));
    }
  }
  if (!f.verdict().empty()) {
    const std::string v = absl::AsciiStrToLower(f.verdict());
    if (v == "forward") q.verdict = dp::Verdict::kForward;
    else if (v == "drop") q.verdict = dp::Verdict::kDrop;
    else if (v == "reject") q.verdict = dp::Verdict::kReject;
    else if (v == "none") q.verdict = dp::Verdict::kNone;
    else return bad("filter.verdict", f.verdict(), "is not forward, drop, reject or none");
  }
  q.rule = f.rule();
  q.backend = f.backend();
  q.service = f.service();
  if (f.has_vlan()) {
    if (f.vlan() > 4095) return bad("filter.vlan", std::to_string(f.vlan()), "is out of range [0, 4095]");
    q.vlan = static_cast<uint16_t>(f.vlan());
  }
  if (f.has_tunnel_id()) q.tunnel_id = f.tunnel_id();
  const std::string so = absl::AsciiStrToLower(req.sort());
  if (so.empty()) q.sort = FlowSort::kNone;
  else if (so == "packets") q.sort = FlowSort::kPackets;
  else if (so == "bytes") q.sort = FlowSort::kBytes;
  else if (so == "age") q.sort = FlowSort::kAge;
  else if (so == "last_seen" || so == "last-seen") q.sort = FlowSort::kLastSeen;
  else return bad("sort", req.sort(), "is not packets, bytes, age or last_seen");
  q.ascending = req.ascending();
  q.limit = req.limit();
  q.offset = req.offset();
  q.window_ms = req.window_ms();
  if (q.window_ms != 0 && (q.window_ms < kMinFlowWindowMs || q.window_ms > kMaxFlowWindowMs)) {
    return bad("window_ms", std::to_string(q.window_ms),
               absl::StrCat("is out of range [", kMinFlowWindowMs, ", ", kMaxFlowWindowMs, "] (0 = no window)"));
  }
  return q;
}

bool flowMatches(const FlowQuery& q, const dp::FlowInfo& f) {
  if (q.address && !inPrefix(*q.address, f.src, f.ip_ver) && !inPrefix(*q.address, f.dst, f.ip_ver)) {
    return false;
  }
  if (q.src && !inPrefix(*q.src, f.src, f.ip_ver)) return false;
  if (q.dst && !inPrefix(*q.dst, f.dst, f.ip_ver)) return false;
  if (q.port && f.sport != q.port && f.dport != q.port) return false;
  if (q.src_port && f.sport != q.src_port) return false;
  if (q.dst_port && f.dport != q.dst_port) return false;
  if (q.proto && f.proto != *q.proto) return false;
  if (q.state && (f.proto != 6 || f.tcp_state != *q.state)) return false;
  if (q.verdict && f.verdict != *q.verdict) return false;
  if (!q.rule.empty() && f.rule != q.rule) return false;
  if (!q.backend.empty() && f.lb_backend != q.backend) return false;
  if (!q.service.empty() && f.lb_service != q.service) return false;
  if (q.vlan && f.vlan != *q.vlan) return false;
  if (q.tunnel_id && f.tunnel_id != *q.tunnel_id) return false;
  return true;
}

void fillFlows(const FlowQuery& q, const dp::FlowListing& after, const dp::FlowListing* before,
               int64_t wall_offset_ns, v1::ListFlowsResponse* out) {
  // The earlier listing's counters by (worker, flow id, first seen).
  std::map<std::tuple<uint16_t, uint64_t, uint64_t>, const dp::FlowInfo*> prev;
  if (before) {
    for (const auto& f : before->flows) prev[{f.worker, f.flow_id, f.first_seen_ns}] = &f;
  }
  std::vector<Row> rows;
  for (const auto& f : after.flows) {
    if (!flowMatches(q, f)) continue;
    Row r{&f};
    if (before) {
      uint64_t p0 = 0, b0 = 0;
      if (auto it = prev.find({f.worker, f.flow_id, f.first_seen_ns}); it != prev.end()) {
        p0 = total(it->second->packets);
        b0 = total(it->second->bytes);
      }
      r.win_packets = total(f.packets) - std::min(p0, total(f.packets));
      r.win_bytes = total(f.bytes) - std::min(b0, total(f.bytes));
      const uint64_t t1 = f.worker < after.now_ns.size() ? after.now_ns[f.worker] : 0;
      const uint64_t t0 = f.worker < before->now_ns.size() ? before->now_ns[f.worker] : 0;
      r.seconds = t1 > t0 ? double(t1 - t0) / 1e9 : 0;
    }
    rows.push_back(r);
  }
  const bool win = before != nullptr;
  auto key = [&](const Row& r) -> uint64_t {
    const dp::FlowInfo& f = *r.f;
    switch (q.sort) {
      case FlowSort::kPackets: return win ? r.win_packets : total(f.packets);
      case FlowSort::kBytes: return win ? r.win_bytes : total(f.bytes);
      case FlowSort::kAge: {  // older first by default: smaller first_seen
        return UINT64_MAX - f.first_seen_ns;
      }
      case FlowSort::kLastSeen: return f.last_seen_ns;
      default: return 0;
    }
  };
  std::sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
    if (q.sort != FlowSort::kNone) {
      const uint64_t ka = key(a), kb = key(b);
      if (ka != kb) return q.ascending ? ka < kb : ka > kb;
    }
    return std::tie(a.f->worker, a.f->flow_id) < std::tie(b.f->worker, b.f->flow_id);
  });
  out->set_matched(rows.size());
  out->set_scanned(after.flows.size());
  out->set_missed(after.missed);
  if (win && !after.now_ns.empty() && after.now_ns.size() == before->now_ns.size() &&
      after.now_ns[0] > before->now_ns[0]) {
    out->set_window_ms(static_cast<uint32_t>((after.now_ns[0] - before->now_ns[0]) / 1000000));
  }
  const size_t from = std::min<size_t>(q.offset, rows.size());
  const size_t to = q.limit ? std::min<size_t>(rows.size(), from + q.limit) : rows.size();
  for (size_t i = from; i < to; ++i) {
    const Row& r = rows[i];
    const dp::FlowInfo& f = *r.f;
    v1::Flow* o = out->add_flows();
    o->set_worker(f.worker);
    o->set_flow_id(f.flow_id);
    o->set_proto(protoName(f.proto));
    o->set_src_ip(ipToString(f.src, f.ip_ver));
    o->set_src_port(f.sport);
    o->set_dest_ip(ipToString(f.dst, f.ip_ver));
    o->set_dest_port(f.dport);
    o->set_vlan(f.vlan);
    o->set_tunnel_id(f.tunnel_id);
    o->set_in_iface(dp::sideName(f.in_side));
    if (f.proto == 6) o->set_state(dp::tcpStateName(f.tcp_state));
    o->set_midstream(f.midstream);
    o->set_verdict(dp::verdictName(f.verdict));
    if (f.stage != dp::Stage::kNone) o->set_stage(dp::stageName(f.stage));
    o->set_rule(f.rule);
    o->set_service(f.lb_service);
    o->set_backend(f.lb_backend);
    o->set_packets_toserver(f.packets[0]);
    o->set_packets_toclient(f.packets[1]);
    o->set_bytes_toserver(f.bytes[0]);
    o->set_bytes_toclient(f.bytes[1]);
    o->set_first_seen_unix_ns(static_cast<int64_t>(f.first_seen_ns) + wall_offset_ns);
    o->set_last_seen_unix_ns(static_cast<int64_t>(f.last_seen_ns) + wall_offset_ns);
    const uint64_t now = f.worker < after.now_ns.size() ? after.now_ns[f.worker] : 0;
    o->set_age_seconds(now > f.first_seen_ns ? double(now - f.first_seen_ns) / 1e9 : 0);
    o->set_idle_seconds(now > f.last_seen_ns ? double(now - f.last_seen_ns) / 1e9 : 0);
    if (win) {
      o->set_window_packets(r.win_packets);
      o->set_window_bytes(r.win_bytes);
      if (r.seconds > 0) {
        o->set_packets_per_second(double(r.win_packets) / r.seconds);
        o->set_bits_per_second(double(r.win_bytes) * 8 / r.seconds);
      }
    }
  }
}

}  // namespace dpu::ctl
