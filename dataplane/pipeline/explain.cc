// Explain: the worker's decisions for one packet, step by step, on a given snapshot. It
// follows the same policies as Worker::processBurst (see pipeline.cc); the packet is taken as
// the first packet of a new flow, since flow tables belong to the workers.
#include <arpa/inet.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dataplane/api/control.h"
#include "dataplane/packet/parser.h"
#include "dataplane/packet/tunnel_config.h"
#include "dataplane/stages/firewall/firewall_tables.h"
// Rule stages (explain of the DNS, DPI and LB steps).
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "dataplane/normalize/http.h"
#include "dataplane/stages/dns/dns_filter.h"
#include "dataplane/stages/dpi/dpi_runtime.h"
#include "dataplane/stages/lb/lb_view.h"
#include "rules/compile/dns_parsers.h"

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
  if (m.pppoe_offset != 0) absl::StrAppend(&s, "pppoe session ", m.pppoe_session, " ");
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


// --- rule stages (control: explain) ------------------------------------------------------

void ruleStep(ExplainResult& r, Stage st, std::string decision, std::string detail) {
  r.steps.push_back({st, std::move(decision), std::move(detail)});
}

void ruleDrop(ExplainResult& r, Stage st, Verdict verdict, DropReason reason, uint32_t rule,
              std::string decision, std::string detail) {
  r.verdict.verdict = verdict;
  r.verdict.stage = st;
  r.verdict.reason = reason;
  r.verdict.rule = rule;
  ruleStep(r, st, std::move(decision), std::move(detail));
}

// The payload the stages read (inside the frame).
bool payloadOf(const PacketMeta& m, uint32_t len, const uint8_t* frame, const uint8_t** p,
               uint32_t* n) {
  if (uint32_t(m.payload_offset) > len) return false;
  *p = frame + m.payload_offset;
  *n = std::min<uint32_t>(m.payload_len, len - m.payload_offset);
  return true;
}

std::string dnsNameText(const DnsName* n) {
  if (n == nullptr || n->text_len == 0) return ".";
  return std::string(n->text, n->text_len);
}

// The list entry behind a lookup: the name itself (depth 0) or the parent domain whose
// subdomains the entry covers.
std::string dnsEntryText(const DnsName* n, const rules::DnsLookup& l) {
  if (n == nullptr || l.depth < 0 || l.depth >= n->nlabels) return "?";
  std::string suffix(n->text + n->off[l.depth], n->text_len - n->off[l.depth]);
  return l.depth == 0 ? absl::StrCat("'", suffix, "' (the name itself)")
                      : absl::StrCat("'", suffix, "' and its subdomains");
}

// DNS filter (dataplane/pipeline/dns_path.cc): UDP datagrams to or from a DNS port, and the
// first message of a TCP segment toward one, judged by dnsJudge.
bool explainDns(const rules::Snapshot& snap, const uint8_t* frame, uint32_t len,
                const PacketMeta& m, bool tracked, ExplainResult& r) {
  const rules::CompiledDns* dns = snap.dns.get();
  if (dns == nullptr) return false;
  if (!m.has_l4 || m.is_fragment || !(dns->isDnsPort(m.dport) || dns->isDnsPort(m.sport))) {
    ruleStep(r, Stage::kDns, "skip", "not DNS (no DNS port: 53 or dns.extra_ports)");
    return false;
  }
  const uint8_t* p = nullptr;
  uint32_t n = 0;
  if (!payloadOf(m, len, frame, &p, &n) || n == 0) {
    ruleStep(r, Stage::kDns, "skip", "no payload");
    return false;
  }
  std::string how = "UDP message";
  if (m.l4_proto == 6) {
    if (!tracked) {
      ruleStep(r, Stage::kDns, "skip", "TCP without a flow: DNS over TCP is read on tracked connections only");
      return false;
    }
    if (!dns->isDnsPort(m.dport)) {
      ruleStep(r, Stage::kDns, "skip", "TCP from the DNS port: responses over TCP are not inspected");
      return false;
    }
    if (n < 2) {
      ruleStep(r, Stage::kDns, "pass", "TCP segment shorter than the 2-byte message length: read on with the next segment");
      return false;
    }
    const uint32_t msg_len = uint32_t(p[0] << 8 | p[1]);
    const uint32_t head = std::min<uint32_t>(msg_len, 300);
    if (n - 2 < head) {
      ruleStep(r, Stage::kDns, "pass", "the first message's head continues in a later segment");
      return false;
    }
    p += 2;
    n = head;
    how = "TCP message (the first of the segment, as on a connection followed from its SYN; "
          "one picked up mid-stream is passed unread)";
  } else if (m.l4_proto != 17) {
    ruleStep(r, Stage::kDns, "skip", "neither UDP nor TCP");
    return false;
  }
  auto scratch = std::make_unique<DnsScratch>();
  uint8_t answer[1024];
  DnsDecision d = dnsJudge(*dns, p, n, *scratch, answer, sizeof(answer));
  const bool response = d.status == DnsMsgStatus::kOk && scratch->q.isResponse();
  const std::string what = absl::StrCat(how, ", ", response ? "response" : "query", " for '",
                                        dnsNameText(&scratch->q.name), "'");
  switch (d.outcome) {
    case DnsOutcome::kNotInspected:
      ruleStep(r, Stage::kDns, "pass", absl::StrCat(how, ": not inspected"));
      return false;
    case DnsOutcome::kNonstandard:
      if (dns->nonstandard == rules::Policy::kForward) {
        ruleStep(r, Stage::kDns, "pass",
                 absl::StrCat(how, ": not a standard query or response (opcode ",
                              (scratch->q.flags >> 11) & 0xf, ", question count ", scratch->q.qdcount,
                              "); policy dns.nonstandard = FORWARD: not inspected"));
        return false;
      }
      ruleDrop(r, Stage::kDns, Verdict::kDrop, DropReason::kDnsNonstandard, kNoRule, "drop",
               absl::StrCat(how, ": not a standard query or response (opcode ",
                            (scratch->q.flags >> 11) & 0xf, ", question count ", scratch->q.qdcount,
                            "); policy dns.nonstandard = DROP"));
      return true;
    case DnsOutcome::kMalformed:
      if (dns->malformed == rules::Policy::kForward) {
        ruleStep(r, Stage::kDns, "pass", absl::StrCat(how, ": malformed (", dnsMsgStatusName(d.status),
                                                      "); policy dns.malformed = FORWARD"));
        return false;
      }
      ruleDrop(r, Stage::kDns, Verdict::kDrop, DropReason::kDnsMalformed, kNoRule, "drop",
               absl::StrCat(how, ": malformed (", dnsMsgStatusName(d.status),
                            "); policy dns.malformed = DROP"));
      return true;
    case DnsOutcome::kPass:
      if (d.match.list >= 0) {
        ruleStep(r, Stage::kDns, "allow",
                 absl::StrCat(what, ": allowed by list '", dns->lists[d.match.list]->name,
                              "', entry ", dnsEntryText(d.name, d.match)));
      } else {
        ruleStep(r, Stage::kDns, "pass", absl::StrCat(what, ": on no list"));
      }
      return false;
    case DnsOutcome::kAnswered:
    case DnsOutcome::kDropped:
      break;
  }
  const rules::CompiledDnsList& list = *dns->lists[d.match.list];
  std::string detail = absl::StrCat(what, ": ");
  if (d.cloaked) absl::StrAppend(&detail, "CNAME target '", dnsNameText(d.name), "' ");
  absl::StrAppend(&detail, "blocked by list '", list.name, "', entry ", dnsEntryText(d.name, d.match),
                  ", action ", rules::dnsActionName(d.match.action), "; dropped");
  DropReason reason = DropReason::kDnsDropped;
  if (d.outcome == DnsOutcome::kAnswered && !mayAnswer(frame, m)) {
    // As dnsUdp: no answer to or from a non-unicast address or MAC.
    reason = d.cloaked ? DropReason::kDnsCloaked : DropReason::kDnsDropped;
    absl::StrAppend(&detail, ", no answer (a broadcast, multicast, unspecified or loopback "
                             "address or MAC: answers go only between unicast hosts)");
  } else if (d.outcome == DnsOutcome::kAnswered) {
    reason = d.cloaked ? DropReason::kDnsCloaked : DropReason::kDnsAnswered;
    absl::StrAppend(&detail, d.onward ? ", NXDOMAIN sent on to the client" : ", answer sent back",
                    " (", d.answer_len, " bytes)");
  } else if (d.cloaked) {
    reason = DropReason::kDnsCloaked;
  }
  if (m.l4_proto == 6) absl::StrAppend(&detail, "; the server gets a RST and the connection is closed");
  ruleDrop(r, Stage::kDns, Verdict::kDrop, reason, uint32_t(d.match.list), "drop", detail);
  return true;
}

std::string dpiRuleList(const rules::CompiledDpi& dpi, const uint32_t* idx, uint32_t n) {
  std::string s;
  for (uint32_t k = 0; k < n; ++k) {
    const rules::DpiRule& rule = dpi.rules[idx[k]];
    absl::StrAppend(&s, k ? ", " : "", "'", rule.id(), "' (", rules::dpiActionName(rule.action), ")");
  }
  return s;
}

// --- http --- What libhtp and the file scans found while explain fed the packet (the
// Worker's HttpPathSink acts; this one records): the files the packet carried, with the
// file bytes it added, and every rule that fired in one.
struct ExplainFileSink final : HttpSink {
  struct File {
    HttpEventInfo info;
    uint64_t from = 0, to = 0;
  };
  const rules::CompiledDpi* dpi = nullptr;
  bool at_end = false;  // feeding the flow's end (HttpInspector::end)
  std::vector<File> files;
  std::vector<ExplainHttpMatch> matches;
  std::vector<uint32_t> fired;  // rules the packet made true in files (not at_end)
  std::vector<uint32_t> end_fired;

  static bool same(const HttpEventInfo& a, const HttpEventInfo& b) {
    return a.tx_id == b.tx_id && a.file_dir == b.file_dir && std::strcmp(a.filename, b.filename) == 0;
  }
  File& fileOf(const HttpEventInfo& f) {
    for (File& x : files)
      if (same(x.info, f)) return x;
    files.push_back({f, 0, 0});  // explain feeds one packet: every file starts in it
    return files.back();
  }
  static std::string hex(const uint8_t* p, int n) {
    std::string h;
    for (int k = 0; k < n; ++k) absl::StrAppend(&h, absl::Hex(p[k], absl::kZeroPad2));
    return h;
  }
  static const char* stateName(HttpFileState s) {
    return s == HttpFileState::kClosed ? "closed" : s == HttpFileState::kTruncated ? "truncated" : "open";
  }
  void fileScanned(const DpiOutcome& o, const HttpEventInfo& f) override {
    File& x = fileOf(f);
    const uint64_t from = x.to;  // the bytes this call added: [previous end, size)
    if (!at_end) {
      x.info = f;
      x.to = f.size;
    }
    for (uint32_t k = 0; k < o.nfired; ++k) {
      const rules::DpiRule& r = dpi->rules[o.fired[k]];
      (at_end ? end_fired : fired).push_back(o.fired[k]);
      ExplainHttpMatch m;
      m.rule = r.id();
      m.action = rules::dpiActionName(r.action);
      m.at_flow_end = at_end;
      m.method = f.method;
      m.host = f.host;
      m.url = f.url;
      m.status = f.status;
      m.tx_id = f.tx_id;
      m.filename = f.filename;
      m.direction = f.file_dir == 0 ? "request" : "response";
      m.offset_from = from == f.size && f.state != HttpFileState::kOpen ? 0 : from;
      m.offset_to = f.size;
      m.size = f.size;
      m.state = stateName(f.state);
      if (f.sha256_valid) m.sha256 = hex(f.sha256, 32);
      matches.push_back(std::move(m));
    }
  }
  void fileClosed(const HttpEventInfo& f) override {
    if (!at_end) fileOf(f).info = f;
    for (ExplainHttpMatch& m : matches) {  // the file's final size, state and digest
      if (m.tx_id != f.tx_id || m.filename != f.filename ||
          m.direction != (f.file_dir == 0 ? "request" : "response") || m.at_flow_end != at_end)
        continue;
      m.size = f.size;
      m.state = stateName(f.state);
      if (f.sha256_valid) m.sha256 = hex(f.sha256, 32);
    }
  }
  void transaction(const HttpEventInfo&) override {}
};

std::string httpFileText(const ExplainFileSink::File& x) {
  const HttpEventInfo& f = x.info;
  std::string s = absl::StrCat("file '", f.filename, "' (", f.file_dir == 0 ? "request" : "response",
                               " body of ", f.method[0] ? f.method : "?", " ", f.host, f.url);
  if (f.status != 0) absl::StrAppend(&s, ", status ", f.status);
  absl::StrAppend(&s, ", transaction ", f.tx_id, "): file bytes ", x.from, "..", x.to,
                  " in this packet, ", ExplainFileSink::stateName(f.state));
  if (f.state != HttpFileState::kOpen) {
    absl::StrAppend(&s, ", size ", f.size);
    if (f.sha256_valid) absl::StrAppend(&s, ", sha256 ", ExplainFileSink::hex(f.sha256, 32));
  } else {
    absl::StrAppend(&s, " (", f.size, " bytes so far)");
  }
  return s;
}

// DPI (dataplane/pipeline/dpi_path.cc): the payload as the first bytes of a new stream (a
// block scan for untracked packets and UDP datagrams), by DpiInspector on a runtime of its
// own for the snapshot's compiled rules; then the end of that stream. --- http --- With
// dpi.http, a TCP flow on an HTTP port (or starting with a request line) is parsed by libhtp
// as in http_path.cc: its bodies scanned as files, its raw stream by the stream-scoped rules.
bool explainDpi(const rules::Snapshot& snap, const uint8_t* frame, uint32_t len,
                const PacketMeta& m, bool tracked, ExplainResult& r) {
  if (!snap.dpi) return false;
  if (!m.has_l4 || m.is_fragment || (m.l4_proto != 6 && m.l4_proto != 17)) {
    ruleStep(r, Stage::kDpi, "skip", "not inspected: only TCP and UDP payload (not fragments)");
    return false;
  }
  const uint8_t* p = nullptr;
  uint32_t n = 0;
  if (!payloadOf(m, len, frame, &p, &n) || n == 0) {
    ruleStep(r, Stage::kDpi, "skip", "no payload");
    return false;
  }
  const rules::DpiModel& ms = snap.dpi_settings;
  DpiSettings ds;
  ds.streams_per_worker = 1;
  ds.ooo_slots_per_worker = 1;
  ds.ooo_buffer_bytes = 64;
  ds.prefilter_windows_per_worker = 1;
  ds.depth_bytes = ms.depth_bytes;
  ds.gap_policy = ms.gap_policy;
  ds.udp_stream = ms.udp_stream;
  auto rt = DpiRuntime::create(snap.dpi, ds, 1);
  if (!rt.ok()) {
    ruleStep(r, Stage::kDpi, "error", absl::StrCat("cannot scan here: ", rt.status().message()));
    return false;
  }
  const rules::CompiledDpi& dpi = *snap.dpi;
  DpiOutcome o;
  DpiDir dir;
  std::string how;
  // --- http --- the packet as the first bytes of an HTTP connection's direction.
  std::shared_ptr<HttpRuntime> hrt;
  HttpFlow hf;
  ExplainFileSink fsink;
  fsink.dpi = &dpi;
  std::string http_text;
  if (tracked && m.l4_proto == 6 && ms.http.enabled) {
    HttpSettings hs = httpSettingsOf(ms.http, snap.dataplane.tcp_dpi_fail == rules::Policy::kDrop);
    hs.flow_slots_per_worker = 1;
    auto h = HttpRuntime::create(hs, *rt, 1, httpScopesOf(dpi, ms.scopes));
    if (!h.ok()) {
      ruleStep(r, Stage::kDpi, "error", absl::StrCat("cannot parse HTTP here: ", h.status().message()));
      return false;
    }
    hrt = *h;
    bool to_server = true, http = true;
    std::string why;
    if (hrt->isHttpPort(m.dport)) {
      why = absl::StrCat("to HTTP port ", m.dport, ": the client's request bytes");
    } else if (hrt->isHttpPort(m.sport)) {
      to_server = false;
      why = absl::StrCat("from HTTP port ", m.sport, ": the server's response bytes");
    } else if (hs.detect_on_other_ports && HttpInspector::looksLikeRequest(p, n)) {
      why = "a request line on another port: the client's request bytes";
    } else {
      http = false;
    }
    if (http && HttpInspector::open(*hrt, 0, hf)) {
      const bool ok = HttpInspector::data(*hrt, 0, hf, to_server, p, n, 0, fsink);
      http_text = absl::StrCat("HTTP flow (", why, ")");
      if (!to_server)
        absl::StrAppend(&http_text, "; explain sees this packet alone: libhtp has no request to pair the response with");
      if (!ok) absl::StrAppend(&http_text, "; libhtp stopped parsing (the raw stream then reports every rule)");
      for (const ExplainFileSink::File& x : fsink.files) absl::StrAppend(&http_text, "; ", httpFileText(x));
      if (fsink.files.empty()) absl::StrAppend(&http_text, "; no body bytes in this packet");
      if (ok && hrt->holdsFiles() && HttpInspector::fileOpen(*hrt, 0, hf, to_server))
        absl::StrAppend(&http_text, "; the file stays open and a drop or reset rule is decided at its "
                                    "end: this packet is held back until the next one (hold-back)");
      // The raw stream of an HTTP flow reports only the rule sets scoped to the stream.
      dir.rt_id = (*rt)->id();
      if (ok) dir.flags |= DpiDir::kMaskHttpStream;
    } else {
      hrt.reset();
    }
  }
  if (!tracked) {
    DpiInspector::block(**rt, 0, p, n, o);
    how = "untracked packet, scanned on its own";
  } else if (m.l4_proto == 6) {
    DpiInspector::tcp(**rt, 0, dir, p, n, m.tcp_seq, m.tcp_flags, o);
    how = hrt ? absl::StrCat(http_text, "; raw stream (rule sets scoped to the stream only)")
              : "first payload of the flow direction's stream";
  } else {
    DpiInspector::udp(**rt, 0, dir, p, n, o);
    how = ms.udp_stream ? "first datagram of the flow direction's stream" : "UDP datagram, scanned on its own";
  }
  // The outcome's rule list lives in the runtime's per-worker array, which end() reuses.
  std::vector<uint32_t> fired(o.fired, o.fired + o.nfired);
  fired.insert(fired.end(), fsink.fired.begin(), fsink.fired.end());  // --- http --- in files
  if (hrt) {  // the files' end if the flow ended here (bodies not complete: truncated)
    fsink.at_end = true;
    HttpInspector::end(*hrt, 0, hf, fsink);
  }
  DpiOutcome at_end;
  if (tracked) DpiInspector::end(**rt, 0, dir, at_end);
  std::vector<uint32_t> end_fired(at_end.fired, at_end.fired + at_end.nfired);
  end_fired.insert(end_fired.end(), fsink.end_fired.begin(), fsink.end_fired.end());
  r.http = std::move(fsink.matches);
  std::string detail = absl::StrCat(how, ": ", o.scanned, " of ", n, " bytes scanned",
                                    o.depth_reached ? " (depth limit dpi.depth_bytes reached)" : "",
                                    ", ", dpi.rules.size(), " rules");
  std::string end_note;
  if (!end_fired.empty()) {
    end_note = absl::StrCat("; if the stream ended here, also (alerts at the stream's end): ",
                            dpiRuleList(dpi, end_fired.data(), uint32_t(end_fired.size())));
  }
  if (fired.empty()) {
    ruleStep(r, Stage::kDpi, "pass", absl::StrCat(detail, ": no rule matches", end_note));
    return false;
  }
  // Strongest action wins, as in Worker::dpiAct: reset > drop > alert.
  int best = -1;
  uint32_t best_rule = kNoRule;
  for (const uint32_t f : fired) {
    const int a = static_cast<int>(dpi.rules[f].action);
    if (a > best) {
      best = a;
      best_rule = f;
    }
  }
  absl::StrAppend(&detail, ": matching ", dpiRuleList(dpi, fired.data(), uint32_t(fired.size())));
  for (const ExplainHttpMatch& hm : r.http) {  // --- http --- where each file match was
    if (hm.at_flow_end) continue;
    absl::StrAppend(&detail, "; '", hm.rule, "' in file '", hm.filename, "' (", hm.direction,
                    " of ", hm.method, " ", hm.host, hm.url, ", file bytes ", hm.offset_from, "..",
                    hm.offset_to, ")");
  }

  const bool tcp = m.l4_proto == 6;
  if (best == static_cast<int>(rules::DpiAction::kAlert)) {
    ruleStep(r, Stage::kDpi, "alert", absl::StrCat(detail, "; alert event, forwarded", end_note));
    return false;
  }
  if (best == static_cast<int>(rules::DpiAction::kReset) && tcp) {
    ruleDrop(r, Stage::kDpi, Verdict::kReject, DropReason::kDpiReset, best_rule, "reset",
             absl::StrCat(detail, "; dropped, TCP RST sent to both ends, the flow is blocked"));
    return true;
  }
  ruleDrop(r, Stage::kDpi, Verdict::kDrop, DropReason::kDpiDrop, best_rule, "drop",
           absl::StrCat(detail, best == static_cast<int>(rules::DpiAction::kReset)
                                    ? "; dropped (reset on UDP: as drop), the flow is blocked"
                                    : "; dropped, the flow is blocked"));
  return true;
}

std::string hexBytes(const uint8_t* b, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) absl::StrAppend(&s, absl::Hex(b[i], absl::kZeroPad2));
  return s;
}

// Load balancer (dataplane/pipeline/lb_path.cc), a new flow's first packet: the first
// service matching, its key fields (lbExtractField), the key hash (keyHash), the Maglev
// table slot and backend (pick), and the rewrite of the service's mode.
bool explainLb(const rules::Snapshot& snap, const uint8_t* frame, uint32_t len,
               const PacketMeta& m, ExplainResult& r) {
  const rules::CompiledLb* lb = snap.lb.get();
  if (lb == nullptr || lb->services.empty() || m.l3 == L3Type::kNone) return false;
  rules::LbPacket p;
  lbView(m, frame, len, p);
  uint32_t si = 0;
  const rules::CompiledLbService* svc = lb->match(p, &si);
  if (svc == nullptr) {
    ruleStep(r, Stage::kLb, "pass", absl::StrCat("no service matches (", lb->services.size(),
                                                 " services): forwarded unchanged"));
    return false;
  }
  std::string key;
  if (svc->fields.empty()) {
    key = "5-tuple";
  } else {
    for (const rules::CompiledLbField& f : svc->fields) {
      uint8_t buf[rules::kLbMaxKeyBytes];
      int w = rules::lbExtractField(f, p, buf);
      std::string name = f.kind == rules::LbFieldKind::kRaw
                             ? absl::StrCat("raw ", rules::lbAnchorName(f.anchor), "+", f.offset,
                                            "/", f.length)
                             : rules::lbFieldName(f.kind);
      absl::StrAppend(&key, key.empty() ? "" : ", ", name, " = ",
                      w < 0 ? std::string("missing") : hexBytes(buf, w));
    }
  }
  bool missing = false;
  const uint64_t h = svc->keyHash(p, &missing);
  std::string detail = absl::StrCat("service '", svc->model.id, "' (", rules::lbModeName(svc->mode),
                                    "); key: ", key);
  if (missing) {
    if (svc->fallback == rules::LbFallback::kDrop) {
      ruleDrop(r, Stage::kLb, Verdict::kDrop, DropReason::kLbKeyMissing, kNoRule, "drop",
               absl::StrCat(detail, "; a key field is missing and the fallback is drop"));
      return true;
    }
    absl::StrAppend(&detail, "; a key field is missing: the 5-tuple is hashed (fallback)");
  }
  absl::StrAppend(&detail, absl::StrFormat("; hash 0x%016x", h));
  const uint16_t be = svc->pick(h);
  if (be == rules::kLbNoBackend) {
    ruleDrop(r, Stage::kLb, Verdict::kDrop, DropReason::kLbNoBackend, kNoRule, "drop",
             absl::StrCat(detail, "; no backend in the table (all down, draining or weight 0)"));
    return true;
  }
  const rules::CompiledLbBackend& b = svc->backends[be];
  absl::StrAppend(&detail, ", table slot ", rules::lbReduce(h, svc->table_size), " of ",
                  svc->table_size, " -> backend '", b.id, "'");
  const bool v4 = m.l3 == L3Type::kIpv4;
  IpAddr a{};
  switch (svc->mode) {
    case rules::LbMode::kL2:
      absl::StrAppend(&detail, "; destination MAC := ", absl::StrFormat("%02x:%02x:%02x:%02x:%02x:%02x",
                      b.mac[0], b.mac[1], b.mac[2], b.mac[3], b.mac[4], b.mac[5]));
      break;
    case rules::LbMode::kNat:
    case rules::LbMode::kIpip: {
      const bool has = v4 ? b.has_v4 : b.has_v6;
      const bool tun = svc->mode == rules::LbMode::kNat || (v4 ? svc->has_tun_v4 : svc->has_tun_v6);
      if (!has || !tun) {
        ruleDrop(r, Stage::kLb, Verdict::kDrop, DropReason::kLbNoAddress, kNoRule, "drop",
                 absl::StrCat(detail, "; the backend (or the service's tunnel source) has no ",
                              v4 ? "IPv4" : "IPv6", " address"));
        return true;
      }
      std::memcpy(a.b, v4 ? b.v4 : b.v6, v4 ? 4 : 16);
      if (svc->mode == rules::LbMode::kNat) {
        absl::StrAppend(&detail, "; destination := ", addr(a, m.l3),
                        b.port ? absl::StrCat(" port ", b.port) : std::string(),
                        " (NAT; answers get the service address back)");
      } else {
        absl::StrAppend(&detail, "; encapsulated (IP-in-IP) to ", addr(a, m.l3));
      }
      break;
    }
  }
  r.verdict.backend = be;
  r.verdict.lb_service = uint16_t(si);
  r.backend = b.id;
  ruleStep(r, Stage::kLb, "balance", detail);
  return false;
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
           absl::StrCat(parseStatusName(ps), "; policy dataplane.malformed = DROP"));
    } else {
      v.verdict = Verdict::kForward;
      step(Stage::kParse, "forward",
           absl::StrCat(parseStatusName(ps), "; policy dataplane.malformed = FORWARD (no flow)"));
    }
    return r;
  }
  step(Stage::kParse, "pass", r.summary);

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
  // Rule stages, in DESIGN.md order (dataplane/pipeline/rule_stages.cc), on the snapshot's
  // compiled objects with the stages' own code: a stage that drops ends the trace there.
  const bool tracked = !(is_tcp && !(m.tcp_flags & kTcpSyn) && (m.tcp_flags & kTcpRst));
  if (explainDns(snap, frame, len, m, tracked, r)) return r;
  if (explainDpi(snap, frame, len, m, tracked, r)) return r;
  if (explainLb(snap, frame, len, m, r)) return r;
  v.verdict = Verdict::kForward;
  step(Stage::kNone, "forward", side == kSideA ? "out of side B" : "out of side A");
  return r;
}

}  // namespace dpu::dp
